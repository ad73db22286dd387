# A Python kernel file is traced, run through the tile pipeline and printed;
# --emit gives each later stage.
# RUN: tkc %s | FileCheck %s --check-prefix=TILE
# RUN: tkc %s --pass-pipeline=tk-verify | FileCheck %s --check-prefix=AUTO
# RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
# RUN: tkc %s --emit=ptx -o %t.ptx && FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: tkc %s --emit=cubin -o %t.cubin
# RUN: %python -c "import sys; print(open(sys.argv[1], 'rb').read()[:4])" %t.cubin | FileCheck %s --check-prefix=CUBIN
# RUN: tkc %s --emit=cubin | %python -c "import sys; print(sys.stdin.buffer.read()[:4])" | FileCheck %s --check-prefix=CUBIN
import tkc
from tkc import f32, gl, rt, st
from tkc.frontend.ops import exp, group_load, load, store

# TILE-LABEL: func.func @exp_rows
# TILE-SAME: tk.arg_names = ["a", "o"]
# TILE-SAME: tk.grid = ["a.r // 32", "1", "1"]
# TILE-SAME: tk.warps = 2 : i64
# TILE: "tk.alloc"() : () -> !tk.st<f32, 32 : i64, 32 : i64, "128b">
# TILE: "tk.group_load"
# TILE: "tk.exp"
# AUTO: "tk.alloc"() : () -> !tk.st<f32, 32 : i64, 32 : i64, "auto">
# NVVM: gpu.module @tkc
# NVVM: llvm.func @exp_rows
# PTX: .target sm_90a
# PTX: .entry exp_rows(
# CUBIN: b'\x7fELF'


@tkc.kernel(warps=2, grid=lambda a, o: (a.r // 32, 1, 1))
def exp_rows(a: gl(f32, 1, 1, None, 32), o: gl(f32, 1, 1, None, 32)):
    s = st(f32, 32, 32)
    group_load(s, a, (0, 0, tkc.block_idx.x, 0))
    tkc.sync()
    x = load(rt(f32, 16, 32), s, (tkc.warpid(), 0))
    store(o, exp(x), (0, 0, tkc.block_idx.x * 2 + tkc.warpid(), 0))
