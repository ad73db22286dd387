// tk-verify: tk.strided names distinct gl arguments, none of them a parallel
// gl (a pgl's symmetric buffers are contiguous).
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | FileCheck %s
// CHECK: error: kernel @scalar: tk.strided names argument 1, which is not a gl argument
// CHECK: error: kernel @twice: tk.strided lists an argument twice: [0, 0]
// CHECK: error: kernel @parallel: tk.strided names argument 0, a parallel gl (a pgl's buffers are contiguous)
func.func @scalar(%g: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, %s: f32)
    attributes {tk.kernel, tk.warps = 1 : i64, tk.strided = array<i64: 1>} {
  return
}
func.func @twice(%g: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>)
    attributes {tk.kernel, tk.warps = 1 : i64, tk.strided = array<i64: 0, 0>} {
  return
}
func.func @parallel(%g: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>)
    attributes {tk.kernel, tk.warps = 1 : i64, tk.peers = array<i64: 0>, tk.strided = array<i64: 0>} {
  return
}
