// tk.store {add, packed}: a lane's four values of each 16-column block and row
// (columns 2t, 2t + 1, 2t + 8, 2t + 9 of the row fragment) added at columns
// 4t .. 4t + 3, one red.global.add.v4.f32 where the pairs take two
// (reduce-add.mlir): two a 16x16 base tile, each behind the ragged bounds
// check of its row and first column; the lane's column offset is 4t (t2 * 2).
// The ragged store moves 16 aligned bytes a lane: the runtime checks the gl's
// columns are a multiple of 4 (the pairs need 2).
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// NVVM: \22name\22: \22acc\22, {{.*}} \22divisible\22: [1, 1, 1, 4]
// CHECK-LABEL: .entry accumulate(
// CHECK-COUNT-4: red.global.add.v4.f32 [%rd{{[0-9]+}}], {%{{.*}}};
// CHECK-NOT: red.global
// CHECK: ret;
!g = !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 32 : i64>
!r = !tk.rt<f32, 16 : i64, 32 : i64, "row">
func.func @accumulate(%acc: !g, %start: f32) attributes {tk.kernel, tk.arg_names = ["acc", "start"]} {
  %c0 = arith.constant 0 : index
  %i = "tk.iota"(%start) {axis = 1 : i64} : (f32) -> !r
  "tk.store"(%acc, %i, %c0, %c0, %c0, %c0) {add, clip, packed} : (!g, !r, index, index, index, index) -> ()
  return
}
