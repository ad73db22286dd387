// tk-verify: every rule IRDL cannot express, each reported at its line; all
// errors of the module are collected into one report (exit status 1).
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | FileCheck %s
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | count 96
// The default pipeline (tk-verify first) rejects it too, and prints no IR.
// RUN: not tkc %s > %t.out 2>/dev/null; count 0 < %t.out

// ---- kernel function attributes and arguments
// CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 3]]:1: error: kernel @attrs: tk.warps must be a positive integer
// CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:1: error: kernel @attrs: tk.grid must be an array of 3 strings
// CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:1: error: kernel @attrs: tk.arg_names must be an array of 2 strings
func.func @attrs(%a: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, %s: f32)
    attributes {tk.kernel, tk.warps = 0 : i64, tk.grid = ["1", "1"], tk.arg_names = ["a"]} {
  return
}
// CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 3]]:1: error: kernel @args: tk.arg_names must be distinct
// CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: kernel @args: argument 1 must be a !tk.gl, f32 or i32, got index
// CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: kernel @args: argument 2: gl<f32, 1, 0, -1, 64>: gl dims must be positive, or -1 for a runtime dim
func.func @args(%a: f32, %i: index, %g: !tk.gl<f32, 1 : i64, 0 : i64, -1 : i64, 64 : i64>)
    attributes {tk.kernel, tk.arg_names = ["x", "x", "y"]} {
  return
}
// CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:1: error: kernel @returns: a kernel returns nothing
func.func @returns() -> i32 attributes {tk.kernel} {
  %0 = arith.constant 0 : i32
  return %0 : i32
}

