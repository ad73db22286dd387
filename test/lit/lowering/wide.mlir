// The wide rt layout and flat rv kind: every lane moves 16 bytes per access
// (ld/st.global.v4.b32, ld/st.shared.v4.b32); f32 runs of 8 split in two.
// Wide row reductions: xor 16, then two shfl.idx per 16 rows into the "col"
// rv; row broadcasts: two shfl.idx and a select per 16 rows. Whole-vector
// reductions butterfly over the lanes holding distinct elements.
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// NVVM-LABEL: llvm.func @wide_softmax
// NVVM-COUNT-2: llvm.load {{.*}} -> vector<8xbf16>
// NVVM-NOT: llvm.load
// NVVM: nvvm.shfl.sync bfly %{{.*}}, %{{.*}}, %c16_i32
// NVVM-COUNT-4: nvvm.shfl.sync idx
// NVVM-NOT: nvvm.shfl.sync
// NVVM: arith.select
// NVVM-COUNT-4: llvm.store {{.*}} : vector<4xf32>
// PTX-LABEL: .entry wide_softmax(
// PTX-COUNT-2: ld.global.v4.b32
// PTX-NOT: ld.global
// PTX: shfl.sync.bfly.b32 {{.*}}, 16, 31, -1;
// PTX: shfl.sync.idx.b32
// PTX-COUNT-4: st.global.v4.b32
// PTX-NOT: st.global
func.func @wide_softmax(%x: !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, %y: !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 32 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %t = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, index, index, index, index) -> !tk.rt<f32, 16 : i64, 32 : i64, "wide">
  %m = "tk.row_max"(%t) : (!tk.rt<f32, 16 : i64, 32 : i64, "wide">) -> !tk.rv<f32, 16 : i64, "col">
  %s = "tk.sub_row"(%t, %m) : (!tk.rt<f32, 16 : i64, 32 : i64, "wide">, !tk.rv<f32, 16 : i64, "col">) -> !tk.rt<f32, 16 : i64, 32 : i64, "wide">
  "tk.store"(%y, %s, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, !tk.rt<f32, 16 : i64, 32 : i64, "wide">, index, index, index, index) -> ()
  return
}

// NVVM-LABEL: llvm.func @flat_norm
// NVVM-COUNT-2: llvm.load {{.*}} -> vector<8xbf16>
// NVVM-COUNT-5: nvvm.shfl.sync bfly
// NVVM: rsqrt.approx.ftz.f32
// PTX-LABEL: .entry flat_norm(
// PTX-COUNT-2: ld.global.v4.b32
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX: rsqrt.approx.ftz.f32
// PTX-COUNT-2: st.global.v4.b32
// PTX-NOT: st.global
func.func @flat_norm(%x: !tk.gl<bf16, 1 : i64, 1 : i64, 1 : i64, 512 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %v = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 1 : i64, 512 : i64>, index, index, index, index) -> !tk.rv<f32, 512 : i64, "flat">
  %q = "tk.mul"(%v, %v) : (!tk.rv<f32, 512 : i64, "flat">, !tk.rv<f32, 512 : i64, "flat">) -> !tk.rv<f32, 512 : i64, "flat">
  %s = "tk.vec_sum"(%q) : (!tk.rv<f32, 512 : i64, "flat">) -> f32
  %r = "tk.rsqrt"(%s) : (f32) -> f32
  %o = "tk.mul"(%v, %r) : (!tk.rv<f32, 512 : i64, "flat">, f32) -> !tk.rv<f32, 512 : i64, "flat">
  "tk.store"(%x, %o, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 1 : i64, 512 : i64>, !tk.rv<f32, 512 : i64, "flat">, index, index, index, index) -> ()
  return
}

// Shared memory: a wide rt and a flat rv move 16 bytes a lane too, without
// bank conflicts (no warning: `not grep` below).
// RUN: tkc %s --emit=tile 2>&1 >/dev/null | not grep warning
// PTX-LABEL: .entry wide_shared(
// PTX-COUNT-3: ld.shared.v4.b32
// PTX-COUNT-3: st.shared.v4.b32
// PTX-NOT: ld.shared
// PTX-NOT: st.shared
func.func @wide_shared() attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %st = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 64 : i64, "128b">
  %sv = "tk.alloc"() : () -> !tk.sv<bf16, 256 : i64>
  %sv2 = "tk.alloc"() : () -> !tk.sv<bf16, 256 : i64>
  %t = "tk.load"(%st, %c0, %c0) : (!tk.st<bf16, 16 : i64, 64 : i64, "128b">, index, index) -> !tk.rt<bf16, 16 : i64, 32 : i64, "wide">
  %v = "tk.load"(%sv) : (!tk.sv<bf16, 256 : i64>) -> !tk.rv<bf16, 256 : i64, "flat">
  "tk.store"(%st, %t, %c0, %c1) : (!tk.st<bf16, 16 : i64, 64 : i64, "128b">, !tk.rt<bf16, 16 : i64, 32 : i64, "wide">, index, index) -> ()
  "tk.store"(%sv2, %v) : (!tk.sv<bf16, 256 : i64>, !tk.rv<bf16, 256 : i64, "flat">) -> ()
  return
}
