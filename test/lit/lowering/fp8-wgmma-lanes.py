# wgmma with an 8-bit A in registers (k_order="lanes", docs/tile-ir.md):
# m64nNk32 .e4m3 takes A as four b32 registers, a0/a1 rows g/g+8 of k 0..15
# of the step, a2/a3 of k 16..31. The lane's own bytes go in as they lie:
# per 16 columns its pairs (2q, 2q+1) and (2q+8, 2q+9), each one cvt's i16,
# so a0 = {pair e0e1, pair e4e5} of the step's first 16 columns (row g),
# a1 = {e2e3, e6e7} (row g+8), a2 and a3 the same of the next 16: a
# `mov.b32 {lo, hi}` each, no shuffle. No transpose immediates (8-bit);
# B's descriptor completes as for a shared A (fp8-wgmma.py).
# RUN: tkc %s --emit=ptx -o %t.ptx && FileCheck %s < %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
import tkc
from tkc import f8e4m3, f32, gl, rt, st, tma, warpgroup
from tkc.ops import load, store, zero

# CHECK-LABEL: .entry mma_lanes(
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E01:[0-9]+]], %r{{[0-9]+}}, %r{{[0-9]+}};
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E23:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E45:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E67:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[F01:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[F23:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[F45:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[F67:[0-9]+]],
# CHECK: mov.b32 %r[[A0:[0-9]+]], {%rs[[E01]], %rs[[E45]]};
# CHECK-NEXT: mov.b32 %r[[A1:[0-9]+]], {%rs[[E23]], %rs[[E67]]};
# CHECK-NEXT: mov.b32 %r[[A2:[0-9]+]], {%rs[[F01]], %rs[[F45]]};
# CHECK-NEXT: mov.b32 %r[[A3:[0-9]+]], {%rs[[F23]], %rs[[F67]]};
# CHECK: wgmma.fence.sync.aligned;
# CHECK: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {{{.*}}}, {%r[[A0]], %r[[A1]], %r[[A2]], %r[[A3]]}, %tkd0, 1, 1, 1;
# CHECK: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {{{.*}}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %tkd0, 1, 1, 1;
# CHECK-NOT: wgmma.mma_async
# CHECK: wgmma.commit_group.sync.aligned


@tkc.kernel(warps=4, grid=lambda a, b, c: (1,))
def mma_lanes(a: gl(f32, 1, 1, 64, 64), b: gl(f8e4m3, 1, 1, 64, 64), c: gl(f32, 1, 1, 64, 64)):
    w = tkc.warpid()
    b_s = st(f8e4m3, 64, 64)
    tma.load(b_s, b, (0, 0, 0, 0))
    acc = zero(rt(f32, 16, 64))
    warpgroup.mma_ABt(acc, load(rt(f32, 16, 64), a, (0, 0, w, 0)).to(f8e4m3), b_s, k_order="lanes")
    warpgroup.mma_async_wait(acc)
    store(c, acc, (0, 0, w, 0))
