// group_load / group_store: 16-byte chunks, ld.global.v4 + st.shared.v4 and
// back; 4 warps copy a 64x64 bf16 tile (8 KiB) in 4 rounds of 128 threads.
// A gl is a pointer and one i32 per runtime dim.
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=LOAD < %t.ptx
// RUN: FileCheck %s --check-prefix=STORE < %t.ptx

// NVVM-LABEL: llvm.func @copy(%arg0: !llvm.ptr<1>, %arg1: i32, %arg2: i32, %arg3: !llvm.ptr<1>, %arg4: f32)
// NVVM-COUNT-4: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// NVVM: nvvm.barrier0
// NVVM-COUNT-4: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>

// PTX: .entry copy(
// PTX-NEXT: .param .u64 .ptr .global .align 1 copy_param_0,
// PTX-NEXT: .param .u32 copy_param_1,
// PTX-NEXT: .param .u32 copy_param_2,
// PTX-NEXT: .param .u64 .ptr .global .align 1 copy_param_3,
// PTX-NEXT: .param .f32 copy_param_4
// PTX: bar.sync 0;
// LOAD-COUNT-4: ld.global.v4.b32
// LOAD-NOT: ld.global
// STORE-COUNT-4: st.shared.v4.b32
// STORE-NOT: st.shared
// LOAD: ld.shared.v4.b32
// STORE: st.global.v4.b32
func.func @copy(%a: !tk.gl<bf16, 1 : i64, -1 : i64, -1 : i64, 64 : i64>, %o: !tk.gl<bf16, 1 : i64, 1 : i64, 64 : i64, 64 : i64>, %x: f32)
    attributes {tk.kernel, tk.warps = 4 : i64} {
  %s = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "128b">
  %c0 = arith.constant 0 : index
  %bx = "tk.block_idx"() {dim = "x"} : () -> index
  "tk.group_load"(%s, %a, %c0, %c0, %bx, %c0) {warps = 4 : i64} : (!tk.st<bf16, 64 : i64, 64 : i64, "128b">, !tk.gl<bf16, 1 : i64, -1 : i64, -1 : i64, 64 : i64>, index, index, index, index) -> ()
  "tk.sync"() : () -> ()
  "tk.group_store"(%o, %s, %c0, %c0, %c0, %c0) {warps = 4 : i64} : (!tk.gl<bf16, 1 : i64, 1 : i64, 64 : i64, 64 : i64>, !tk.st<bf16, 64 : i64, 64 : i64, "128b">, index, index, index, index) -> ()
  return
}
