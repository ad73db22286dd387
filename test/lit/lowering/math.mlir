// Tile math: each function's instructions (docs/tile-ir.md, "Math"). sqrt, rsqrt, rcp
// and tanh are single approximate instructions; sigmoid is rcp(1 + ex2(-x log2 e)); erf a
// polynomial of fmas times ex2, with the sign copied back; tile `/` is div.full.f32 unless
// the op is `ieee`; fma is one fma.rn.
// RUN: tkc %s --emit=ptx | FileCheck %s

!T = !tk.rt<f32, 16 : i64, 16 : i64, "row">
!G = !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>

// CHECK-LABEL: .entry maths(
// CHECK: sqrt.approx.ftz.f32
// CHECK: rsqrt.approx.ftz.f32
// CHECK: rcp.approx.ftz.f32
// CHECK: tanh.approx.f32
// CHECK: ex2.approx.ftz.f32
// CHECK: rcp.approx.ftz.f32
// CHECK: fma.rn.f32
// CHECK: ex2.approx.ftz.f32
// CHECK: copysign.f32
// CHECK: div.full.f32
// CHECK: div.rn.f32
// CHECK: fma.rn.f32
func.func @maths(%x: !G, %o: !G) attributes {tk.kernel, tk.warps = 1 : i64} {
  %c0 = arith.constant 0 : index
  %a = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!G, index, index, index, index) -> !T
  %s = "tk.sqrt"(%a) : (!T) -> !T
  %r = "tk.rsqrt"(%s) : (!T) -> !T
  %q = "tk.rcp"(%r) : (!T) -> !T
  %t = "tk.tanh"(%q) : (!T) -> !T
  %g = "tk.sigmoid"(%t) : (!T) -> !T
  %e = "tk.erf"(%g) : (!T) -> !T
  %d = "tk.div"(%e, %a) : (!T, !T) -> !T
  %i = "tk.div"(%d, %a) {ieee} : (!T, !T) -> !T
  %f = "tk.fma"(%i, %a, %s) : (!T, !T, !T) -> !T
  "tk.store"(%o, %f, %c0, %c0, %c0, %c0) : (!G, !T, index, index, index, index) -> ()
  return
}
