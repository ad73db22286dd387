# One element of an f32 sv as a scalar (load(tkc.f32, s, at=(i,))): a tk.load
# {elements} of the sv to f32, lowered to one ld.shared.b32 whose address
# depends on the warp (its index here) and not on the lane: every lane reads
# the same word (a broadcast), then scales its row vector by it.
# RUN: tkc %s --emit=tile | FileCheck %s
# RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX
import tkc
from tkc import f32, gl, rv, sv
from tkc.ops import group_load, load, store

# CHECK-LABEL: func.func @sv_scalar
# CHECK: "tk.load"(%{{.*}}, %{{.*}}) {elements} : (!tk.sv<f32, 64 : i64>, index) -> f32
# PTX-LABEL: .entry sv_scalar(
# PTX: shr.u32 [[W:%r[0-9]+]], %r{{[0-9]+}}, 5;
# PTX: bar.sync 0;
# PTX-NEXT: mul.wide.u32 [[OFF:%rd[0-9]+]], [[W]], 28;
# PTX-NEXT: add.s64 [[P:%rd[0-9]+]], %rd{{[0-9]+}}, [[OFF]];
# PTX-NEXT: ld.shared.b32 [[S:%r[0-9]+]], {{\[}}[[P]]+12];
# PTX-NOT: ld.shared
# PTX: mul.rn.f32 {{%r[0-9]+}}, [[S]], {{%r[0-9]+}};


@tkc.kernel(warps=4, grid=lambda x, y: (1,))
def sv_scalar(x: gl(f32, 1, 1, 1, 64), y: gl(f32, 1, 1, 1, 128)):
    s = sv(f32, 64)
    group_load(s, x, (0, 0, 0, 0))
    tkc.sync()
    v = load(f32, s, at=(tkc.warpid() * 7 + 3,))
    store(y, load(rv(f32, 32, "row"), x, (0, 0, 0, 0)) * v, (0, 0, 0, tkc.warpid()))
