// row_pick / col_pick: one shfl.sync.idx per slot of the result rv, from the
// lane holding the element. Column 13 of a 16 x 32 tile: rows g, g+8 (2
// slots) from lane 4g + (13 % 8) / 2 = 4g + 2, each sending its element
// (block 0, 8-half 1, odd) = k 5 (row g) and 7 (row g + 8): no select. Row i
// (a run-time index) of a 32 x 16 tile: 4 slots from lane 4 (i % 8) + t,
// each lane choosing what it sends among (16-row block, 8-half) by a select
// chain (3 selects a slot).
// RUN: tkc %s --pass-pipeline=tk-verify --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --pass-pipeline=tk-verify --emit=ptx | FileCheck %s --check-prefix=PTX

// NVVM-LABEL: llvm.func @column
// NVVM-NOT: arith.select
// NVVM-COUNT-2: nvvm.shfl.sync idx {{.*}} : f32 -> f32
// NVVM-NOT: nvvm.shfl.sync
// NVVM-LABEL: llvm.func @row
// NVVM-COUNT-3: arith.select
// NVVM: nvvm.shfl.sync idx {{.*}} : f32 -> f32
// NVVM-COUNT-3: arith.select
// NVVM: nvvm.shfl.sync idx {{.*}} : f32 -> f32

// PTX-LABEL: .entry column(
// PTX: or.b32 [[SRC:%r[0-9]+]], {{%r[0-9]+}}, 2;
// PTX-COUNT-2: shfl.sync.idx.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, [[SRC]], 31, -1;
// PTX-LABEL: .entry row(
// PTX-COUNT-4: shfl.sync.idx.b32
func.func @column(%a: !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, %o: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %c13 = arith.constant 13 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, index, index, index, index) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %v = "tk.row_pick"(%x, %c13) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, index) -> !tk.rv<f32, 16 : i64, "col">
  "tk.store"(%o, %v, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, !tk.rv<f32, 16 : i64, "col">, index, index, index, index) -> ()
  return
}

func.func @row(%a: !tk.gl<f32, 1 : i64, 1 : i64, 32 : i64, 16 : i64>, %o: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %i = "tk.block_idx"() {dim = "x"} : () -> index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 32 : i64, 16 : i64>, index, index, index, index) -> !tk.rt<f32, 32 : i64, 16 : i64, "row">
  %v = "tk.col_pick"(%x, %i) : (!tk.rt<f32, 32 : i64, 16 : i64, "row">, index) -> !tk.rv<f32, 16 : i64, "row">
  "tk.store"(%o, %v, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, !tk.rv<f32, 16 : i64, "row">, index, index, index, index) -> ()
  return
}
