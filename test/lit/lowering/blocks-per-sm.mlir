// tk.blocks_per_sm = 2 (tkc.kernel(blocks_per_sm=2)): the launch bound asks
// ptxas for two blocks an SM (.minnctapersm 2: registers within 65536 / (2 *
// threads)); a block's shared memory is held to half the SM's
// (test_occupancy.py checks the refusal past it).
// RUN: tkc %s --emit=ptx | FileCheck %s

// CHECK-LABEL: .entry two(
// CHECK: .maxntid 128, 1, 1
// CHECK-NEXT: .minnctapersm 2

!t = !tk.st<f32, 64 : i64, 64 : i64, "128b">
!g = !tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 64 : i64>
func.func @two(%a: !g) attributes {tk.kernel, tk.warps = 4 : i64, tk.blocks_per_sm = 2 : i64} {
  %c0 = arith.constant 0 : index
  %s = "tk.alloc"() : () -> !t
  "tk.group_load"(%s, %a, %c0, %c0, %c0, %c0) {warps = 4 : i64} : (!t, !g, index, index, index, index) -> ()
  return
}
