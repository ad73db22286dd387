// tk.rand: Philox4x32-10 per aligned group of 4 elements. A wide 16x16 tile
// is 8 elements a lane = 2 calls, every word used; each round is a mul.lo and
// a mul.hi per multiplier (ptxas: IMAD.WIDE) and xors. The key schedule
// depends on the seed only: one add per round, shared by the calls.
// RUN: tkc %s --pass-pipeline=tk-verify --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: FileCheck %s --check-prefix=CVT < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// (2 calls x 10 rounds x 2 multipliers = 40 mul.hi, fewer where rounds
// of the two calls coincide: the first round's offset word.)
// RUN: not grep -E "mul.lo.s64|xor.b64" %t.ptx
// CHECK-LABEL: .entry wide_rand(
// CHECK-COUNT-36: mul.hi.u32
// CVT-COUNT-8: cvt.rn.f32.u32
// CVT-NOT: cvt.rn.f32.u32
func.func @wide_rand(%x: !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, %seed: i32, %off: i32) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %s = arith.index_cast %seed : i32 to index
  %o = arith.index_cast %off : i32 to index
  %u = "tk.rand"(%s, %o, %c0, %c16) : (index, index, index, index) -> !tk.rt<f32, 16 : i64, 16 : i64, "wide">
  "tk.store"(%x, %u, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, !tk.rt<f32, 16 : i64, 16 : i64, "wide">, index, index, index, index) -> ()
  return
}
