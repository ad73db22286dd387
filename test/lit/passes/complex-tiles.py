# Complex tiles are pairs of real tiles: the tile IR holds only real ops. A
# complex wgmma is 4 real ones into the two accumulators, the minus of
# re(a) re(b) - im(a) im(b) and the conjugates' signs given to the wgmma as
# `negate` (imm-scale-a = -1 in the PTX), never as negated data; elementwise
# complex products are a mul and an fma a part; loads and stores go part by part.
# RUN: tkc %s --emit=tile | FileCheck %s
# RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX
import tkc
from tkc import bf16, f32, gl, warpgroup
from tkc.ops import zero

# CHECK-LABEL: func.func @cmma
# CHECK-COUNT-4: "tk.group_load"
# c = a @ conj(b): re = a.re b.re + a.im b.im, im = -a.re b.im + a.im b.re
# CHECK: %[[RE0:.*]] = "tk.warpgroup_mma_ab"(%{{.*}}, %{{.*}}, %{{.*}}) :
# CHECK-NEXT: %[[RE:.*]] = "tk.warpgroup_mma_ab"(%{{.*}}, %{{.*}}, %[[RE0]]) :
# CHECK-NEXT: %[[IM0:.*]] = "tk.warpgroup_mma_ab"(%{{.*}}, %{{.*}}, %{{.*}}) {negate = true}
# CHECK-NEXT: %[[IM:.*]] = "tk.warpgroup_mma_ab"(%{{.*}}, %{{.*}}, %[[IM0]]) :
# CHECK: "tk.warpgroup_mma_wait"(%[[RE]], %[[IM]])
# the elementwise product (c * c), an FMUL and an FFMA a part:
# re = fma(re, re, -(im*im)), im = fma(re, im, im*re)
# CHECK: "tk.mul"
# CHECK-NEXT: "tk.neg"
# CHECK-NEXT: "tk.fma"
# CHECK-NEXT: "tk.mul"
# CHECK-NEXT: "tk.fma"
# CHECK-COUNT-2: "tk.store"
# PTX-LABEL: .entry cmma(
# PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, 1, 1, 1, 0, 1;
# PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, 1, -1, 1, 0, 1;
# PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, 1, 1, 1, 0, 1;
# PTX-NOT: wgmma.mma_async

M = gl(bf16, 1, 1, 64, 64)
O = gl(f32, 1, 1, 64, 64)


@tkc.kernel(warps=4, grid=lambda *_: (1,))
def cmma(a_re: M, a_im: M, b_re: M, b_im: M, o_re: O, o_im: O):
    a, b = tkc.cst(bf16, 64, 64), tkc.cst(bf16, 64, 64)
    tkc.ops.group_load(a, tkc.cgl(a_re, a_im), (0, 0, 0, 0))
    tkc.ops.group_load(b, tkc.cgl(b_re, b_im), (0, 0, 0, 0))
    tkc.sync()
    c = warpgroup.mma_AB(a, b.conj(), zero(tkc.crt(f32, 16, 64)))
    c = warpgroup.mma_async_wait(c)
    warpgroup.store(tkc.cgl(o_re, o_im), c * c, (0, 0, 0, 0))
