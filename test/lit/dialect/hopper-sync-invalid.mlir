// tk-verify rules of the mbarrier and TMA ops, each at its line.
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | FileCheck %s
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | count 12
!g = !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 20 : i64>
!s = !tk.st<bf16, 512 : i64, 64 : i64, "128b">
!f = !tk.st<f32, 16 : i64, 16 : i64, "none">
!v = !tk.sv<bf16, 512 : i64>
func.func @bad(%a: !g) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %s = "tk.alloc"() : () -> !s
  %f = "tk.alloc"() : () -> !f
  %v = "tk.alloc"() : () -> !v
  %bar = "tk.alloc"() : () -> !tk.barrier
  // CHECK: hopper-sync-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: init_barrier: count must be an integer >= 1, got 0
  "tk.init_barrier"(%bar) {count = 0 : i64} : (!tk.barrier) -> ()
  // CHECK: hopper-sync-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: expect_bytes: bytes must be an integer in 1..1048575, got 2000000
  "tk.expect_bytes"(%bar) {bytes = 2000000 : i64} : (!tk.barrier) -> ()
  // CHECK: hopper-sync-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: tma_load: a TMA box is at most 256 x 256 elements
  // CHECK: hopper-sync-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: tma_load: a gl used with TMA needs rows of a multiple of 16 bytes; dim c = 20 gives 40
  "tk.tma_load"(%s, %a, %c0, %c0, %c0, %c0, %bar) : (!s, !g, index, index, index, index, !tk.barrier) -> ()
  // CHECK: hopper-sync-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: tma_load: a TMA box is at most 256 x 256 elements; !tk.sv<bf16, 512 : i64> needs a 1 x 512 box
  // CHECK: hopper-sync-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: tma_load: a gl used with TMA needs rows
  "tk.tma_load"(%v, %a, %c0, %c0, %c0, %c0, %bar) : (!v, !g, index, index, index, index, !tk.barrier) -> ()
  // CHECK: hopper-sync-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: tma_store: takes 4 coordinates (b, d, r, c), got 2
  // CHECK-COUNT-2: hopper-sync-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: tma_store: a
  "tk.tma_store"(%a, %s, %c0, %c0) : (!g, !s, index, index) -> ()
  // CHECK: hopper-sync-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: tma_store_add: TMA copies without converting: st and gl must have one dtype, got f32 and bf16
  // CHECK-NEXT: hopper-sync-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: tma_store_add: a gl used with TMA needs rows
  "tk.tma_store_add"(%a, %f, %c0, %c0, %c0, %c0) : (!g, !f, index, index, index, index) -> ()
  // CHECK: hopper-sync-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: tma_store_wait: pending must be an integer >= 0, got -1
  "tk.tma_store_wait"() {pending = -1 : i64} : () -> ()
  return
}
