// tk-verify on an 8-bit A in registers (docs/tile-ir.md, "k_order"): wgmma
// takes it only as warpgroup_mma_abt's A with k_order = "lanes" (its columns
// enter in warpgroup.fp8_lane_order()), and k_order means nothing elsewhere.
// Each refusal is reported at its line; the valid kernel reports nothing.
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | FileCheck %s
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | count 6

!p8 = !tk.rt<f8E4M3FN, 16 : i64, 64 : i64, "row">
!p16 = !tk.rt<bf16, 16 : i64, 64 : i64, "row">
!f = !tk.rt<f32, 16 : i64, 64 : i64, "row">
!v8 = !tk.st<f8E4M3FN, 128 : i64, 64 : i64, "auto">
!v8n = !tk.st<f8E4M3FN, 64 : i64, 128 : i64, "auto">
!q8 = !tk.st<f8E4M3FN, 64 : i64, 64 : i64, "auto">
!v16 = !tk.st<bf16, 128 : i64, 64 : i64, "auto">
!acc = !tk.rt<f32, 16 : i64, 128 : i64, "row">
func.func @valid() attributes {tk.kernel, tk.warps = 4 : i64} {
  %v = "tk.alloc"() : () -> !v8
  %z = "tk.zero"() : () -> !acc
  %s = "tk.zero"() : () -> !f
  %p = "tk.copy"(%s) : (!f) -> !p8
  %d = "tk.warpgroup_mma_abt"(%p, %v, %z) {k_order = "lanes"} : (!p8, !v8, !acc) -> !acc
  %e = "tk.warpgroup_mma_wait"(%d) {pending = 0 : i64} : (!acc) -> !acc
  return
}

func.func @invalid() attributes {tk.kernel, tk.warps = 4 : i64} {
  %v = "tk.alloc"() : () -> !v8
  %vn = "tk.alloc"() : () -> !v8n
  %q = "tk.alloc"() : () -> !q8
  %v16 = "tk.alloc"() : () -> !v16
  %z = "tk.zero"() : () -> !acc
  %s = "tk.zero"() : () -> !f
  %p = "tk.copy"(%s) : (!f) -> !p8
  %b = "tk.copy"(%s) : (!f) -> !p16
  // CHECK: fp8-lanes-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_abt: an 8-bit a in registers enters wgmma with its columns in another order {{.*}} say k_order="lanes"
  %0 = "tk.warpgroup_mma_abt"(%p, %v, %z) : (!p8, !v8, !acc) -> !acc
  // CHECK: fp8-lanes-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_abt: k_order must be one of ('lanes',), got 'rows'
  %1 = "tk.warpgroup_mma_abt"(%p, %v, %z) {k_order = "rows"} : (!p8, !v8, !acc) -> !acc
  // CHECK: fp8-lanes-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_abt: k_order="lanes" is the K order of an 8-bit a in registers; this mma has none
  %2 = "tk.warpgroup_mma_abt"(%b, %v16, %z) {k_order = "lanes"} : (!p16, !v16, !acc) -> !acc
  // CHECK: fp8-lanes-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_abt: k_order="lanes" is the K order of an 8-bit a in registers; this mma has none
  %3 = "tk.warpgroup_mma_abt"(%q, %v, %z) {k_order = "lanes"} : (!q8, !v8, !acc) -> !acc
  // CHECK: fp8-lanes-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_ab: an 8-bit a in registers is the ABt form only
  %4 = "tk.warpgroup_mma_ab"(%p, %vn, %z) {k_order = "lanes"} : (!p8, !v8n, !acc) -> !acc
  // CHECK: fp8-lanes-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_abt: k_order must be one of ('lanes',), got '1 : i64'
  %5 = "tk.warpgroup_mma_abt"(%p, %v, %z) {k_order = 1 : i64} : (!p8, !v8, !acc) -> !acc
  return
}
