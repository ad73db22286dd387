// tk-verify checks tk.ragged: {count = "<gl argument>", rows = R >= 1} on a
// persistent kernel, count an i32 gl the kernel does not write (every block
// reads it to find its work items), and tk.ragged_item's count an i32 gl.
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | FileCheck %s
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | grep -c error: | grep -x 7

!C = !tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>
!F = !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>

// CHECK: {{.*}}ragged-invalid.mlir:[[# @LINE + 1]]:1: error: kernel @{{[a-z_]+}}: tk.ragged needs a persistent kernel (tk.persistent): its blocks loop over the live items
func.func @not_persistent(%count: !C) attributes {tk.kernel, tk.arg_names = ["count"],
    tk.ragged = {count = "count", rows = 128 : i64}} {
  return
}
// CHECK: {{.*}}ragged-invalid.mlir:[[# @LINE + 1]]:1: error: kernel @{{[a-z_]+}}: tk.ragged must be {count = "<gl argument>", rows = <int>}, got {count = 3 : i64, rows = 128 : i64}
func.func @malformed(%count: !C) attributes {tk.kernel, tk.arg_names = ["count"], tk.persistent,
    tk.ragged = {count = 3, rows = 128 : i64}} {
  return
}
// CHECK: {{.*}}ragged-invalid.mlir:[[# @LINE + 2]]:1: error: kernel @{{[a-z_]+}}: tk.ragged: rows must be >= 1, got 0
// CHECK: {{.*}}ragged-invalid.mlir:[[# @LINE + 1]]:1: error: kernel @{{[a-z_]+}}: tk.ragged: count must name a gl argument of the kernel, got 'n'
func.func @unknown(%count: !C) attributes {tk.kernel, tk.arg_names = ["count"], tk.persistent,
    tk.ragged = {count = "n", rows = 0 : i64}} {
  return
}
// CHECK: {{.*}}ragged-invalid.mlir:[[# @LINE + 1]]:1: error: kernel @{{[a-z_]+}}: tk.ragged: count 'count' must be an i32 gl, got !tk.gl<f32
func.func @floats(%count: !F) attributes {tk.kernel, tk.arg_names = ["count"], tk.persistent,
    tk.ragged = {count = "count", rows = 128 : i64}} {
  return
}
// CHECK: {{.*}}ragged-invalid.mlir:[[# @LINE + 1]]:1: error: kernel @{{[a-z_]+}}: tk.ragged: the kernel writes its count gl 'count', but every block reads it to find its work items
func.func @written(%count: !C) attributes {tk.kernel, tk.arg_names = ["count"], tk.persistent,
    tk.ragged = {count = "count", rows = 128 : i64}} {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i32
  "tk.store"(%count, %one, %c0, %c0, %c0, %c0) {clip, elements} : (!C, i32, index, index, index, index) -> ()
  return
}
// CHECK: {{.*}}ragged-invalid.mlir:[[# @LINE + 4]]:{{.*}} error: ragged_item: the groups' counts are an i32 gl, got !tk.gl<f32
func.func @item_floats(%count: !F) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:4 = "tk.ragged_item"(%count, %c0, %c1, %c1, %c1) {rows = 128 : i64} : (!F, index, index, index, index) -> (index, index, index, index)
  return
}
