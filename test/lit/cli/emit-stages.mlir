// --emit walks the stages from tile IR; printed IR of any stage is accepted
// back as input, and --pass-pipeline replaces the tile pipeline.
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=llvm | FileCheck %s --check-prefix=LLVM
// RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tkc %s --emit=nvvm -o %t.nvvm.mlir && tkc %t.nvvm.mlir --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tkc %s --emit=nvvm --pass-pipeline=tk-verify,tk-layout-selection,canonicalize | FileCheck %s --check-prefix=NVVM
// Exactly the given pipeline runs: tk-verify alone leaves the swizzle "auto".
// RUN: tkc %s --pass-pipeline=tk-verify --emit=tile | FileCheck %s --check-prefix=AUTO

// NVVM: module attributes {gpu.container_module}
// NVVM: gpu.module @tkc
// NVVM: llvm.func @copy_tile
// LLVM: gpu.module @tkc
// LLVM-NOT: arith.
// LLVM-NOT: scf.
// PTX: .target sm_90a
// PTX: .visible .entry copy_tile(
// AUTO: !tk.st<bf16, 16 : i64, 64 : i64, "auto">
func.func @copy_tile(%g: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>)
    attributes {tk.kernel, tk.warps = 1 : i64, tk.arg_names = ["g"], tk.grid = ["g.r // 16", "1", "1"]} {
  %c0 = arith.constant 0 : index
  %s = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 64 : i64, "auto">
  %bx = "tk.block_idx"() {dim = "x"} : () -> index
  "tk.group_load"(%s, %g, %c0, %c0, %bx, %c0) {warps = 1 : i64} : (!tk.st<bf16, 16 : i64, 64 : i64, "auto">, !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, index, index, index, index) -> ()
  "tk.sync"() : () -> ()
  %x = "tk.load"(%s, %c0, %c0) : (!tk.st<bf16, 16 : i64, 64 : i64, "auto">, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  "tk.store"(%g, %x, %c0, %c0, %bx, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, !tk.rt<bf16, 16 : i64, 64 : i64, "row">, index, index, index, index) -> ()
  return
}
