// tk.store {deinterleave}: an f32 row-layout rt into an f32 st by stmatrix,
// each 32-bit register one b16 pair of the instruction, two .x4 per 16x16
// base tile (its 8-column halves); each 8 columns land as their evens, then
// their odds. The 128b-swizzled f32 tile (attention_bwd's dQ tile) takes
// these 16-byte rows with no bank conflict, where the fragment's 8-byte
// pairs conflict 2-way (rows r and r ^ 1 share the chunks the swizzle swaps).
// RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tkc %s --pass-pipeline=tk-layout-selection,tk-bank-report 2>&1 >/dev/null | FileCheck %s --check-prefix=BANKS

// PTX-LABEL: .entry deinterleave(
// PTX-COUNT-4: stmatrix.sync.aligned.m8n8.x4.shared.b16 [%r{{[0-9]+}}+{{[0-9]+}}], {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}};
// PTX-NOT: stmatrix
// PTX-COUNT-8: st.shared.v2.b32
// PTX-NOT: st.shared
// PTX: ret;

// BANKS: k.py:4:3: remark: 1-way shared-memory bank conflicts: deinterleave of st<f32, 64, 32, "128b">
// BANKS: k.py:5:3: remark: 2-way shared-memory bank conflicts: f32 pair of st<f32, 64, 32, "128b">

!s = !tk.st<f32, 64 : i64, 32 : i64, "128b">
!r = !tk.rt<f32, 16 : i64, 32 : i64, "row">
func.func @deinterleave() attributes {tk.kernel, tk.warps = 4 : i64} {
  %c0 = arith.constant 0 : index
  %w = "tk.warpid"() : () -> index
  %s = "tk.alloc"() : () -> !s
  %x = "tk.zero"() : () -> !r
  "tk.store"(%s, %x, %w, %c0) {deinterleave} : (!s, !r, index, index) -> () loc("k.py":4:3)
  "tk.store"(%s, %x, %w, %c0) : (!s, !r, index, index) -> () loc("k.py":5:3)
  return
}
