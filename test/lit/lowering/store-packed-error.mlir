// tk.store {packed} of an f32 tile adds: without `add` it is refused at the op, by tk-verify.
// RUN: not tkc %s 2>&1 | FileCheck %s

// CHECK: k.py:9:3: error: store: packed (red.global.add.v4.f32) adds an f32 row-layout rt into an f32 gl, or (st.global.b32) stores an 8-bit one into a gl of its dtype, got rt<f32, 16, 16, row> into gl<f32, 1, 1, -1, 32> without add
!g = !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 32 : i64>
func.func @no_add(%acc: !g, %start: f32) attributes {tk.kernel, tk.arg_names = ["acc", "start"]} {
  %c0 = arith.constant 0 : index
  %i = "tk.iota"(%start) {axis = 1 : i64} : (f32) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  "tk.store"(%acc, %i, %c0, %c0, %c0, %c0) {packed} : (!g, !tk.rt<f32, 16 : i64, 16 : i64, "row">, index, index, index, index) -> () loc("k.py":9:3)
  return
}
