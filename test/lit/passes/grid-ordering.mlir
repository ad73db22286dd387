// tk-grid-ordering: the grid level. tk.order says in which order blocks take the
// grid's work items, tk.persistent that one block per SM loops over them.
// RUN: tkc %s --pass-pipeline=tk-layout-selection,tk-grid-ordering,tk-verify | FileCheck %s

!A = !tk.st<bf16, 64 : i64, 64 : i64, "auto">
!G = !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>

// A grouped order without persistence: a 1-D launch of X*Y blocks; each decodes
// its work item (super-rows of 4: y runs fastest inside a group of 4 rows) and
// the author's block_idx / grid_dim become the item and the space's extents.
// CHECK-LABEL: func.func @grouped
// CHECK-SAME: tk.grid = ["(a.c // 64) * (a.r // 64)", "1", "1"]
// CHECK-SAME: tk.order = "grouped(y, 4)"
// CHECK-SAME: tk.work = ["a.c // 64", "a.r // 64", "1"]
func.func @grouped(%a: !G) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a"],
    tk.grid = ["a.c // 64", "a.r // 64", "1"], tk.order = "grouped(y, 4)"} {
  // CHECK: %[[S:.*]] = "tk.alloc"
  %s = "tk.alloc"() : () -> !A
  // CHECK: %[[X:.*]] = arith.floordivsi
  // CHECK: %[[Y:.*]] = arith.floordivsi
  // CHECK: %[[T:.*]] = "tk.block_idx"() {dim = "x"}
  // CHECK: %[[SPAN:.*]] = arith.muli %c4, %[[X]]
  // CHECK: %[[GROUP:.*]] = arith.divui %[[T]], %[[SPAN]]
  // CHECK: %[[FIRST:.*]] = arith.muli %[[GROUP]], %c4
  // CHECK: %[[LEFT:.*]] = arith.subi %[[Y]], %[[FIRST]]
  // CHECK: %[[ROWS:.*]] = arith.minui %c4{{.*}}, %[[LEFT]]
  // CHECK: %[[Q:.*]] = arith.subi %[[T]],
  // CHECK: %[[G:.*]] = arith.remui %[[Q]], %[[ROWS]]
  // CHECK: %[[ROW:.*]] = arith.addi %[[FIRST]], %[[G]]
  // CHECK: %[[COL:.*]] = arith.divui %[[Q]], %[[ROWS]]
  // CHECK-NOT: tk.block_idx
  // CHECK-NOT: tk.grid_dim
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  %y = "tk.block_idx"() {dim = "y"} : () -> index
  %n = "tk.grid_dim"() {dim = "y"} : () -> index
  %c0 = arith.constant 0 : index
  // CHECK: "tk.group_load"(%[[S]], %arg0, %[[C0:.*]], %[[C0]], %[[ROW]], %[[COL]])
  "tk.group_load"(%s, %a, %c0, %c0, %y, %x) {warps = 4 : i64} : (!A, !G, index, index, index, index) -> ()
  // CHECK: "tk.group_load"(%[[S]], %arg0, %[[C0]], %[[C0]], %[[Y]], %[[COL]])
  "tk.group_load"(%s, %a, %c0, %c0, %n, %x) {warps = 4 : i64} : (!A, !G, index, index, index, index) -> ()
  return
}



