// exp2 with a share of the elements on the FMA pipe (tk.exp2 {fma = s}): each emulated
// element is a saturating fma (the clamp), a fma back to [-127, 128], an add rounding
// down (floor), a degree-3 polynomial of fmas and the floor shifted into the exponent;
// the rest stay ex2.approx. A 16 x 16 f32 tile is 8 values a thread: fma = 0.25 emulates
// 2 of them (values 3 and 7), 6 stay on the MUFU.
// RUN: tkc %s --emit=ptx | FileCheck %s
// RUN: tkc %s --emit=ptx | grep -c "ex2.approx.ftz.f32" | FileCheck %s --check-prefix=MUFU
// RUN: tkc %s --emit=ptx | grep -c "add.rm.ftz.f32" | FileCheck %s --check-prefix=POLY

!T = !tk.rt<f32, 16 : i64, 16 : i64, "row">
!G = !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>

// CHECK-LABEL: .entry share(
// CHECK: ex2.approx.ftz.f32
// CHECK: fma.rn.sat.f32 [[U:%r[0-9]+]],
// CHECK: fma.rn.f32 {{.*}}[[X:%r[0-9]+]], [[U]], 0f437F0000, 0fC2FE0000;
// CHECK: add.rm.ftz.f32 [[T:%r[0-9]+]], [[X]],
// CHECK: fma.rn.f32 {{.*}}, 0f3D9DD4CB, 0f3E691C0F;
// CHECK: fma.rn.f32 {{.*}}, 0f3F31F328;
// CHECK: fma.rn.f32 {{.*}}, 0f3F800000;
// CHECK: shl.b32 {{.*}}, [[T]], 23;
// MUFU: 6
// POLY: 2
func.func @share(%x: !G, %o: !G) attributes {tk.kernel, tk.warps = 1 : i64} {
  %c0 = arith.constant 0 : index
  %a = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!G, index, index, index, index) -> !T
  %e = "tk.exp2"(%a) {fma = 0.25 : f64} : (!T) -> !T
  "tk.store"(%o, %e, %c0, %c0, %c0, %c0) : (!G, !T, index, index, index, index) -> ()
  return
}
