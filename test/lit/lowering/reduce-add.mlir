// Accumulating into global memory and iota from a start, the pieces of the
// attention backward's dQ and masks. tk.store {add, clip} of an f32 row tile
// is one red.global.add.v2.f32 per pair of adjacent columns (no value comes
// back; PTX ISA 8.1), each behind the ragged bounds check; tk.iota with a start adds the start to the lane's
// part first (one add), then a constant per element, so nothing per element
// is loop-invariant.
// RUN: tkc %s --pass-pipeline=tk-verify --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --pass-pipeline=tk-verify --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// NVVM-LABEL: llvm.func @accumulate
// NVVM: %[[LANE:.*]] = arith.uitofp
// NVVM: %[[FROM:.*]] = arith.addf %[[LANE]], %arg
// NVVM: arith.addf %[[FROM]], %{{.*}}
// NVVM-COUNT-4: llvm.inline_asm has_side_effects "red.global.add.v2.f32 [$0], {$1, $2};", "l,f,f"
// NVVM-NOT: red.global
// PTX: .version 8.1
// PTX-LABEL: .entry accumulate(
// PTX-COUNT-4: red.global.add.v2.f32
// PTX-NOT: red.global
func.func @accumulate(%acc: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, %start: f32)
    attributes {tk.kernel, tk.arg_names = ["acc", "start"]} {
  %c0 = arith.constant 0 : index
  %i = "tk.iota"(%start) {axis = 1 : i64} : (f32) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  "tk.store"(%acc, %i, %c0, %c0, %c0, %c0) {add, clip} : (!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, !tk.rt<f32, 16 : i64, 16 : i64, "row">, index, index, index, index) -> ()
  return
}