// Persistent, order left to the pass: A's tile follows y (bm) and B's x (bn),
// 8 KiB each, so a wave of 132 blocks is least when grouped in rows of
// sqrt(132) ~ 11. Allocations and barrier inits stay in front; everything else
// runs once per work item in the loop (one block per SM: min(sms, items)).
// CHECK-LABEL: func.func @persistent
// CHECK-SAME: tk.grid = ["min(sms, (b.c // 64) * (a.r // 64))", "1", "1"]
// CHECK-SAME: tk.order = "grouped(y, 11)"
// CHECK: "tk.alloc"
// CHECK: "tk.alloc"
// CHECK: "tk.init_barrier"
// CHECK: %[[T0:.*]] = "tk.block_idx"() {dim = "x"}
// CHECK: %[[STEP:.*]] = "tk.grid_dim"() {dim = "x"}
// CHECK: scf.for %[[T:.*]] = %[[T0]] to %{{.*}} step %[[STEP]] {
// CHECK:   arith.divui %[[T]]
// CHECK:   "tk.tma_load"
// CHECK:   "tk.wait"
// CHECK: } {tk.work_items}
// CHECK-NEXT: return
func.func @persistent(%a: !G, %b: !G) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a", "b"],
    tk.grid = ["b.c // 64", "a.r // 64", "1"], tk.order = "auto", tk.persistent} {
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  %sa = "tk.alloc"() : () -> !A
  %y = "tk.block_idx"() {dim = "y"} : () -> index
  %sb = "tk.alloc"() : () -> !A
  %bar = "tk.alloc"() : () -> !tk.barrier
  "tk.init_barrier"(%bar) {count = 1 : i64} : (!tk.barrier) -> ()
  %c0 = arith.constant 0 : index
  "tk.tma_load"(%sa, %a, %c0, %c0, %y, %c0, %bar) : (!A, !G, index, index, index, index, !tk.barrier) -> ()
  "tk.tma_load"(%sb, %b, %c0, %c0, %c0, %x, %bar) : (!A, !G, index, index, index, index, !tk.barrier) -> ()
  "tk.wait"(%bar, %c0) : (!tk.barrier, index) -> ()
  return
}



// A batched GEMM: A's tile follows y and z (its batch), B's x and z. The order
// runs inside one z (decode puts z outermost), so z does not hide the tiles'
// axes: A's are row tiles and B's column tiles, grouped as in @persistent (with
// z counted, the kernel kept the hardware's order: 7% slower at 8192^3, H200).
// CHECK-LABEL: func.func @batched
// CHECK-SAME: tk.order = "grouped(y, 11)"
// CHECK: scf.for %[[T:.*]] =
// CHECK:   %[[PLANE:.*]] = arith.muli
// CHECK:   %[[Z:.*]] = arith.divui %[[T]], %[[PLANE]]
// CHECK:   "tk.tma_load"(%{{.*}}, %arg0, %{{.*}}, %[[Z]],
// CHECK:   "tk.tma_load"(%{{.*}}, %arg1, %{{.*}}, %[[Z]],
func.func @batched(%a: !G, %b: !G) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a", "b"],
    tk.grid = ["b.c // 64", "a.r // 64", "a.d"], tk.order = "auto", tk.persistent} {
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  %y = "tk.block_idx"() {dim = "y"} : () -> index
  %z = "tk.block_idx"() {dim = "z"} : () -> index
  %sa = "tk.alloc"() : () -> !A
  %sb = "tk.alloc"() : () -> !A
  %bar = "tk.alloc"() : () -> !tk.barrier
  "tk.init_barrier"(%bar) {count = 1 : i64} : (!tk.barrier) -> ()
  %c0 = arith.constant 0 : index
  "tk.tma_load"(%sa, %a, %c0, %z, %y, %c0, %bar) : (!A, !G, index, index, index, index, !tk.barrier) -> ()
  "tk.tma_load"(%sb, %b, %c0, %z, %c0, %x, %bar) : (!A, !G, index, index, index, index, !tk.barrier) -> ()
  "tk.wait"(%bar, %c0) : (!tk.barrier, index) -> ()
  return
}



// Another permutation, persistent: z (batch) fastest.
// CHECK-LABEL: func.func @batch_first
// CHECK-SAME: tk.grid = ["min(sms, (a.r // 64) * a.d * a.b)", "1", "1"]
// CHECK-SAME: tk.order = "zyx"
// CHECK: scf.for %[[T:.*]] =
// CHECK:   %[[Z:.*]] = arith.remui %[[T]], %[[B:.*]] : index
// CHECK:   %[[R:.*]] = arith.divui %[[T]], %[[B]] : index
// CHECK:   %[[Y:.*]] = arith.remui %[[R]], %[[D:.*]] : index
// CHECK:   %[[X:.*]] = arith.divui %[[R]], %[[D]] : index
// CHECK:   "tk.dim"
// CHECK:   arith.addi %[[X]], %[[Y]]
// CHECK:   arith.addi {{.*}}, %[[Z]]
func.func @batch_first(%a: !G) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a"],
    tk.grid = ["a.r // 64", "a.d", "a.b"], tk.order = "zyx", tk.persistent} {
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  %y = "tk.block_idx"() {dim = "y"} : () -> index
  %z = "tk.block_idx"() {dim = "z"} : () -> index
  %d = "tk.dim"(%a) {axis = "c"} : (!G) -> index
  %s = arith.addi %x, %y : index
  %t = arith.addi %s, %z : index
  return
}



