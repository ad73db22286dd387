# 8-bit float register tiles are held as their bits (i8) and converted in
# pairs: f32 -> e4m3 / e5m2 by cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 (one
# instruction per two values), back by cvt.rn.f16x2.{e4m3x2,e5m2x2} then
# cvt.f32.f16 (exact), bf16 through f32; a wide tile's bytes move 16 a lane
# (the two lanes of a row trade 8-byte halves: whole 32-byte sectors a
# store). ptxas takes the result.
# RUN: tkc %s --emit=tile | FileCheck %s --check-prefix=TILE
# RUN: tkc %s --emit=ptx -o %t.ptx && FileCheck %s < %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
import tkc
from tkc import bf16, f8e4m3, f8e5m2, f32, gl, rt
from tkc.ops import load, store

# TILE: "tk.copy"(%{{.*}}) : (!tk.rt<f32, 16 : i64, 64 : i64, "wide">) -> !tk.rt<f8E4M3FN, 16 : i64, 64 : i64, "wide">
# TILE: "tk.store"(%arg1, {{.*}}) : (!tk.gl<f8E4M3FN, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, !tk.rt<f8E4M3FN
# TILE: "tk.copy"(%{{.*}}) : (!tk.rt<f8E5M2, 16 : i64, 64 : i64, "wide">) -> !tk.rt<bf16
# CHECK-LABEL: .entry convert(
# CHECK: ld.global.v4.b32
# CHECK-COUNT-16: cvt.rn.satfinite.e4m3x2.f32
# CHECK: shfl.sync.bfly.b32 {{.*}}, 16, 31, -1;
# CHECK: st.global.v4.b32
# CHECK: cvt.rn.satfinite.e5m2x2.f32
# CHECK: ld.global.v4.b16
# CHECK: cvt.rn.f16x2.e5m2x2
# CHECK-NEXT: mov.b32 {tklo, tkhi}
# CHECK-NEXT: cvt.f32.f16 {{%.*}}, tklo;
# CHECK-NEXT: cvt.f32.f16 {{%.*}}, tkhi;
# CHECK: cvt.rn.bf16x2.f32


@tkc.kernel(warps=1, grid=lambda x, q4, q5, y: (x.r // 16,))
def convert(x: gl(f32, 1, 1, "N", 64), q4: gl(f8e4m3, 1, 1, "N", 64), q5: gl(f8e5m2, 1, 1, "M", 64),
            y: gl(bf16, 1, 1, "N", 64)):
    i = tkc.block_idx.x
    t = load(rt(f32, 16, 64), x, (0, 0, i, 0))
    store(q4, t.to(f8e4m3), (0, 0, i, 0))
    store(q5, t.to(f8e5m2), (0, 0, i + x.r // 16, 0))
    store(y, load(rt(f8e5m2, 16, 64), q5, (0, 0, i, 0)).to(bf16), (0, 0, i, 0))
