// roll: numpy.roll by a constant shift, one shfl.sync.idx a register. Along
// columns by 2 (even: each pair moves whole) in a 16 x 16 tile: every lane
// reads lane 4g + (t - 1) % 4 and sends, for each register, the one its
// reader wants, chosen by a select on its quad position t (the registers
// wrapping across the 8-column halves): 8 shuffles. Along rows by 8 of a
// 32 x 16 tile: the row group stays (8 % 8 = 0), so no lane index changes and
// nothing is selected: each register comes from the other 8-row half.
// RUN: tkc %s --pass-pipeline=tk-verify --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --pass-pipeline=tk-verify --emit=ptx | FileCheck %s --check-prefix=PTX

// NVVM-LABEL: llvm.func @columns
// NVVM-COUNT-8: nvvm.shfl.sync idx {{.*}} : f32 -> f32
// NVVM-NOT: nvvm.shfl.sync
// NVVM-LABEL: llvm.func @rows
// NVVM-NOT: arith.select
// NVVM-COUNT-16: nvvm.shfl.sync idx {{.*}} : f32 -> f32
// NVVM-NOT: nvvm.shfl.sync

// PTX-LABEL: .entry columns(
// PTX-COUNT-8: shfl.sync.idx.b32
// PTX-LABEL: .entry rows(
// PTX-COUNT-16: shfl.sync.idx.b32
func.func @columns(%a: !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, index, index, index, index) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  %y = "tk.roll"(%x) {shift = 2 : i64, axis = 1 : i64} : (!tk.rt<f32, 16 : i64, 16 : i64, "row">) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  "tk.store"(%a, %y, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, !tk.rt<f32, 16 : i64, 16 : i64, "row">, index, index, index, index) -> ()
  return
}

func.func @rows(%a: !tk.gl<f32, 1 : i64, 1 : i64, 32 : i64, 16 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 32 : i64, 16 : i64>, index, index, index, index) -> !tk.rt<f32, 32 : i64, 16 : i64, "row">
  %y = "tk.roll"(%x) {shift = 8 : i64, axis = 0 : i64} : (!tk.rt<f32, 32 : i64, 16 : i64, "row">) -> !tk.rt<f32, 32 : i64, 16 : i64, "row">
  "tk.store"(%a, %y, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 32 : i64, 16 : i64>, !tk.rt<f32, 32 : i64, 16 : i64, "row">, index, index, index, index) -> ()
  return
}
