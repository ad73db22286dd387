// tk.load_split / tk.store_join: a wide 16x32 tile's lane takes the 16 gl
// elements behind its 8 columns (two 16-byte accesses) and deals them to the
// even and odd tiles; the join stores them back interleaved.
// RUN: tkc %s --pass-pipeline=tk-verify --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// CHECK-LABEL: .entry swap_pairs(
// CHECK-COUNT-4: ld.global.v4.b32
// CHECK-NOT: ld.global
// CHECK-COUNT-4: st.global.v4.b32
// CHECK-NOT: st.global
func.func @swap_pairs(%x: !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 64 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %e, %o = "tk.load_split"(%x, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 64 : i64>, index, index, index, index) -> (!tk.rt<bf16, 16 : i64, 32 : i64, "wide">, !tk.rt<bf16, 16 : i64, 32 : i64, "wide">)
  "tk.store_join"(%x, %o, %e, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 64 : i64>, !tk.rt<bf16, 16 : i64, 32 : i64, "wide">, !tk.rt<bf16, 16 : i64, 32 : i64, "wide">, index, index, index, index) -> ()
  return
}

// One f32 element: a broadcast load clamped to the base outside, and a store
// by lane 0 inside the gl only (LLVM sinks the load into the store's branch).
// CHECK-LABEL: .entry element(
// CHECK: @{{.*}}bra
// CHECK: selp.b64
// CHECK: ld.global.b32
// CHECK: selp.f32
// CHECK: st.global.b32
func.func @element(%m: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>, %i: i32) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.index_cast %i : i32 to index
  %n1 = arith.addi %n, %c1 : index
  %v = "tk.load"(%m, %c0, %c0, %c0, %n) {elements, fill = 0.0 : f32} : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>, index, index, index, index) -> f32
  "tk.store"(%m, %v, %c0, %c0, %c0, %n1) {elements, clip} : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>, f32, index, index, index, index) -> ()
  return
}

// With an st: a wide lane's 8 pair columns are 32 adjacent bytes of its row,
// two 16-byte ld/st.shared per base tile, each at its own swizzled address
// (the XOR of the 128b mode); a row-layout lane's are 8 bytes (4 elements)
// per run, 4 runs per base tile (a 16x16 pair tile here).
// CHECK-LABEL: .entry swap_pairs_shared(
// CHECK: xor.b
// CHECK-COUNT-4: ld.shared.v4.b32
// CHECK-COUNT-4: st.shared.v4.b32
// CHECK-COUNT-4: ld.shared.v4.b16
// CHECK-COUNT-4: st.shared.v4.b16
// CHECK-NOT: ld.shared
func.func @swap_pairs_shared() attributes {tk.kernel} {
  %s = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 128 : i64, "128b">
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e, %o = "tk.load_split"(%s, %c0, %c1) : (!tk.st<bf16, 16 : i64, 128 : i64, "128b">, index, index) -> (!tk.rt<bf16, 16 : i64, 32 : i64, "wide">, !tk.rt<bf16, 16 : i64, 32 : i64, "wide">)
  "tk.store_join"(%s, %o, %e, %c0, %c1) : (!tk.st<bf16, 16 : i64, 128 : i64, "128b">, !tk.rt<bf16, 16 : i64, 32 : i64, "wide">, !tk.rt<bf16, 16 : i64, 32 : i64, "wide">, index, index) -> ()
  %re, %ro = "tk.load_split"(%s, %c0, %c0) : (!tk.st<bf16, 16 : i64, 128 : i64, "128b">, index, index) -> (!tk.rt<bf16, 16 : i64, 16 : i64, "row">, !tk.rt<bf16, 16 : i64, 16 : i64, "row">)
  "tk.store_join"(%s, %ro, %re, %c0, %c0) : (!tk.st<bf16, 16 : i64, 128 : i64, "128b">, !tk.rt<bf16, 16 : i64, 16 : i64, "row">, !tk.rt<bf16, 16 : i64, 16 : i64, "row">, index, index) -> ()
  return
}
