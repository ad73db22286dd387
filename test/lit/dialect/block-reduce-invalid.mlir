// tk-verify's rules of the block reductions: an f32 x (rt, rv or scalar),
// a result of x's type, tk.sync's group attributes, and a scratch with a
// word for every lane, warp of the group and scalar of x.
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | FileCheck %s
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | count 5

func.func @bad(%x: !tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 64 : i64>) attributes {tk.kernel, tk.warps = 4 : i64} {
  %s = "tk.alloc"() : () -> !tk.sv<f32, 256 : i64>
  %small = "tk.alloc"() : () -> !tk.sv<f32, 128 : i64>
  %c0 = arith.constant 0 : index
  %t = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 64 : i64>, index, index, index, index) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  %h = "tk.copy"(%t) : (!tk.rt<f32, 16 : i64, 16 : i64, "row">) -> !tk.rt<bf16, 16 : i64, 16 : i64, "row">
  %v = "tk.row_sum"(%t) : (!tk.rt<f32, 16 : i64, 16 : i64, "row">) -> !tk.rv<f32, 16 : i64, "col">
  // CHECK: {{.*}}block-reduce-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: block_sum: x must be an f32 rt, rv or scalar, got rt<bf16, 16, 16, row>
  %a = "tk.block_sum"(%h, %s) : (!tk.rt<bf16, 16 : i64, 16 : i64, "row">, !tk.sv<f32, 256 : i64>) -> !tk.rt<bf16, 16 : i64, 16 : i64, "row">
  // CHECK: {{.*}}block-reduce-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: block_max: scratch must be an sv<f32> of at least 256 elements (32 lanes x 4 warps x 2 values a lane), got sv<f32, 128>
  %b = "tk.block_max"(%v, %small) : (!tk.rv<f32, 16 : i64, "col">, !tk.sv<f32, 128 : i64>) -> !tk.rv<f32, 16 : i64, "col">
  // CHECK: {{.*}}block-reduce-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: block_min: the result must have x's type rv<f32, 16, col>, got rv<f32, 32, col>
  %c = "tk.block_min"(%v, %s) : (!tk.rv<f32, 16 : i64, "col">, !tk.sv<f32, 256 : i64>) -> !tk.rv<f32, 32 : i64, "col">
  // CHECK: {{.*}}block-reduce-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: block_sum: warps must be an integer in 1..4 (the kernel's warps), got 8 : i64
  %d = "tk.block_sum"(%v, %s) {id = 1 : i64, warps = 8 : i64} : (!tk.rv<f32, 16 : i64, "col">, !tk.sv<f32, 256 : i64>) -> !tk.rv<f32, 16 : i64, "col">
  %f = "tk.vec_sum"(%v) : (!tk.rv<f32, 16 : i64, "col">) -> f32
  // CHECK: {{.*}}block-reduce-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: block_sum: a block reduction waits for its group's values: it takes no arrive attribute
  %e = "tk.block_sum"(%f, %s) {arrive, id = 1 : i64, warps = 4 : i64} : (f32, !tk.sv<f32, 256 : i64>) -> f32
  return
}
