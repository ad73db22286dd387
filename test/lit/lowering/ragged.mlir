// Ragged accesses: tk.load {fill} is a predicated load whose registers are
// preset to the fill (`@p ld.global`, Triton's masked load: no select after
// it, so ptxas can issue every load before the first use, and no address
// clamp: a load that is off is not made); tk.store {clip} branches around
// each access (LLVM sinks a load only a store uses). The bounds are the gl's
// runtime rows and columns (kernel parameters).
// RUN: tkc %s --pass-pipeline=tk-verify --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
// The manifest asks only for 16-byte rows (c a multiple of 8 bf16), not whole tiles.
// RUN: tkc %s --pass-pipeline=tk-verify --emit=nvvm | FileCheck %s --check-prefix=MANIFEST

// MANIFEST: \22divisible\22: [1, 1, 1, 8]
// CHECK-LABEL: .entry ragged(
// CHECK: .param .u32 ragged_param_1
// CHECK: .param .u32 ragged_param_2
// CHECK-NOT: selp
// CHECK: mov.b32 %r{{[0-9]+}}, 0x00000000; mov.b32 %r{{[0-9]+}}, 0x00000000; mov.b32 %r{{[0-9]+}}, 0x00000000; mov.b32 %r{{[0-9]+}}, 0x00000000; @%p{{[0-9]+}} ld.global.v4.b32
// CHECK-NOT: selp
// CHECK: @{{.*}}bra
// CHECK-NOT: selp
// CHECK: st.global.v4.b32
// CHECK: @{{.*}}bra
// CHECK: st.global.v4.b32
func.func @ragged(%x: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = "tk.load"(%x, %c0, %c0, %c1, %c1) {fill = 0.0 : f32} : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 32 : i64, "wide">
  "tk.store"(%x, %t, %c0, %c0, %c0, %c0) {clip} : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, !tk.rt<bf16, 16 : i64, 32 : i64, "wide">, index, index, index, index) -> ()
  return
}
