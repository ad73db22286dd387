// tk.store {deinterleave} takes an f32 row-layout rt and an f32 st: a bf16
// tile is refused at the op, by tk-verify (the default pipeline's first pass).
// RUN: not tkc %s 2>&1 | FileCheck %s

// CHECK: k.py:4:3: error: store: deinterleave (stmatrix of f32 pairs) writes an f32 row-layout rt into an f32 st, got rt<bf16, 16, 64, row> into st<bf16, 64, 64, 128b>
!s = !tk.st<bf16, 64 : i64, 64 : i64, "128b">
!r = !tk.rt<bf16, 16 : i64, 64 : i64, "row">
func.func @bad() attributes {tk.kernel, tk.warps = 4 : i64} {
  %c0 = arith.constant 0 : index
  %s = "tk.alloc"() : () -> !s
  %x = "tk.zero"() : () -> !r
  "tk.store"(%s, %x, %c0, %c0) {deinterleave} : (!s, !r, index, index) -> () loc("k.py":4:3)
  return
}
