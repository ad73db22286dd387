// A wgmma whose accumulator starts from values computed in the block (here
// -v per column, as attention backward's dP^T starts at -delta: a column's
// value in two rows, which LLVM merges into one subtraction) while another
// wgmma group is in flight. The values go through a register fence right
// after their definitions, so LLVM's copies of the merged values land
// there, before the first group; between its commit and the second group's
// fence nothing writes a register, and ptxas injects no wait (C7517) there.
// RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tkc %s --emit=ptx > %t.ptx && ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// PTX-LABEL: .entry fresh_init(
// PTX: sub.rn.f32
// PTX: wgmma.fence.sync.aligned;
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: {{mov|sub|add}}.
// PTX: wgmma.fence.sync.aligned;
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NEXT: wgmma.wait_group.sync.aligned {{[ \t]*}}1;

// PTXAS-NOT: C7517
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: C7517

!sa = !tk.st<bf16, 64 : i64, 64 : i64, "128b">
!acc = !tk.rt<f32, 16 : i64, 64 : i64, "row">
!vec = !tk.rv<f32, 64 : i64, "row">
!ga = !tk.gl<bf16, 1 : i64, 1 : i64, 64 : i64, 64 : i64>
!gv = !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 64 : i64>
!gc = !tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 64 : i64>
func.func @fresh_init(%a: !ga, %v: !gv, %c: !gc, %d: !gc) attributes {tk.kernel, tk.warps = 4 : i64} {
  %c0 = arith.constant 0 : index
  %sa = "tk.alloc"() : () -> !sa
  "tk.group_load"(%sa, %a, %c0, %c0, %c0, %c0) {warps = 4 : i64} : (!sa, !ga, index, index, index, index) -> ()
  "tk.sync"() : () -> ()
  %col = "tk.load"(%v, %c0, %c0, %c0, %c0) : (!gv, index, index, index, index) -> !vec
  %z = "tk.zero"() : () -> !acc
  %init = "tk.sub_col"(%z, %col) : (!acc, !vec) -> !acc
  %s = "tk.warpgroup_mma_abt"(%sa, %sa, %z) : (!sa, !sa, !acc) -> !acc
  %p = "tk.warpgroup_mma_abt"(%sa, %sa, %init) : (!sa, !sa, !acc) -> !acc
  %s1 = "tk.warpgroup_mma_wait"(%s) {pending = 1 : i64} : (!acc) -> !acc
  %p1 = "tk.warpgroup_mma_wait"(%p) {pending = 0 : i64} : (!acc) -> !acc
  %w = "tk.warpid"() : () -> index
  "tk.store"(%c, %s1, %c0, %c0, %w, %c0) : (!gc, !acc, index, index, index, index) -> ()
  "tk.store"(%d, %p1, %c0, %c0, %w, %c0) : (!gc, !acc, index, index, index, index) -> ()
  return
}
