// tk-verify's rules of integers (docs/tile-ir.md, "Integer tiles"): an i32
// tile takes the exact integer ops only, with i32 scalars and i32 vectors
// beside it, and moves to and from an i32 gl; an i64 gl is read and written
// one element at a time. Each error at its line, all in one report.
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | FileCheck %s
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | count 10

!ti = !tk.rt<i32, 16 : i64, 16 : i64, "row">
!tf = !tk.rt<f32, 16 : i64, 16 : i64, "row">
!vi = !tk.rv<i32, 16 : i64, "col">
!vf = !tk.rv<f32, 16 : i64, "col">
!gi = !tk.gl<i32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>
!gf = !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>
!g64 = !tk.gl<i64, 1 : i64, 1 : i64, 16 : i64, 16 : i64>

func.func @ints(%gi: !gi, %gf: !gf, %g64: !g64, %s: f32, %n: i32) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%gi, %c0, %c0, %c0, %c0) : (!gi, index, index, index, index) -> !ti
  // CHECK: {{.*}}verify-ints-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: exp: computes on float tiles, got rt<i32, 16, 16, row>
  %e = "tk.exp"(%x) : (!ti) -> !ti
  // CHECK: {{.*}}verify-ints-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: add: y must have x's type rt<i32, 16, 16, row> or be an i32 scalar, got f32
  %a = "tk.add"(%x, %s) : (!ti, f32) -> !ti
  // CHECK: {{.*}}verify-ints-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: fill: the value of rt<i32, 16, 16, row> must be an i32, got f32
  %f = "tk.fill"(%s) : (f32) -> !ti
  // CHECK: {{.*}}verify-ints-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: row_sum: an i32 tile goes with i32 vectors (and a float one with float ones), got rt<i32, 16, 16, row>, rv<f32, 16, col>
  %r = "tk.row_sum"(%x) : (!ti) -> !vf
  %r2 = "tk.row_max"(%x) : (!ti) -> !vi
  // CHECK: {{.*}}verify-ints-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: vec_sum: the result of rv<i32, 16, col> is an i32, got f32
  %v = "tk.vec_sum"(%r2) : (!vi) -> f32
  // CHECK: {{.*}}verify-ints-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: where: b must be a tile or an i32 scalar, got f32
  %w = "tk.where"(%x, %s, %x, %n) {cmp = "lt"} : (!ti, f32, !ti, i32) -> !ti
  // CHECK: {{.*}}verify-ints-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: an i32 gl holds integers: it is read and written by i32 tiles and vectors and one element at a time
  %t = "tk.load"(%gi, %c0, %c0, %c0, %c0) : (!gi, index, index, index, index) -> !tf
  // CHECK: {{.*}}verify-ints-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: an i32 rt moves to and from an i32 gl (integers do not convert in memory), got gl<f32, 1, 1, 16, 16>
  %y = "tk.load"(%gf, %c0, %c0, %c0, %c0) : (!gf, index, index, index, index) -> !ti
  // CHECK: {{.*}}verify-ints-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: store: an i64 gl holds int64 indices: it is read and written one element at a time
  "tk.store"(%g64, %x, %c0, %c0, %c0, %c0) : (!g64, !ti, index, index, index, index) -> ()
  // CHECK: {{.*}}verify-ints-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: store: one element of gl<f32, 1, 1, 16, 16> is an f32, got i32
  "tk.store"(%gf, %n, %c0, %c0, %c0, %c0) {clip, elements} : (!gf, i32, index, index, index, index) -> ()
  return
}
