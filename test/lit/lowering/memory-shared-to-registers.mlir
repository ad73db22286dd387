// st <-> rt for 16-bit tiles: one ldmatrix/stmatrix .x4 per 16x16 base tile,
// .trans for the col layout; addresses swizzled (the XOR of the 128b mode).
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX

// NVVM: llvm.mlir.global external @__tkc_shared() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// NVVM-LABEL: llvm.func @st_rt
// NVVM: arith.xori
// NVVM: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4 : i32
// NVVM: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>, num = 4 : i32
// NVVM: nvvm.stmatrix {{.*}}layout = #nvvm.mma_layout<row>
// NVVM: nvvm.stmatrix {{.*}}layout = #nvvm.mma_layout<col>

// PTX: .target sm_90a
// PTX: .extern .shared .align 1024 .b8 __tkc_shared[];
// PTX: xor.b
// PTX-COUNT-2: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX-COUNT-2: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX-COUNT-2: stmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX-COUNT-2: stmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX-NOT: ldmatrix
func.func @st_rt() attributes {tk.kernel, tk.warps = 2 : i64} {
  %s = "tk.alloc"() : () -> !tk.st<bf16, 32 : i64, 64 : i64, "128b">
  %c0 = arith.constant 0 : index
  %w = "tk.warpid"() : () -> index
  %r = "tk.load"(%s, %w, %c0) : (!tk.st<bf16, 32 : i64, 64 : i64, "128b">, index, index) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  %t = "tk.load"(%s, %w, %c0) : (!tk.st<bf16, 32 : i64, 64 : i64, "128b">, index, index) -> !tk.rt<bf16, 16 : i64, 32 : i64, "col">
  "tk.store"(%s, %r, %w, %c0) : (!tk.st<bf16, 32 : i64, 64 : i64, "128b">, !tk.rt<bf16, 16 : i64, 32 : i64, "row">, index, index) -> ()
  "tk.store"(%s, %t, %w, %c0) : (!tk.st<bf16, 32 : i64, 64 : i64, "128b">, !tk.rt<bf16, 16 : i64, 32 : i64, "col">, index, index) -> ()
  return
}
