// TMA into a shared vector: an sv<f32, 64> is a one-row box of 64
// elements (256 bytes, no swizzle), one cp.async.bulk.tensor at element
// coordinates (c * 64, r, d, b), 256 bytes expected on the mbarrier;
// the manifest's tensor map has box [1, 64]. The vector is then read from
// shared memory as a row vector (its lane's pairs).
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// NVVM: \22tensor_maps\22: [{\22param\22: 0, \22name\22: \22stats\22, \22dtype\22: \22f32\22, \22box\22: [1, 64], \22swizzle\22: \22none\22}]
// NVVM-COUNT-1: nvvm.cp.async.bulk.tensor.shared.cluster.global
// NVVM-NOT: nvvm.cp.async.bulk.tensor.shared.cluster.global
// PTX: .entry tma_vector(
// PTX: shl.b32 %r[[C:[0-9]+]], %r{{[0-9]+}}, 6;
// PTX: mbarrier.arrive.expect_tx.shared.b64 %rd{{[0-9]+}}, [__tkc_shared+256], %r{{[0-9]+}};
// PTX: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd{{[0-9]+}}], [%rd{{[0-9]+}}, {%r[[C]], %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}], [__tkc_shared+256];
// PTX-NOT: cp.async.bulk.tensor
// PTX: ld.shared.v2.b32
func.func @tma_vector(%stats: !tk.gl<f32, 1 : i64, 1 : i64, 2 : i64, -1 : i64>, %out: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>)
    attributes {tk.kernel, tk.warps = 1 : i64, tk.arg_names = ["stats", "out"]} {
  %s = "tk.alloc"() : () -> !tk.sv<f32, 64 : i64>
  %bar = "tk.alloc"() : () -> !tk.barrier
  "tk.init_barrier"(%bar) {count = 1 : i64} : (!tk.barrier) -> ()
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  "tk.expect_bytes"(%bar) {bytes = 256 : i64} : (!tk.barrier) -> ()
  "tk.tma_load"(%s, %stats, %c0, %c0, %c1, %x, %bar) : (!tk.sv<f32, 64 : i64>, !tk.gl<f32, 1 : i64, 1 : i64, 2 : i64, -1 : i64>, index, index, index, index, !tk.barrier) -> ()
  "tk.wait"(%bar, %c0) : (!tk.barrier, index) -> ()
  %v = "tk.load"(%s) : (!tk.sv<f32, 64 : i64>) -> !tk.rv<f32, 64 : i64, "row">
  "tk.store"(%out, %v, %c0, %c0, %c0, %x) : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>, !tk.rv<f32, 64 : i64, "row">, index, index, index, index) -> ()
  return
}
