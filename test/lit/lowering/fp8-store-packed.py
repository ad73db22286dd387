# store(packed=True) of an 8-bit row-layout rt into a gl of its dtype: a
# lane's columns 2t, 2t+1, 2t+8, 2t+9 of each 16 go to 4t .. 4t+3 as one
# st.global.b32, its bytes the two cvt pairs as they came (mov.b32 {lo, hi}:
# columns 2t, 2t+1 low, 2t+8, 2t+9 high); rows g and g+8 of each 16 x 16
# base tile are two stores. tkc.fp8_v_layout's kernel stores V^T so (each 16
# columns in warpgroup.fp8_lane_order()'s order).
# RUN: tkc %s --emit=ptx -o %t.ptx && FileCheck %s < %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
import tkc
from tkc import f8e4m3, f32, gl, rt
from tkc.ops import load, store

# CHECK-LABEL: .entry packed8(
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E01:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E23:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E45:[0-9]+]],
# CHECK: cvt.rn.satfinite.e4m3x2.f32 %rs[[E67:[0-9]+]],
# CHECK: mov.b32 %r[[TOP:[0-9]+]], {%rs[[E01]], %rs[[E45]]};
# CHECK: st.global.b32 [%rd{{[0-9]+}}], %r[[TOP]];
# CHECK: mov.b32 %r[[BOTTOM:[0-9]+]], {%rs[[E23]], %rs[[E67]]};
# CHECK: st.global.b32 [%rd{{[0-9]+}}], %r[[BOTTOM]];
# CHECK-COUNT-2: st.global.b32
# CHECK-NOT: st.global


@tkc.kernel(warps=1, grid=lambda a, o: (1,))
def packed8(a: gl(f32, 1, 1, 16, 32), o: gl(f8e4m3, 1, 1, 16, 32)):
    store(o, load(rt(f32, 16, 32), a, (0, 0, 0, 0)).to(f8e4m3), (0, 0, 0, 0), packed=True)