func.func @ops(%g: !tk.gl<bf16, 1 : i64, 1 : i64, 48 : i64, 64 : i64>, %s: f32, %n: i32)
    attributes {tk.kernel, tk.warps = 4 : i64} {
  %c0 = arith.constant 0 : index
  // ---- shapes
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: alloc: result: st<bf16, 0, 64, auto>: rows and cols must be positive multiples of 16
  %st0 = "tk.alloc"() : () -> !tk.st<bf16, 0 : i64, 64 : i64, "auto">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: alloc: result: sv<f32, 10>: length must be a positive multiple of 16
  %sv0 = "tk.alloc"() : () -> !tk.sv<f32, 10 : i64>
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: alloc: result: st<f32, 16, 16, 128b>: a 128b swizzle needs a row width in bytes that is a multiple of 128, got 64
  %st1 = "tk.alloc"() : () -> !tk.st<f32, 16 : i64, 16 : i64, "128b">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: alloc: result must be an st, sv or barrier, got rt<f32, 16, 16, row>
  %bad_alloc = "tk.alloc"() : () -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  %st = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "auto">
  %sv = "tk.alloc"() : () -> !tk.sv<f32, 64 : i64>
  %sf = "tk.alloc"() : () -> !tk.st<f32, 64 : i64, 64 : i64, "auto">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: zero: result: rt<f32, 16, 24, row>: rows and cols must be positive multiples of 16
  %z0 = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 24 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: ones: result: rv<f32, 8, row>: length must be a positive multiple of 16 (or 8 for a "col" rv
  %o0 = "tk.ones"() : () -> !tk.rv<f32, 8 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: ones: result: rv<f32, 24, col>: length must be a positive multiple of 16
  %o1 = "tk.ones"() : () -> !tk.rv<f32, 24 : i64, "col">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: zero: result: rt<bf16, 8, 32, col>: an 8-row rt is row layout only
  %z8 = "tk.zero"() : () -> !tk.rt<bf16, 8 : i64, 32 : i64, "col">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: zero: result: rt<f32, 24, 32, row>: rows and cols must be positive multiples of 16 (rows may be 8)
  %z24 = "tk.zero"() : () -> !tk.rt<f32, 24 : i64, 32 : i64, "row">
  // ---- initialisers
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: neg_infty: result must be an rt or rv, got a non-tk value
  %ni = "tk.neg_infty"() : () -> f32
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: fill: result must be an rt or rv, got st<bf16, 64, 64, auto>
  %fl = "tk.fill"(%s) : (f32) -> !tk.st<bf16, 64 : i64, 64 : i64, "auto">
  %x = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %xc = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 32 : i64, "col">
  %v = "tk.zero"() : () -> !tk.rv<f32, 16 : i64, "col">
  // ---- unary
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: exp: result type must equal the operand's, rt<f32, 16, 32, row> -> rt<bf16, 16, 32, row>
  %e = "tk.exp"(%x) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: neg: operand must be an rt, rv or f32 scalar, got a non-tk value
  %ng = "tk.neg"(%n) : (i32) -> i32
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: copy: result may differ from the operand only in dtype
  %cp = "tk.copy"(%x) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<bf16, 16 : i64, 32 : i64, "col">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: copy: result may differ from the operand only in dtype
  %cp2 = "tk.copy"(%v) : (!tk.rv<f32, 16 : i64, "col">) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  // ---- binary
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: add: y must have x's type rt<f32, 16, 32, row> or be an f32 scalar, got rt<f32, 16, 32, col>
  %a1 = "tk.add"(%x, %xc) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rt<f32, 16 : i64, 32 : i64, "col">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: mul: y must have x's type rt<f32, 16, 32, row> or be an f32 scalar, got i32
  %a2 = "tk.mul"(%x, %n) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, i32) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: max: result type must equal x's type rt<f32, 16, 32, row>, got rt<bf16, 16, 32, row>
  %a3 = "tk.max"(%x, %s) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, f32) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sub: x must be an rt or rv, got a non-tk value
  %a4 = "tk.sub"(%s, %s) : (f32, f32) -> f32
  // ---- reductions
  %vb = "tk.zero"() : () -> !tk.rv<bf16, 16 : i64, "col">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: row_max: x must be an rt in row or wide layout, got rt<f32, 16, 32, col>
  %r1 = "tk.row_max"(%xc) : (!tk.rt<f32, 16 : i64, 32 : i64, "col">) -> !tk.rv<f32, 16 : i64, "col">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: row_sum: result must be a 'col' rv of length 16 (one per tile row), got rv<f32, 16, row>
  %r2 = "tk.row_sum"(%x) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rv<f32, 16 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: col_max: result must be a 'row' rv of length 32 (one per tile column), got rv<f32, 16, row>
  %r3 = "tk.col_max"(%x) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rv<f32, 16 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: row_max: init must have the result's type rv<f32, 16, col>, got rv<bf16, 16, col>
  %r4 = "tk.row_max"(%x, %vb) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<bf16, 16 : i64, "col">) -> !tk.rv<f32, 16 : i64, "col">
  // ---- picks
  %c40 = arith.constant 40 : index
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: row_pick: x must be an rt in row layout, got rt<f32, 16, 32, col>
  %p1 = "tk.row_pick"(%xc, %c0) : (!tk.rt<f32, 16 : i64, 32 : i64, "col">, index) -> !tk.rv<f32, 16 : i64, "col">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: col_pick: result must be rv<f32, 32, row> (one per tile column), got rv<f32, 16, col>
  %p2 = "tk.col_pick"(%x, %c0) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, index) -> !tk.rv<f32, 16 : i64, "col">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: row_pick: index 40 is outside the tile's 32 columns
  %p3 = "tk.row_pick"(%x, %c40) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, index) -> !tk.rv<f32, 16 : i64, "col">
  // ---- roll
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: roll: x must be an rt in row layout, got rt<f32, 16, 32, col>
  %rl1 = "tk.roll"(%xc) {shift = 1 : i64, axis = 1 : i64} : (!tk.rt<f32, 16 : i64, 32 : i64, "col">) -> !tk.rt<f32, 16 : i64, 32 : i64, "col">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: roll: axis must be 0 or 1, got 2 : i64
  %rl2 = "tk.roll"(%x) {shift = 1 : i64, axis = 2 : i64} : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // ---- broadcasts
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sub_row: x must be an rt in row or wide layout, got rt<f32, 16, 32, col>
  %b1 = "tk.sub_row"(%xc, %v) : (!tk.rt<f32, 16 : i64, 32 : i64, "col">, !tk.rv<f32, 16 : i64, "col">) -> !tk.rt<f32, 16 : i64, 32 : i64, "col">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: mul_col: v must be a 'row' rv of length 32 (one per tile column), got rv<f32, 16, col>
  %b2 = "tk.mul_col"(%x, %v) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 16 : i64, "col">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: div_row: result type must equal x's type rt<f32, 16, 32, row>, got rt<f32, 32, 16, row>
  %b3 = "tk.div_row"(%x, %v) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 16 : i64, "col">) -> !tk.rt<f32, 32 : i64, 16 : i64, "row">
  // ---- mma
  %a = "tk.zero"() : () -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  %bc = "tk.zero"() : () -> !tk.rt<bf16, 64 : i64, 32 : i64, "col">
  %br = "tk.zero"() : () -> !tk.rt<bf16, 64 : i64, 32 : i64, "row">
  %bh = "tk.zero"() : () -> !tk.rt<f16, 64 : i64, 32 : i64, "col">
  %af = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 64 : i64, "row">
  %acc = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: mma_ab: b must be a col-layout rt, got rt<bf16, 64, 32, row>
  %m1 = "tk.mma_ab"(%a, %br, %acc) : (!tk.rt<bf16, 16 : i64, 64 : i64, "row">, !tk.rt<bf16, 64 : i64, 32 : i64, "row">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: mma_ab: a and b must have one dtype, got bf16 and f16
  %m2 = "tk.mma_ab"(%a, %bh, %acc) : (!tk.rt<bf16, 16 : i64, 64 : i64, "row">, !tk.rt<f16, 64 : i64, 32 : i64, "col">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: mma_ab: a must be bf16 or f16, got rt<f32, 16, 64, row>
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: mma_ab: a and b must have one dtype, got f32 and bf16
  %m3 = "tk.mma_ab"(%af, %bc, %acc) : (!tk.rt<f32, 16 : i64, 64 : i64, "row">, !tk.rt<bf16, 64 : i64, 32 : i64, "col">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 3]]:{{[0-9]+}}: error: mma_abt: K of a (64) and b (32) must agree
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: mma_abt: c must be rt<f32, 16, 64, row>
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: mma_abt: result must be rt<f32, 16, 64, row>
  %m4 = "tk.mma_abt"(%a, %br, %acc) : (!tk.rt<bf16, 16 : i64, 64 : i64, "row">, !tk.rt<bf16, 64 : i64, 32 : i64, "row">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 4]]:{{[0-9]+}}: error: mma_atb: a must be a col-layout rt, got rt<bf16, 16, 64, row>
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 3]]:{{[0-9]+}}: error: mma_atb: K of a (16) and b (64) must agree
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: mma_atb: c must be rt<f32, 64, 32, row> (f32, row, M x N), got rt<f32, 16, 32, row>
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: mma_atb: result must be rt<f32, 64, 32, row>
  %m5 = "tk.mma_atb"(%a, %bc, %acc) : (!tk.rt<bf16, 16 : i64, 64 : i64, "row">, !tk.rt<bf16, 64 : i64, 32 : i64, "col">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: mma_ab: c must be rt<f32, 16, 32, row> (f32, row, M x N), got rt<f32, 16, 32, col>
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: mma_ab: result must be rt<f32, 16, 32, row> (f32, row, M x N), got rt<bf16, 16, 32, row>
  %m6 = "tk.mma_ab"(%a, %bc, %xc) : (!tk.rt<bf16, 16 : i64, 64 : i64, "row">, !tk.rt<bf16, 64 : i64, 32 : i64, "col">, !tk.rt<f32, 16 : i64, 32 : i64, "col">) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 5]]:{{[0-9]+}}: error: mma_atbt: a must be a col-layout rt, got rt<bf16, 16, 64, row>
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 4]]:{{[0-9]+}}: error: mma_atbt: b must be a row-layout rt, got rt<bf16, 64, 32, col>
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 3]]:{{[0-9]+}}: error: mma_atbt: K of a (16) and b (32) must agree
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: mma_atbt: c must be rt<f32, 64, 64, row>
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: mma_atbt: result must be rt<f32, 64, 64, row>
  %m7 = "tk.mma_atbt"(%a, %bc, %acc) : (!tk.rt<bf16, 16 : i64, 64 : i64, "row">, !tk.rt<bf16, 64 : i64, 32 : i64, "col">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 64 : i64, 32 : i64, "row">
  // ---- layout changes
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: swap_layout: result must be rt<f32, 16, 32, row> in the other layout, got rt<f32, 16, 32, row>
  %sw = "tk.swap_layout"(%x) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: transpose: result must be rt<f32, 32, 16, row> (shape swapped) in the row or col layout, got rt<f32, 16, 32, row>
  %tr = "tk.transpose"(%x) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // ---- the wide layout and flat vectors
  %wd = "tk.zero"() : () -> !tk.rt<bf16, 16 : i64, 64 : i64, "wide">
  %acc16 = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: swap_layout: a wide rt does not change layout in registers (rt<bf16, 16, 64, wide> -> rt<bf16, 16, 64, row>): store it to shared memory and load it in the layout you need
  %sww = "tk.swap_layout"(%wd) : (!tk.rt<bf16, 16 : i64, 64 : i64, "wide">) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: transpose: needs a row or col layout rt, got rt<bf16, 16, 64, wide>
  %trw = "tk.transpose"(%wd) : (!tk.rt<bf16, 16 : i64, 64 : i64, "wide">) -> !tk.rt<bf16, 64 : i64, 16 : i64, "wide">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: col_sum: x must be an rt in row layout, got rt<bf16, 16, 64, wide>
  %csw = "tk.col_sum"(%wd) : (!tk.rt<bf16, 16 : i64, 64 : i64, "wide">) -> !tk.rv<bf16, 64 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: mma_abt: a must be a row-layout rt, got rt<bf16, 16, 64, wide>
  %mw = "tk.mma_abt"(%wd, %a, %acc16) : (!tk.rt<bf16, 16 : i64, 64 : i64, "wide">, !tk.rt<bf16, 16 : i64, 64 : i64, "row">, !tk.rt<f32, 16 : i64, 16 : i64, "row">) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  // ---- ragged accesses
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: fill (a ragged load) needs a gl source: shared tiles have no ragged edge
  %rf = "tk.load"(%st, %c0, %c0) {fill = 0.0 : f32} : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: fill must be a float attribute (fill = 0.0 : f32), got 1 : i64
  %rg = "tk.load"(%g, %c0, %c0, %c0, %c0) {fill = 1} : (!tk.gl<bf16, 1 : i64, 1 : i64, 48 : i64, 64 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: store: clip (a ragged store) needs a gl destination: shared tiles have no ragged edge
  "tk.store"(%st, %rg, %c0, %c0) {clip} : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, !tk.rt<bf16, 16 : i64, 64 : i64, "row">, index, index) -> ()
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: element coordinates (elements) need fill: such a load may reach past the gl's edges
  %re = "tk.load"(%g, %c0, %c0, %c0, %c0) {elements} : (!tk.gl<bf16, 1 : i64, 1 : i64, 48 : i64, 64 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  // ---- masks
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: iota: axis must be 0 for rv<f32, 16, col>, got 1 : i64
  %io = "tk.iota"() {axis = 1 : i64} : () -> !tk.rv<f32, 16 : i64, "col">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: where: b must have the result's shape and layout rt<f32, 16, 32, row>, got rt<f32, 16, 32, col>
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: where: y must be a tile or an f32 scalar, got i32
  %wh = "tk.where"(%x, %xc, %x, %n) {cmp = "lt"} : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rt<f32, 16 : i64, 32 : i64, "col">, !tk.rt<f32, 16 : i64, 32 : i64, "row">, i32) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: zero: result: rv<f32, 48, flat>: a flat rv's length must be a multiple of 32 (one chunk per lane)
  %fl48 = "tk.zero"() : () -> !tk.rv<f32, 48 : i64, "flat">
  // ---- load / store
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: source must be a gl, st or sv, got rt<f32, 16, 32, row>
  %l1 = "tk.load"(%x) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: a gl takes 4 indices, got 2
  %l2 = "tk.load"(%g, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 48 : i64, 64 : i64>, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: gl dim r = 48 is not a multiple of the rt<bf16, 32, 64, row> extent 32
  %l3 = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 48 : i64, 64 : i64>, index, index, index, index) -> !tk.rt<bf16, 32 : i64, 64 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: result must be an rt with an st, got rv<bf16, 64, row>
  %l4 = "tk.load"(%st, %c0, %c0) : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, index, index) -> !tk.rv<bf16, 64 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: rt<bf16, 48, 64, row> is not a subtile of st<bf16, 64, 64, auto>
  %l5 = "tk.load"(%st, %c0, %c0) : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, index, index) -> !tk.rt<bf16, 48 : i64, 64 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: rv<f32, 48, row> is not a piece of sv<f32, 64> (its length must divide the sv's)
  %l6 = "tk.load"(%sv) : (!tk.sv<f32, 64 : i64>) -> !tk.rv<f32, 48 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load: an sv takes 0 or 1 indices, got 2
  %l7 = "tk.load"(%sv, %c0, %c0) : (!tk.sv<f32, 64 : i64>, index, index) -> !tk.rv<f32, 64 : i64, "row">
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: store: an st takes 2 indices, got 4
  "tk.store"(%sf, %x, %c0, %c0, %c0, %c0) : (!tk.st<f32, 64 : i64, 64 : i64, "auto">, !tk.rt<f32, 16 : i64, 32 : i64, "row">, index, index, index, index) -> ()
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: store: x must be an rv with an sv, got rt<f32, 16, 32, row>
  "tk.store"(%sv, %x) : (!tk.sv<f32, 64 : i64>, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> ()
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: store: destination must be a gl, st or sv, got a non-tk value
  "tk.store"(%s, %x) : (f32, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> ()
  // ---- group copies
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: group_load: gl and st<f32, 64, 64, auto> must have one dtype, got bf16 and f32
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: group_load: gl dim r = 48 is not a multiple of the st<f32, 64, 64, auto> extent 64
  "tk.group_load"(%sf, %g, %c0, %c0, %c0, %c0) {warps = 4 : i64} : (!tk.st<f32, 64 : i64, 64 : i64, "auto">, !tk.gl<bf16, 1 : i64, 1 : i64, 48 : i64, 64 : i64>, index, index, index, index) -> ()
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 3]]:{{[0-9]+}}: error: group_load: gl dim r = 48 is not a multiple of the st<bf16, 64, 64, auto> extent 64
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: group_load: takes 4 indices (b, d, r, c), got 3
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: group_load: warps = 3 must divide the kernel's tk.warps = 4
  "tk.group_load"(%st, %g, %c0, %c0, %c0) {warps = 3 : i64} : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, !tk.gl<bf16, 1 : i64, 1 : i64, 48 : i64, 64 : i64>, index, index, index) -> ()
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: group_store: src must be an st or sv, got rt<f32, 16, 32, row>
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: group_store: warps must be >= 1, got 0
  "tk.group_store"(%g, %x, %c0, %c0, %c0, %c0) {warps = 0 : i64} : (!tk.gl<bf16, 1 : i64, 1 : i64, 48 : i64, 64 : i64>, !tk.rt<f32, 16 : i64, 32 : i64, "row">, index, index, index, index) -> ()
  // ---- pairs with shared memory
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: load_split: rt<f32, 16, 48, row> pairs are not a subtile of st<bf16, 64, 64, auto> (the st's shape must be a multiple of 16x96)
  %sp1, %sp2 = "tk.load_split"(%st, %c0, %c0) : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, index, index) -> (!tk.rt<f32, 16 : i64, 48 : i64, "row">, !tk.rt<f32, 16 : i64, 48 : i64, "row">)
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: store_join: an st takes 2 indices, got 1
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: store_join: clip needs a gl: shared tiles have no ragged edge
  "tk.store_join"(%st, %x, %x, %c0) {clip} : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, !tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rt<f32, 16 : i64, 32 : i64, "row">, index) -> ()
  // ---- named barriers
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sync: id must be an integer in 0..15, got 16
  "tk.sync"() {id = 16 : i64, warps = 2 : i64} : () -> ()
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sync {arrive}: needs a named barrier, an id in 1..15 and warps >= 2
  "tk.sync"() {arrive, warps = 4 : i64} : () -> ()
  // ---- alloc placement
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c1 step %c1 {
    // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: alloc: must be in the kernel function's entry block (not in a loop or branch)
    %in_loop = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 16 : i64, "auto">
  }
  // ---- pipelined loops
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: scf.for: tk.pipeline store_warp must be 0 or 1, got 2
  scf.for %j = %c0 to %c1 step %c1 {
  } {tk.pipeline = {stages = 2 : i64, store_warp = 2 : i64}}
  return
}

// Not a kernel: no shared memory outside kernels; types are still checked.
func.func @helper(%t: !tk.rt<f32, 16 : i64, 20 : i64, "row">) {
// CHECK: {{.*}}verify-invalid.mlir:[[# @LINE - 1]]:{{[0-9]+}}: error: block argument: rt<f32, 16, 20, row>: rows and cols must be positive multiples of 16
  // CHECK: {{.*}}verify-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: alloc: must be in the kernel function's entry block
  %a = "tk.alloc"() : () -> !tk.sv<f32, 16 : i64>
  return
}
