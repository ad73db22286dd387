// tk-verify: tk.peer only of a parallel gl argument (tk.peers), tk.rank only
// in a kernel with one, flags only in an i32 gl.
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | FileCheck %s
// CHECK: error: peer: the source must be a parallel gl argument (one the kernel's tk.peers lists: tkc.pgl), got argument 0
// CHECK: error: rank: the kernel has no parallel gl argument (tk.peers)
// CHECK: error: signal: the flags must be an i32 gl, got gl<f32, 1, 1, 1, 16>
func.func @bad(%g: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>) attributes {tk.kernel, tk.warps = 1 : i64} {
  %c0 = arith.constant 0 : index
  %p = "tk.peer"(%g, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, index) -> !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>
  %r = "tk.rank"() : () -> index
  "tk.signal"(%g, %c0, %c0, %c0, %c0, %r) : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, index, index, index, index, index) -> ()
  return
}
