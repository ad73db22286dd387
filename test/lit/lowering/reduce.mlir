// Row reductions: per-thread combine, then shfl.sync.bfly xor 1 and 2 across
// the quad (two rows g, g+8 per thread: 4 shuffles); column reductions: xor 4, 8, 16
// across the quads (4 columns per thread per 16: 12). Broadcasts need no shuffle.
// The row layout as written (tk-verify only: the default pipeline would make
// these tiles wide, see wide.mlir).
// RUN: tkc %s --pass-pipeline=tk-verify --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --pass-pipeline=tk-verify --emit=ptx | FileCheck %s --check-prefix=PTX

// NVVM-LABEL: llvm.func @row_max_sub_row
// NVVM-COUNT-4: nvvm.shfl.sync bfly {{.*}} : f32 -> f32
// NVVM-NOT: nvvm.shfl.sync
// NVVM: arith.subf
// NVVM-LABEL: llvm.func @col_sum
// NVVM-COUNT-12: nvvm.shfl.sync bfly {{.*}} : f32 -> f32

// PTX-LABEL: .entry row_max_sub_row(
// PTX-DAG: shfl.sync.bfly.b32 {{.*}}, 1, 31, -1;
// PTX-DAG: shfl.sync.bfly.b32 {{.*}}, 2, 31, -1;
// PTX-DAG: max.f32
// PTX-LABEL: .entry col_sum(
// PTX-DAG: shfl.sync.bfly.b32 {{.*}}, 4, 31, -1;
// PTX-DAG: shfl.sync.bfly.b32 {{.*}}, 8, 31, -1;
// PTX-DAG: shfl.sync.bfly.b32 {{.*}}, 16, 31, -1;
// PTX-DAG: add{{(.rn)?}}.f32
func.func @row_max_sub_row(%a: !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 32 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, index, index, index, index) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %m = "tk.row_max"(%x) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rv<f32, 16 : i64, "col">
  %y = "tk.sub_row"(%x, %m) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 16 : i64, "col">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  "tk.store"(%a, %y, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, !tk.rt<f32, 16 : i64, 32 : i64, "row">, index, index, index, index) -> ()
  return
}

func.func @col_sum(%a: !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, %o: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, index, index, index, index) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  %s = "tk.col_sum"(%x) : (!tk.rt<f32, 16 : i64, 16 : i64, "row">) -> !tk.rv<f32, 16 : i64, "row">
  "tk.store"(%o, %s, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, !tk.rv<f32, 16 : i64, "row">, index, index, index, index) -> ()
  return
}
