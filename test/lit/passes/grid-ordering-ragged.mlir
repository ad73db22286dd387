// tk-grid-ordering over ragged groups (tk.ragged, tkc.kernel's ragged=): the
// blocks stride over the live items only. tk.ragged_item counts them before
// the item loop (its 4th result: the total, the loop's bound); in the loop it
// gives item t's group (z), t's number inside the group and the group's row
// blocks, over which the order decodes x and y.
// RUN: tkc %s --pass-pipeline=tk-layout-selection,tk-grid-ordering,tk-verify | FileCheck %s

!C = !tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>
!O = !tk.gl<i32, 1 : i64, -1 : i64, -1 : i64, -1 : i64>

// CHECK-LABEL: func.func @visits
// CHECK-SAME: tk.grid = ["min(sms, o.c * o.r * o.d)", "1", "1"]
// CHECK-SAME: tk.work = ["o.c", "o.r", "o.d"]
// CHECK: %[[X:.*]] = "tk.dim"(%arg1) {axis = "c"}
// CHECK: %[[Y:.*]] = "tk.dim"(%arg1) {axis = "r"}
// CHECK: %[[Z:.*]] = "tk.dim"(%arg1) {axis = "d"}
// CHECK: %[[ALL:.*]]:4 = "tk.ragged_item"(%arg0, %{{.*}}, %[[Z]], %[[Y]], %[[X]]) {rows = 3 : i64}
// CHECK: %[[B:.*]] = "tk.block_idx"() {dim = "x"}
// CHECK: %[[P:.*]] = "tk.grid_dim"() {dim = "x"}
// CHECK: scf.for %[[T:.*]] = %[[B]] to %[[ALL]]#3 step %[[P]] {
// CHECK:   %[[IT:.*]]:4 = "tk.ragged_item"(%arg0, %[[T]], %[[Z]], %[[Y]], %[[X]]) {rows = 3 : i64}
// "xyz" inside the group: x = r % X, y = (r / X) % blocks
// CHECK:   %[[COL:.*]] = arith.remui %[[IT]]#1, %[[X]]
// CHECK:   %[[Q:.*]] = arith.divui %[[IT]]#1, %[[X]]
// CHECK:   %[[ROW:.*]] = arith.remui %[[Q]], %[[IT]]#2
// CHECK:   "tk.store"(%arg1, %{{.*}}, %{{.*}}, %[[IT]]#0, %[[ROW]], %[[COL]])
// CHECK: } {tk.work_items}
// CHECK-NOT: tk.block_idx
func.func @visits(%count: !C, %o: !O) attributes {tk.kernel, tk.warps = 1 : i64,
    tk.arg_names = ["count", "o"], tk.grid = ["o.c", "o.r", "o.d"], tk.order = "xyz", tk.persistent,
    tk.ragged = {count = "count", rows = 3 : i64}} {
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  %y = "tk.block_idx"() {dim = "y"} : () -> index
  %z = "tk.block_idx"() {dim = "z"} : () -> index
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i32
  "tk.store"(%o, %one, %c0, %z, %y, %x) {clip, elements} : (!O, i32, index, index, index, index) -> ()
  return
}

// zigzag: the rounds are counted from the live total (R = total / P).
// CHECK-LABEL: func.func @zigzag
// CHECK: %[[ALL:.*]]:4 = "tk.ragged_item"
// CHECK: %[[P:.*]] = "tk.grid_dim"() {dim = "x"}
// CHECK: arith.divui %[[ALL]]#3, %[[P]]
// CHECK: scf.for
// CHECK: "tk.ragged_item"
// CHECK: } {tk.work_items}
func.func @zigzag(%count: !C, %o: !O) attributes {tk.kernel, tk.warps = 1 : i64,
    tk.arg_names = ["count", "o"], tk.grid = ["o.c", "o.r", "o.d"], tk.order = "xyz", tk.persistent = "zigzag",
    tk.ragged = {count = "count", rows = 3 : i64}} {
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  %y = "tk.block_idx"() {dim = "y"} : () -> index
  %z = "tk.block_idx"() {dim = "z"} : () -> index
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i32
  "tk.store"(%o, %one, %c0, %z, %y, %x) {clip, elements} : (!O, i32, index, index, index, index) -> ()
  return
}
