// tk.ragged_item: an scf.for over the groups j (to the `groups` operand)
// carrying (group, start, blocks, total), branch-free: count[j] is a
// bounds-checked broadcast load (0 past the gl's end), its row blocks
// min(ceil(max(count, 0) / rows), height), the group's items span times those;
// the item lies past the group when its end <= t, in it when start <= t < end.
// RUN: tkc %s --emit=nvvm | FileCheck %s
// RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX

// CHECK-LABEL: llvm.func @item
// CHECK: %[[L:.*]]:4 = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[Z:.*]] = %{{.*}}, %[[S:.*]] = %{{.*}}, %[[H:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}})
// CHECK:   %[[OK:.*]] = arith.cmpi ult, %[[J]],
// CHECK:   llvm.load
// CHECK:   arith.select %[[OK]]
// CHECK:   arith.maxsi
// CHECK:   %[[N:.*]] = arith.divui %{{.*}}, %{{.*}}
// CHECK:   %[[B:.*]] = arith.minui %[[N]],
// CHECK:   %[[END:.*]] = arith.addi %[[ACC]], %{{.*}}
// CHECK:   %[[PAST:.*]] = arith.cmpi ule, %[[END]],
// CHECK:   scf.yield %{{.*}}, %{{.*}}, %{{.*}}, %[[END]]
// the item within its group: t - start
// CHECK: arith.subi %{{.*}}, %[[L]]#1
// PTX: ld.global.b32
func.func @item(%count: !tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>,
                %out: !tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 4 : i64>, %t: i32)
    attributes {tk.kernel, tk.warps = 1 : i64} {
  %ti = arith.index_cast %t : i32 to index
  %groups = "tk.dim"(%count) {axis = "c"} : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>) -> index
  %c5 = arith.constant 5 : index
  %c2 = arith.constant 2 : index
  %r:4 = "tk.ragged_item"(%count, %ti, %groups, %c5, %c2) {rows = 128 : i64}
      : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>, index, index, index, index) -> (index, index, index, index)
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %v0 = arith.index_cast %r#0 : index to i32
  %v1 = arith.index_cast %r#1 : index to i32
  %v2 = arith.index_cast %r#2 : index to i32
  %v3 = arith.index_cast %r#3 : index to i32
  "tk.store"(%out, %v0, %c0, %c0, %c0, %c0) {clip, elements} : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 4 : i64>, i32, index, index, index, index) -> ()
  "tk.store"(%out, %v1, %c0, %c0, %c0, %c1) {clip, elements} : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 4 : i64>, i32, index, index, index, index) -> ()
  "tk.store"(%out, %v2, %c0, %c0, %c0, %c2) {clip, elements} : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 4 : i64>, i32, index, index, index, index) -> ()
  "tk.store"(%out, %v3, %c0, %c0, %c0, %c3) {clip, elements} : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 4 : i64>, i32, index, index, index, index) -> ()
  return
}
