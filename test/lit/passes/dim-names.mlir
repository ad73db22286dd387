// Named runtime dims (tk.dim_names): every dim with one name has one size at
// launch, so the manifest names them and unifies `divisible` per name (the
// LCM over all dims sharing it). Here c is stored with 16-row tiles only,
// but its rows are "M", which a is loaded with 64-row tiles on: c.r needs 64.
// RUN: tkc %s --emit=nvvm | FileCheck %s
// The tile IR round-trips with the attribute intact.
// RUN: tkc %s | FileCheck %s --check-prefix=TILE

// TILE: tk.dim_names = {{\[}}["", "", "M", "K"], ["", "", "K", "N"], ["", "", "M", "N"], []]
// CHECK: \22name\22: \22a\22, {{.*}} \22names\22: [null, null, \22M\22, \22K\22], \22divisible\22: [1, 1, 64, 32]
// CHECK-SAME: \22name\22: \22b\22, {{.*}} \22names\22: [null, null, \22K\22, \22N\22], \22divisible\22: [1, 1, 32, 64]
// CHECK-SAME: \22name\22: \22c\22, {{.*}} \22names\22: [null, null, \22M\22, \22N\22], \22divisible\22: [1, 1, 64, 64]
// CHECK-SAME: \22name\22: \22s\22, \22kind\22: \22scalar\22
func.func @gemm(%a: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>,
                %b: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>,
                %c: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, %s: f32)
    attributes {tk.kernel, tk.arg_names = ["a", "b", "c", "s"],
                tk.dim_names = [["", "", "M", "K"], ["", "", "K", "N"], ["", "", "M", "N"], []]} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  %x64 = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, index, index, index, index) -> !tk.rt<bf16, 64 : i64, 32 : i64, "row">
  %y = "tk.load"(%b, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, index, index, index, index) -> !tk.rt<bf16, 32 : i64, 64 : i64, "col">
  %z = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 64 : i64, "row">
  %d = "tk.mma_ab"(%x, %y, %z) : (!tk.rt<bf16, 16 : i64, 32 : i64, "row">, !tk.rt<bf16, 32 : i64, 64 : i64, "col">, !tk.rt<f32, 16 : i64, 64 : i64, "row">) -> !tk.rt<f32, 16 : i64, 64 : i64, "row">
  "tk.store"(%c, %d, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, !tk.rt<f32, 16 : i64, 64 : i64, "row">, index, index, index, index) -> ()
  return
}
