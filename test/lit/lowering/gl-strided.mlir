// A strided gl (tk.strided): after its pointer and runtime dims come three
// u64 parameters, its b, d, r strides in elements, and its addresses use
// them: the tile's origin is b * sb + d * sd + row * sr + col and each row
// of a lane sr elements further (no product of the dims). The manifest marks
// it, so the runtime passes the strides of whatever view it is given.
// RUN: tkc %s --pass-pipeline=tk-verify,tk-layout-selection --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
// RUN: tkc %s --pass-pipeline=tk-verify,tk-layout-selection --emit=nvvm | FileCheck %s --check-prefix=MANIFEST

// MANIFEST: \22name\22: \22x\22
// MANIFEST-SAME: \22strided\22: true
// MANIFEST-NOT: \22name\22: \22y\22{{.*}}\22strided\22
// CHECK-LABEL: .entry copy(
// CHECK-NEXT: .param .u64 .ptr .global .align 1 copy_param_0,
// CHECK-NEXT: .param .u32 copy_param_1,
// CHECK-NEXT: .param .u32 copy_param_2,
// CHECK-NEXT: .param .u32 copy_param_3,
// CHECK-NEXT: .param .u64 copy_param_4,
// CHECK-NEXT: .param .u64 copy_param_5,
// CHECK-NEXT: .param .u64 copy_param_6,
// CHECK-NEXT: .param .u64 .ptr .global .align 1 copy_param_7,
// CHECK-NEXT: .param .u32 copy_param_8
// CHECK: ld.param.b64 {{.*}}[copy_param_4]
// CHECK: ld.param.b64 {{.*}}[copy_param_5]
// CHECK: ld.param.b64 {{.*}}[copy_param_6]
// CHECK: ld.global.v4.b32
// CHECK: st.global.v4.b32
func.func @copy(%x: !tk.gl<bf16, -1 : i64, -1 : i64, -1 : i64, 64 : i64>,
                %y: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>)
    attributes {tk.kernel, tk.arg_names = ["x", "y"], tk.strided = array<i64: 0>} {
  %c0 = arith.constant 0 : index
  %b = "tk.block_idx"() {dim = "x"} : () -> index
  %h = "tk.block_idx"() {dim = "y"} : () -> index
  %t = "tk.load"(%x, %b, %h, %c0, %c0) : (!tk.gl<bf16, -1 : i64, -1 : i64, -1 : i64, 64 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  "tk.store"(%y, %t, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, !tk.rt<bf16, 16 : i64, 64 : i64, "row">, index, index, index, index) -> ()
  return
}
