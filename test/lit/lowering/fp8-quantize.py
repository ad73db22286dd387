# tkc.quantize_fp8's kernel (tkc/kernels/quantize_fp8.py): a bf16 tile read
# 16 bytes a lane (wide layout, ragged rows read 0), NaNs left out of the row
# max by a select, the multiplier and the scale by correctly rounded
# divisions (div.rn.f32: the interpreter's numpy division), the e4m3 pairs by
# cvt.rn.satfinite, and the 8-bit tile's 16-byte stores (the two lanes of a
# row trade 8-byte halves, shfl.bfly 16, so each store fills whole 32-byte
# sectors), each behind its bounds check (a clipped store: rows past M are
# not written), as the scales'
# 4-byte stores. ptxas takes the result.
# RUN: tkc %s --emit=ptx -o %t.ptx && FileCheck %s < %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
from tkc.kernels.quantize_fp8 import quantize_fp8  # noqa: F401

# CHECK-LABEL: .entry quantize_fp8(
# CHECK-COUNT-8: @%p{{[0-9]+}} ld.global.v4.b32
# CHECK: setp.num.bf16
# CHECK: selp.f32
# CHECK: max.f32
# CHECK: div.rn.f32
# CHECK: cvt.rn.satfinite.e4m3x2.f32
# CHECK: shfl.sync.bfly.b32 {{.*}}, 16, 31, -1;
# CHECK: @%p{{[0-9]+}} bra
# CHECK: st.global.v4.b32
# CHECK-NOT: st.global.v2.b32
# CHECK: st.global.b32
