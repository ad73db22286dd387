// tk-verify on warpgroup ops: every rule of docs/tile-ir.md "Hopper ops",
// each reported at its line; the valid kernel reports nothing.
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | FileCheck %s
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | count 16

!a = !tk.st<bf16, 64 : i64, 64 : i64, "auto">
!b = !tk.st<bf16, 128 : i64, 64 : i64, "128b">
!acc = !tk.rt<f32, 16 : i64, 128 : i64, "row">
func.func @valid() attributes {tk.kernel, tk.warps = 8 : i64} {
  %sa = "tk.alloc"() : () -> !a
  %sb = "tk.alloc"() : () -> !b
  %z = "tk.zero"() : () -> !acc
  %d = "tk.warpgroup_mma_abt"(%sa, %sb, %z) {negate = true} : (!a, !b, !acc) -> !acc
  %e = "tk.warpgroup_mma_wait"(%d) {pending = 0 : i64} : (!acc) -> !acc
  "tk.increase_registers"() {count = 240 : i64} : () -> ()
  return
}

func.func @invalid() attributes {tk.kernel, tk.warps = 4 : i64} {
  %sa = "tk.alloc"() : () -> !a
  %sb = "tk.alloc"() : () -> !b
  %none = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "none">
  %h = "tk.alloc"() : () -> !tk.st<f16, 128 : i64, 64 : i64, "auto">
  %wide = "tk.alloc"() : () -> !tk.st<bf16, 272 : i64, 64 : i64, "auto">
  %z = "tk.zero"() : () -> !acc
  %z64 = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 64 : i64, "row">
  %x = "tk.zero"() : () -> !tk.rt<bf16, 16 : i64, 64 : i64, "col">
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_abt: a st<bf16, 64, 64, none> must be swizzled
  %0 = "tk.warpgroup_mma_abt"(%none, %sb, %z) : (!tk.st<bf16, 64 : i64, 64 : i64, "none">, !b, !acc) -> !acc
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_abt: a and b must both be bf16 or both f16
  %1 = "tk.warpgroup_mma_abt"(%sa, %h, %z) : (!a, !tk.st<f16, 128 : i64, 64 : i64, "auto">, !acc) -> !acc
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_abt: a in registers must be a row-layout rt<16, K>
  %2 = "tk.warpgroup_mma_abt"(%x, %sb, %z) : (!tk.rt<bf16, 16 : i64, 64 : i64, "col">, !b, !acc) -> !acc
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: warpgroup_mma_ab: K of a (64) and b (128) must agree
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_ab: c must be rt<f32, 16, 64, row> (N = 64 from b st<bf16, 128, 64, 128b>)
  %4 = "tk.warpgroup_mma_ab"(%sa, %sb, %z) : (!a, !b, !acc) -> !acc
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_ab: K of a (64) and b (128) must agree
  %5 = "tk.warpgroup_mma_ab"(%sa, %sb, %z64) : (!a, !b, !tk.rt<f32, 16 : i64, 64 : i64, "row">) -> !tk.rt<f32, 16 : i64, 64 : i64, "row">
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: warpgroup_mma_abt: N = 272 is wider than wgmma's 256
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_abt: c must be rt<f32, 16, 272, row>
  %6 = "tk.warpgroup_mma_abt"(%sa, %wide, %z) : (!a, !tk.st<bf16, 272 : i64, 64 : i64, "auto">, !acc) -> !acc
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_abt: result must have c's type
  %7 = "tk.warpgroup_mma_abt"(%sa, %sb, %z) : (!a, !b, !acc) -> !tk.rt<f32, 16 : i64, 64 : i64, "row">
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_abt: negate must be true or false, got 1
  %n = "tk.warpgroup_mma_abt"(%sa, %sb, %z) {negate = 1 : i64} : (!a, !b, !acc) -> !acc
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_wait: tile 0 must be an f32 rt
  %8 = "tk.warpgroup_mma_wait"(%x) {pending = 0 : i64} : (!tk.rt<bf16, 16 : i64, 64 : i64, "col">) -> !tk.rt<bf16, 16 : i64, 64 : i64, "col">
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: warpgroup_mma_wait: results must have the types of the tiles
  %9 = "tk.warpgroup_mma_wait"(%z) {pending = 0 : i64} : (!acc) -> !tk.rt<f32, 16 : i64, 64 : i64, "row">
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: decrease_registers: count must be a multiple of 8 in 24..256 (setmaxnreg), got 20
  "tk.decrease_registers"() {count = 20 : i64} : () -> ()
  return
}

func.func @two_warps() attributes {tk.kernel, tk.warps = 2 : i64} {
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: increase_registers: a warpgroup is 4 warps, so the kernel's tk.warps must be a multiple of 4, got 2
  "tk.increase_registers"() {count = 240 : i64} : () -> ()
  return
}

// setmaxnreg moves registers only within the block's launch allocation: 5
// warpgroups launch with 96 a thread (480 per thread slot), so 4 at 120 and
// a producer at 24 would wait forever; 112 fits.
func.func @overcommit() attributes {tk.kernel, tk.warps = 20 : i64} {
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: increase_registers: 4 warpgroups at 120 registers and one at 24 need 504 per thread slot; a block of 5 warpgroups launches with 480 (96 a thread), so setmaxnreg would wait forever: at most 112
  "tk.increase_registers"() {count = 120 : i64} : () -> ()
  "tk.increase_registers"() {count = 112 : i64} : () -> ()
  return
}

// Two blocks an SM halve each one's allocation: 3 warpgroups launch with 80
// a thread (240), so 2 at 232 (what one block an SM allows) would wait forever.
func.func @overcommit_shared_sm() attributes {tk.kernel, tk.warps = 12 : i64, tk.blocks_per_sm = 2 : i64} {
  // CHECK: warpgroup-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: increase_registers: 2 warpgroups at 232 registers and one at 24 need 488 per thread slot; a block of 3 warpgroups, 2 blocks an SM, launches with 240 (80 a thread), so setmaxnreg would wait forever: at most 104
  "tk.increase_registers"() {count = 232 : i64} : () -> ()
  "tk.increase_registers"() {count = 104 : i64} : () -> ()
  return
}
