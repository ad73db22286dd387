// tk-layout-selection, wide tiles: a row-layout class that moves through
// global memory and needs nothing of the fragment layout (made by loads,
// initialisers, elementwise ops and row broadcasts; used by those, stores,
// row reductions and row broadcasts) becomes "wide", so its global accesses
// move 16 bytes a lane. Anything touching an mma, shared memory, a column
// reduction, a loop-carried value or an explicit col layout stays.
// RUN: tkc %s --pass-pipeline=tk-layout-selection,tk-verify | FileCheck %s
// Idempotent.
// RUN: tkc %s --pass-pipeline=tk-layout-selection,tk-layout-selection,tk-verify | FileCheck %s

!bgl = !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>
!fgl = !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 32 : i64>
!brow = !tk.rt<bf16, 16 : i64, 32 : i64, "row">
!frow = !tk.rt<f32, 16 : i64, 32 : i64, "row">
!vec = !tk.rv<f32, 16 : i64, "col">

// A softmax-like chain: load, convert, row max, broadcast, exp, store.
// CHECK-LABEL: func.func @chain
// CHECK: "tk.load"{{.*}} -> !tk.rt<bf16, 16 : i64, 32 : i64, "wide">
// CHECK: "tk.copy"{{.*}} -> !tk.rt<f32, 16 : i64, 32 : i64, "wide">
// CHECK: "tk.row_max"{{.*}} -> !tk.rv<f32, 16 : i64, "col">
// CHECK: "tk.sub_row"{{.*}} -> !tk.rt<f32, 16 : i64, 32 : i64, "wide">
// CHECK: "tk.exp"{{.*}} -> !tk.rt<f32, 16 : i64, 32 : i64, "wide">
// CHECK: "tk.store"({{.*}}) : (!tk.gl<f32, {{.*}}>, !tk.rt<f32, 16 : i64, 32 : i64, "wide">
func.func @chain(%a: !bgl, %o: !fgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!bgl, index, index, index, index) -> !brow
  %f = "tk.copy"(%x) : (!brow) -> !frow
  %m = "tk.row_max"(%f) : (!frow) -> !vec
  %s = "tk.sub_row"(%f, %m) : (!frow, !vec) -> !frow
  %e = "tk.exp"(%s) : (!frow) -> !frow
  "tk.store"(%o, %e, %c0, %c0, %c0, %c0) : (!fgl, !frow, index, index, index, index) -> ()
  return
}

// A column reduction needs the row layout: the whole class stays.
// CHECK-LABEL: func.func @col_reduction
// CHECK-NOT: "wide"
// CHECK: return
func.func @col_reduction(%a: !fgl, %o: !fgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!fgl, index, index, index, index) -> !frow
  %s = "tk.col_sum"(%x) : (!frow) -> !tk.rv<f32, 32 : i64, "row">
  "tk.store"(%o, %x, %c0, %c0, %c0, %c0) : (!fgl, !frow, index, index, index, index) -> ()
  return
}

// A tile also stored to shared memory stays (ldmatrix/stmatrix are as fast).
// CHECK-LABEL: func.func @shared
// CHECK-NOT: "wide"
// CHECK: return
func.func @shared(%a: !bgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %st = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 32 : i64, "64b">
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!bgl, index, index, index, index) -> !brow
  "tk.store"(%st, %x, %c0, %c0) : (!tk.st<bf16, 16 : i64, 32 : i64, "64b">, !brow, index, index) -> ()
  return
}

// A loop-carried accumulator keeps its layout, and so does its class; an
// unrelated tile in the same kernel is still widened.
// CHECK-LABEL: func.func @carried
// CHECK: scf.for {{.*}} -> (!tk.rt<f32, 16 : i64, 32 : i64, "row">)
// CHECK: "tk.load"{{.*}} -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
// CHECK: "tk.load"{{.*}} -> !tk.rt<bf16, 16 : i64, 32 : i64, "wide">
func.func @carried(%a: !fgl, %b: !bgl, %o: !fgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %z = "tk.zero"() : () -> !frow
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %z) -> (!frow) {
    %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!fgl, index, index, index, index) -> !frow
    %n = "tk.add"(%acc, %x) : (!frow, !frow) -> !frow
    scf.yield %n : !frow
  }
  "tk.store"(%o, %r, %c0, %c0, %c0, %c0) : (!fgl, !frow, index, index, index, index) -> ()
  %y = "tk.load"(%b, %c0, %c0, %c0, %c0) : (!bgl, index, index, index, index) -> !brow
  "tk.store"(%b, %y, %c0, %c0, %c0, %c0) : (!bgl, !brow, index, index, index, index) -> ()
  return
}

// A ragged access asks only for its access width on c: a runtime c keeps the
// row layout (pairs: c even), a static c that holds 16-byte rows is widened.
// CHECK-LABEL: func.func @ragged
// CHECK: "tk.load"{{.*}}{fill = 0.000000e+00 : f32}{{.*}} -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
// CHECK: "tk.load"{{.*}}{fill = 0.000000e+00 : f32}{{.*}} -> !tk.rt<bf16, 16 : i64, 32 : i64, "wide">
func.func @ragged(%a: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, %b: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 40 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) {fill = 0.0 : f32} : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, index, index, index, index) -> !brow
  "tk.store"(%a, %x, %c0, %c0, %c0, %c0) {clip} : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, !brow, index, index, index, index) -> ()
  %y = "tk.load"(%b, %c0, %c0, %c0, %c0) {fill = 0.0 : f32} : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 40 : i64>, index, index, index, index) -> !brow
  "tk.store"(%b, %y, %c0, %c0, %c0, %c0) {clip} : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 40 : i64>, !brow, index, index, index, index) -> ()
  return
}
