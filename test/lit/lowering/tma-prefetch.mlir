// tk.tma_prefetch: the box of its st's type brought into L2, by lane 0, one
// cp.async.bulk.prefetch.tensor per panel (a 64x128 bf16 st with a 128-byte
// swizzle is two 64x64 panels, the second 64 columns further), through the
// same tensor map as a load of that st (one map for both), no mbarrier and
// no shared address. ptxas takes it for sm_90a.
// RUN: tkc %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// CHECK: .entry prefetch(
// CHECK-NEXT: .param .u64 .ptr .global .align 1 prefetch_param_0,
// CHECK-NEXT: .param .u32 prefetch_param_1,
// CHECK-NEXT: .param .u32 prefetch_param_2,
// CHECK-NEXT: .param .align 64 .b8 prefetch_param_3[128]
// CHECK-NOT: .param .
// CHECK: griddepcontrol.launch_dependents;
// CHECK: cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%rd[[MAP:[0-9]+]], {%r[[C0:[0-9]+]], %r[[R0:[0-9]+]], %r{{[0-9]+}}, %r{{[0-9]+}}}];
// CHECK: cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%rd[[MAP]], {%r{{[0-9]+}}, %r[[R0]], %r{{[0-9]+}}, %r{{[0-9]+}}}];
// CHECK-NOT: cp.async.bulk.prefetch
// CHECK: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd{{[0-9]+}}], [%rd[[MAP]]
!s = !tk.st<bf16, 64 : i64, 128 : i64, "128b">
!g = !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>
func.func @prefetch(%a: !g) attributes {tk.kernel, tk.warps = 1 : i64, tk.arg_names = ["a"]} {
  %s = "tk.alloc"() : () -> !s
  %bar = "tk.alloc"() : () -> !tk.barrier
  "tk.init_barrier"(%bar) {count = 1 : i64} : (!tk.barrier) -> ()
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  "tk.tma_prefetch"(%s, %a, %c0, %c0, %c1, %x) : (!s, !g, index, index, index, index) -> ()
  "tk.expect_bytes"(%bar) {bytes = 16384 : i64} : (!tk.barrier) -> ()
  "tk.tma_load"(%s, %a, %c0, %c0, %c0, %x, %bar) : (!s, !g, index, index, index, index, !tk.barrier) -> ()
  "tk.wait"(%bar, %c0) : (!tk.barrier, index) -> ()
  return
}
