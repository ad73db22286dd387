# tk-pipeline-staging, persistent: a finish that stores through a gl slice the work item
# made before its loop (the MoE counts kernel's C at a tile's first row) stays at the
# item's end: only tiles and scalars ride to the next item in iter_args, and a gl value
# there aborted the compiler (a constant of gl type as its placeholder).
# RUN: tkc %s | FileCheck %s
import tkc
from tkc import bf16, f32, gl, i32, rt, st, tma, warpgroup
from tkc.ops import load, subtile, zero

# CHECK-LABEL: func.func @sliced
# CHECK-NOT: = %false) ->
# CHECK: } {tk.staged = {role = "consumer"
# CHECK: "tk.tma_store"
# CHECK: } {tk.work_items}


@tkc.kernel(warps=8, persistent=True, grid=lambda a, b, rows, c: (c.c // 128, c.r // 128))
def sliced(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "N", "K"), rows: gl(i32, 1, 1, 1, None),
           c: gl(bf16, 1, 1, "M", "N")):
    bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
    row0 = load(i32, rows, at=(0, 0, 0, bm), fill=0)   # the tile's first row, any row
    cs = c.slice("r", row0, 128)
    a_s, b_s, c_s = st(bf16, 128, 64), st(bf16, 128, 64), st(bf16, 128, 128)
    acc = zero(rt(f32, 16, 128))
    for k in tkc.range(a.c // 64, stages=2):
        tma.load(a_s, a, (0, 0, bm, k))
        tma.load(b_s, b, (0, 0, bn, k))
        warpgroup.mma_ABt(acc, subtile(a_s, 64, 64, (wg, 0)), b_s)
        warpgroup.mma_async_wait(acc)
    warpgroup.store(c_s, acc.to(bf16), (wg, 0))
    tma.store(cs, c_s, (0, 0, 0, bn))
