// A guarded warpgroup mma (its optional i1 operand `when`): the fence, its
// wgmmas and their commit on one arm of a branch, a fence and an empty
// commit on the other, so that `pending` counts the group either way. The
// wait with pending = 1 after it therefore retires the unguarded mma before
// it. ptxas keeps the wgmmas asynchronous (no C7514 serialisation).
// RUN: tkc %s --emit=ptx > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// PTX-LABEL: .entry guarded(
// PTX: wgmma.fence.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PTX: wgmma.commit_group.sync.aligned;
// PTX: @%p{{[0-9]+}} bra [[OFF:\$L__BB[0-9_]+]];
// PTX-NOT: wgmma.mma_async
// PTX: wgmma.fence.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NEXT: bra.uni [[JOIN:\$L__BB[0-9_]+]];
// PTX-NEXT: [[OFF]]:
// PTX-NEXT: wgmma.fence.sync.aligned;
// PTX-NEXT: wgmma.commit_group.sync.aligned;
// PTX-NEXT: [[JOIN]]:
// PTX-NOT: wgmma.mma_async
// PTX: wgmma.wait_group.sync.aligned {{[ \t]*}}1;
// PTX: wgmma.wait_group.sync.aligned {{[ \t]*}}0;

// PTXAS-NOT: C7514
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: C7514

!s = !tk.st<bf16, 64 : i64, 64 : i64, "128b">
!acc = !tk.rt<f32, 16 : i64, 64 : i64, "row">
!g = !tk.gl<bf16, 1 : i64, 1 : i64, 64 : i64, 64 : i64>
!gc = !tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 64 : i64>
func.func @guarded(%a: !g, %c: !gc, %n: i32) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a", "c", "n"]} {
  %c0 = arith.constant 0 : index
  %i0 = arith.constant 0 : i32
  %sa = "tk.alloc"() : () -> !s
  "tk.group_load"(%sa, %a, %c0, %c0, %c0, %c0) {warps = 4 : i64} : (!s, !g, index, index, index, index) -> ()
  "tk.sync"() : () -> ()
  %z = "tk.zero"() : () -> !acc
  %when = arith.cmpi sgt, %n, %i0 : i32
  %d = "tk.warpgroup_mma_abt"(%sa, %sa, %z) : (!s, !s, !acc) -> !acc
  %e = "tk.warpgroup_mma_abt"(%sa, %sa, %z, %when) : (!s, !s, !acc, i1) -> !acc
  %d1 = "tk.warpgroup_mma_wait"(%d) {pending = 1 : i64} : (!acc) -> !acc
  %e1 = "tk.warpgroup_mma_wait"(%e) {pending = 0 : i64} : (!acc) -> !acc
  %sum = "tk.add"(%d1, %e1) : (!acc, !acc) -> !acc
  %w = "tk.warpid"() : () -> index
  "tk.store"(%c, %sum, %c0, %c0, %w, %c0) : (!gc, !acc, index, index, index, index) -> ()
  return
}
