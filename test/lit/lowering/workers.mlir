// Worker ids from threadIdx.x, grid ids from ctaid/nctaid, tk.dim from the
// kernel parameters (a runtime dim is an i32 parameter), tk.sync = bar.sync 0.
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX

// NVVM-LABEL: llvm.func @ids(%arg0: !llvm.ptr<1>, %arg1: i32, %arg2: f32)
// NVVM-DAG: nvvm.read.ptx.sreg.tid.x
// NVVM-DAG: nvvm.read.ptx.sreg.ctaid.y
// NVVM-DAG: nvvm.read.ptx.sreg.nctaid.z
// NVVM-DAG: arith.index_cast %arg1 : i32 to index
// NVVM: nvvm.barrier0

// PTX-DAG: mov.u32 {{.*}}%tid.x;
// PTX-DAG: mov.u32 {{.*}}%ctaid.y;
// PTX-DAG: mov.u32 {{.*}}%nctaid.z;
// PTX: bar.sync 0;
func.func @ids(%g: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, %x: f32) attributes {tk.kernel, tk.warps = 8 : i64} {
  %l = "tk.laneid"() : () -> index
  %w = "tk.warpid"() : () -> index
  %wg = "tk.warpgroupid"() : () -> index
  %by = "tk.block_idx"() {dim = "y"} : () -> index
  %gz = "tk.grid_dim"() {dim = "z"} : () -> index
  %r = "tk.dim"(%g) {axis = "r"} : (!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>) -> index
  %c = "tk.dim"(%g) {axis = "c"} : (!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>) -> index
  %s0 = arith.addi %l, %w : index
  %s1 = arith.addi %s0, %wg : index
  %s2 = arith.addi %s1, %by : index
  %s3 = arith.addi %s2, %gz : index
  %s4 = arith.addi %s3, %r : index
  %i = arith.addi %s4, %c : index
  "tk.sync"() : () -> ()
  %v = "tk.fill"(%x) : (f32) -> !tk.rv<f32, 16 : i64, "row">
  "tk.store"(%g, %v, %i, %i, %i, %i) : (!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, !tk.rv<f32, 16 : i64, "row">, index, index, index, index) -> ()
  return
}
