// exp2 with a share of the elements on the FMA pipe (tk.exp2 {fma = s}): each emulated
// element is a saturating fma (the clamp, u = (x + 127) / 255), a fma rounding down
// (floor: t = 255 u + 1.5 * 2^23 - 127), f = 255 u - (t - (1.5 * 2^23 - 127)), a degree-3
// polynomial of fmas and the floor shifted into the exponent; the rest stay ex2.approx.
// A 16 x 16 f32 tile is 8 values a thread: fma = 0.25 emulates 2 of them (values 3 and
// 7), 6 stay on the MUFU. Where exp2's operand is a fma (@folded, the softmax's x c + r;
// a product folds the same way, test_lowering_compute.py),
// the clamp takes that fma's operands: x (c / 255) + (r + 127) / 255.
// RUN: tkc %s --emit=ptx | FileCheck %s
// (the counts: both kernels, 6 on the MUFU and 2 emulated each)
// RUN: tkc %s --emit=ptx | grep -c "ex2.approx.ftz.f32" | FileCheck %s --check-prefix=MUFU
// RUN: tkc %s --emit=ptx | grep -c "fma.rm.f32" | FileCheck %s --check-prefix=POLY
// RUN: tkc %s --emit=ptx | grep -c "fma.rn.sat.f32" | FileCheck %s --check-prefix=POLY

!T = !tk.rt<f32, 16 : i64, 16 : i64, "row">
!G = !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>

// CHECK-LABEL: .entry share(
// CHECK: ex2.approx.ftz.f32
// CHECK: fma.rn.sat.f32 [[U:%r[0-9]+]],
// CHECK: mov.b32 [[C:%r[0-9]+]], 1132396544;
// CHECK: mov.b32 [[B:%r[0-9]+]], 1262485377;
// CHECK: fma.rm.f32 [[T:%r[0-9]+]], [[U]], [[C]], [[B]];
// CHECK: sub.rn.f32 [[D:%r[0-9]+]], {{%r[0-9]+}}, [[T]];
// CHECK: fma.rn.f32 [[F:%r[0-9]+]], [[U]], 0f437F0000, [[D]];
// CHECK: fma.rn.f32 {{.*}}, [[F]], 0f3D9DD4CB, 0f3E691C0F;
// CHECK: fma.rn.f32 {{.*}}, [[F]], 0f3F31F328;
// CHECK: fma.rn.f32 {{.*}}, [[F]], 0f3F800000;
// CHECK: shl.b32 {{.*}}, [[T]], 23;
// MUFU: 12
// POLY: 4
func.func @share(%x: !G, %o: !G) attributes {tk.kernel, tk.warps = 1 : i64} {
  %c0 = arith.constant 0 : index
  %a = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!G, index, index, index, index) -> !T
  %e = "tk.exp2"(%a) {fma = 0.25 : f64} : (!T) -> !T
  "tk.store"(%o, %e, %c0, %c0, %c0, %c0) : (!G, !T, index, index, index, index) -> ()
  return
}

// The operand a fma of a tile, a scalar and a column (the softmax's s c - m c): the two
// emulated elements' clamps take its operands, so of its 8 fmas only the 6 on the MUFU's
// side remain; the scale is divided by 255 once, and the column (r + 127) / 255 once a row.
// CHECK-LABEL: .entry folded(
// CHECK: mul.rn.f32 [[Q:%r[0-9]+]], %r{{[0-9]+}}, 0f3B808081;
// CHECK: fma.rn.sat.f32 {{%r[0-9]+}}, {{%r[0-9]+}}, [[Q]], {{%r[0-9]+}};
!V = !tk.rv<f32, 16 : i64, "col">
func.func @folded(%x: !G, %o: !G, %c: f32) attributes {tk.kernel, tk.warps = 1 : i64} {
  %c0 = arith.constant 0 : index
  %a = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!G, index, index, index, index) -> !T
  %m = "tk.row_max"(%a) : (!T) -> !V
  %s = "tk.fma"(%a, %c, %m) : (!T, f32, !V) -> !T
  %e = "tk.exp2"(%s) {fma = 0.25 : f64} : (!T) -> !T
  "tk.store"(%o, %e, %c0, %c0, %c0, %c0) : (!G, !T, index, index, index, index) -> ()
  return
}
