// Not valid: tk.exp takes one operand.
func.func @f() {
  %0 = "tk.exp"() : () -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  return
}
