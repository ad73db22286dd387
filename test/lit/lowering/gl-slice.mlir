// gl slices and index gls (varlen batches): one element of an i32 gl is an
// ld.global.b32 (clamped to the base outside, the fill selected); a slice
// of rows [start, start + size) moves the addressing origin by start rows
// and bounds ragged accesses by its size, clamped to the rows the argument
// has from start; a TMA load or store through the slice adds start to the
// box's row coordinate of the argument's tensor map (the same row both).
// RUN: tkc %s --pass-pipeline=tk-verify,tk-layout-selection --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
// The manifest: an i32 gl, and no whole-tile requirement on the sliced rows.
// RUN: tkc %s --pass-pipeline=tk-verify,tk-layout-selection --emit=nvvm | FileCheck %s --check-prefix=MANIFEST

// MANIFEST: \22dtype\22: \22i32\22
// MANIFEST: \22divisible\22: [1, 1, 1, 8]
// CHECK-LABEL: .entry varlen(
// CHECK: ld.global.b32
// CHECK: ld.global.{{[bs]}}32
// CHECK: max.s64
// CHECK: min.s64
// CHECK: ld.global.v4.b32
// CHECK: st.global.v4.b32
// CHECK: add.s32 [[ROW:%r[0-9]+]], %r{{[0-9]+}}, 16;
// CHECK: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{{%rd[0-9]+}}], [{{%rd[0-9]+}}, {{[{]}}{{%r[0-9]+}}, [[ROW]],
// CHECK: cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [{{%rd[0-9]+}}, {{[{]}}{{%r[0-9]+}}, [[ROW]],
func.func @varlen(%cu: !tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>,
                  %x: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>)
    attributes {tk.kernel, tk.arg_names = ["cu", "x"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = "tk.block_idx"() {dim = "x"} : () -> index
  %b1 = arith.addi %b, %c1 : index
  %s32 = "tk.load"(%cu, %c0, %c0, %c0, %b) {elements, fill = 0.0 : f32} : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>, index, index, index, index) -> i32
  %e32 = "tk.load"(%cu, %c0, %c0, %c0, %b1) {elements, fill = 0.0 : f32} : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>, index, index, index, index) -> i32
  %s = arith.index_cast %s32 : i32 to index
  %e = arith.index_cast %e32 : i32 to index
  %n = arith.subi %e, %s : index
  %xs = "tk.gl_slice"(%x, %s, %n) {axis = "r"} : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, index, index) -> !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>
  %t = "tk.load"(%xs, %c0, %c0, %c1, %c0) {fill = 0.0 : f32} : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  "tk.store"(%xs, %t, %c0, %c0, %c0, %c0) {clip} : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, !tk.rt<bf16, 16 : i64, 64 : i64, "row">, index, index, index, index) -> ()
  %bar = "tk.alloc"() : () -> !tk.barrier
  "tk.init_barrier"(%bar) {count = 1 : i64} : (!tk.barrier) -> ()
  %st = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 64 : i64, "auto">
  "tk.expect_bytes"(%bar) {bytes = 2048 : i64} : (!tk.barrier) -> ()
  "tk.tma_load"(%st, %xs, %c0, %c0, %c1, %c0, %bar) : (!tk.st<bf16, 16 : i64, 64 : i64, "auto">, !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, index, index, index, index, !tk.barrier) -> ()
  "tk.wait"(%bar, %c0) : (!tk.barrier, index) -> ()
  "tk.tma_store"(%xs, %st, %c0, %c0, %c1, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, !tk.st<bf16, 16 : i64, 64 : i64, "auto">, index, index, index, index) -> ()
  "tk.tma_store_wait"() {pending = 0 : i64} : () -> ()
  return
}
