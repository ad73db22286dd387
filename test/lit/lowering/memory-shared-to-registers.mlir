// st <-> rt for 16-bit tiles: one ldmatrix/stmatrix .x4 per 16x16 base tile,
// .trans for the col layout; addresses swizzled (the XOR of the 128b mode).
// The instructions are inline PTX taking a 32-bit shared address and a
// constant offset ([addr+imm]), so accesses at the same lane offset share
// the register: the store of a tile reuses its load's.
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX

// NVVM: llvm.mlir.global external @__tkc_shared() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// NVVM-LABEL: llvm.func @st_rt
// NVVM: arith.xori
// NVVM: %[[P:.*]] = llvm.getelementptr %{{.*}} : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// NVVM-NEXT: %[[A:.*]] = llvm.ptrtoint %[[P]] : !llvm.ptr<3> to i32
// NVVM-NEXT: llvm.inline_asm has_side_effects "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4+0];", "=r,=r,=r,=r,r" %[[A]] : (i32) -> !llvm.struct<(i32, i32, i32, i32)>
// NVVM: "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// NVVM: "stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0+0], {$1, $2, $3, $4};", "r,r,r,r,r"
// NVVM: "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16

// PTX: .target sm_90a
// PTX: .extern .shared .align 1024 .b8 __tkc_shared[];
// PTX: xor.b
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{.*}}, [%[[R0:r[0-9]+]]+0];
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{.*}}, [%[[R1:r[0-9]+]]+0];
// PTX-COUNT-2: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX: stmatrix.sync.aligned.m8n8.x4.shared.b16 [%[[R0]]+0]
// PTX: stmatrix.sync.aligned.m8n8.x4.shared.b16 [%[[R1]]+0]
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
