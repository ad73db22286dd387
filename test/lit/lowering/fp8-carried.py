# An 8-bit row-layout tile carried by a loop (attention's P under the
# overlap schedule) travels as i32 words of four bytes in the order wgmma's
# 8-bit A registers hold them (registers.word_order: per base tile e0, e1,
# e4, e5 then e2, e3, e6, e7), so the words a cvt pair makes with one
# `mov.b32 {lo, hi}` are the loop's values and the wgmma's operands as they
# are: no byte moves (bfi, prmt, shr) anywhere, 2 words a warp's 16 x 16.
# RUN: tkc %s --emit=ptx -o %t.ptx && FileCheck %s < %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
import tkc
from tkc import f8e4m3, f32, gl, rt, st, tma, warpgroup
from tkc.ops import load, store, zero

# CHECK-LABEL: .entry carried(
# CHECK-NOT: bfi.b32
# CHECK-NOT: prmt.b32
# CHECK-NOT: shr.u16
# CHECK: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {{{.*}}}, {%r[[A0:[0-9]+]], %r[[A1:[0-9]+]], %r{{[0-9]+}}, %r{{[0-9]+}}}, %tkd0, 1, 1, 1;
# CHECK: wgmma.wait_group.sync.aligned 0;
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E01:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E23:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E45:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E67:[0-9]+]],
# CHECK: mov.b32 %r[[A0]], {%rs[[E01]], %rs[[E45]]};
# CHECK-NEXT: mov.b32 %r[[A1]], {%rs[[E23]], %rs[[E67]]};
# CHECK-NEXT: mov.b32
# CHECK: @%p{{[0-9]+}} bra $L__BB0_{{[0-9]+}};
# CHECK-NOT: bfi.b32
# CHECK-NOT: prmt.b32
# CHECK-NOT: shr.u16


@tkc.kernel(warps=4, grid=lambda a, b, c: (1,))
def carried(a: gl(f32, 1, 1, "N", 64), b: gl(f8e4m3, 1, 1, 64, 64), c: gl(f32, 1, 1, 64, 64)):
    w = tkc.warpid()
    b_s = st(f8e4m3, 64, 64)
    tma.load(b_s, b, (0, 0, 0, 0))
    acc = zero(rt(f32, 16, 64))
    p = load(rt(f32, 16, 64), a, (0, 0, w, 0)).to(f8e4m3)
    for _ in tkc.range(a.r // 64):
        warpgroup.mma_ABt(acc, p, b_s, k_order="lanes")
        warpgroup.mma_async_wait(acc)
        p = acc.to(f8e4m3)          # the next product's A, carried to the next iteration
    store(c, acc, (0, 0, w, 0))
