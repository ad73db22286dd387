// tk-layout-selection runs before tk-verify: on malformed IR it must neither
// crash nor hide the error; tk-verify reports it at the author's line.
// RUN: not tkc %s --pass-pipeline=tk-layout-selection,tk-verify 2>&1 | FileCheck %s

!g = !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 16 : i64>
!brow = !tk.rt<bf16, 16 : i64, 16 : i64, "row">
!bcol = !tk.rt<bf16, 16 : i64, 16 : i64, "col">
!frow = !tk.rt<f32, 16 : i64, 16 : i64, "row">
!fcol = !tk.rt<f32, 16 : i64, 16 : i64, "col">

// An elementwise op mixing layouts: its class is left alone.
// CHECK: k.py:3:3: error: add: y must have x's type rt<bf16, 16, 16, row> or be an f32 scalar, got rt<bf16, 16, 16, col>
// An f32 operand: retyped like any other, still reported for its dtype.
// CHECK: k.py:5:3: error: mma_ab: b must be bf16 or f16, got rt<f32, 16, 16, col>
// Only mma operands are legalised: a col tile broadcast over is reported.
// CHECK: k.py:8:3: error: sub_row: x must be an rt in row or wide layout, got rt<f32, 16, 16, col>
func.func @bad(%g: !g) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %a = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!g, index, index, index, index) -> !brow
  %b = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!g, index, index, index, index) -> !bcol
  %s = "tk.add"(%a, %b) : (!brow, !bcol) -> !brow loc("k.py":3:3)
  %z = "tk.zero"() : () -> !frow
  %f = "tk.ones"() : () -> !frow
  %d = "tk.mma_ab"(%s, %f, %z) : (!brow, !frow, !frow) -> !frow loc("k.py":5:3)
  %x = "tk.ones"() : () -> !fcol
  %m = "tk.row_max"(%z) : (!frow) -> !tk.rv<f32, 16 : i64, "col">
  %y = "tk.sub_row"(%x, %m) : (!fcol, !tk.rv<f32, 16 : i64, "col">) -> !fcol loc("k.py":8:3)
  return
}