// The hardware's own order, not persistent: nothing to do.
// CHECK-LABEL: func.func @hardware
// CHECK-SAME: tk.grid = ["a.c // 64", "a.r // 64", "1"]
// CHECK-SAME: tk.order = "xyz"
// CHECK-NOT: tk.work
// CHECK: "tk.block_idx"() {dim = "x"}
func.func @hardware(%a: !G) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a"],
    tk.grid = ["a.c // 64", "a.r // 64", "1"], tk.order = "auto"} {
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  return
}

// persistent = "zigzag": the loop counts the block's rounds (R = items / P whole
// ones, one more where the last, partial round's item is below items % P), and
// round r's item is r*P + b, or r*P + P-1-b when r is odd.
// CHECK-LABEL: func.func @zigzag
// CHECK-SAME: tk.grid = ["min(sms, (a.r // 64))", "1", "1"]
// CHECK: %[[N:.*]] = arith.floordivsi
// CHECK: %[[B:.*]] = "tk.block_idx"() {dim = "x"}
// CHECK: %[[P:.*]] = "tk.grid_dim"() {dim = "x"}
// CHECK: %[[R:.*]] = arith.divui %[[N]], %[[P]] : index
// CHECK: %[[LAST:.*]] = arith.select %{{.*}}, %{{.*}}, %[[B]] : index
// CHECK: %[[REM:.*]] = arith.remui %[[N]], %[[P]] : index
// CHECK: %[[MORE:.*]] = arith.cmpi ult, %[[LAST]], %[[REM]] : index
// CHECK: %[[ONE:.*]] = arith.select %[[MORE]], %{{.*}}, %{{.*}} : index
// CHECK: %[[COUNT:.*]] = arith.addi %[[R]], %[[ONE]] : index
// CHECK: scf.for %[[RD:.*]] = %{{.*}} to %[[COUNT]] step %{{.*}} {
// CHECK:   %[[BASE:.*]] = arith.muli %[[RD]], %[[P]] : index
// CHECK:   %[[PAR:.*]] = arith.remui %[[RD]], %{{.*}} : index
// CHECK:   %[[ODD:.*]] = arith.cmpi eq, %[[PAR]], %{{.*}} : index
// CHECK:   %[[BACK:.*]] = arith.subi %{{.*}}, %[[B]] : index
// CHECK:   %[[OFF:.*]] = arith.select %[[ODD]], %[[BACK]], %[[B]] : index
// CHECK:   %[[T:.*]] = arith.addi %[[BASE]], %[[OFF]] : index
// CHECK:   %[[X:.*]] = arith.remui %[[T]], %[[N]] : index
// CHECK:   "tk.tma_load"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[X]],
// CHECK: } {tk.work_items}
func.func @zigzag(%a: !G) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a"],
    tk.grid = ["a.r // 64", "1", "1"], tk.order = "xyz", tk.persistent = "zigzag"} {
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  %sa = "tk.alloc"() : () -> !A
  %bar = "tk.alloc"() : () -> !tk.barrier
  "tk.init_barrier"(%bar) {count = 1 : i64} : (!tk.barrier) -> ()
  %c0 = arith.constant 0 : index
  "tk.tma_load"(%sa, %a, %c0, %c0, %x, %c0, %bar) : (!A, !G, index, index, index, index, !tk.barrier) -> ()
  "tk.wait"(%bar, %c0) : (!tk.barrier, index) -> ()
  return
}
