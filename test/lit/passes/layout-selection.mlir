// tk-layout-selection, swizzles: an "auto" st gets the widest of 128b/64b/32b that
// divides its row width in bytes (cols * element bytes), else "none"; a fixed
// swizzle is kept. Every user of the tile sees the new type. (Register
// layouts: layout-registers.mlir; bank conflicts: layout-banks.mlir.)
// RUN: tkc %s --pass-pipeline=tk-verify,tk-layout-selection | FileCheck %s
// It is idempotent, and the default tile pipeline runs it.
// RUN: tkc %s --pass-pipeline=tk-layout-selection,tk-layout-selection | FileCheck %s
// RUN: tkc %s | FileCheck %s

// CHECK-LABEL: func.func @swizzles
func.func @swizzles(%g: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>) attributes {tk.kernel, tk.warps = 1 : i64} {
  %c0 = arith.constant 0 : index
  // bf16 x 64 cols = 128 bytes
  // CHECK: %[[A:.*]] = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "128b">
  %a = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "auto">
  // bf16 x 32 cols = 64 bytes
  // CHECK: "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 32 : i64, "64b">
  %b = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 32 : i64, "auto">
  // bf16 x 16 cols = 32 bytes
  // CHECK: "tk.alloc"() : () -> !tk.st<bf16, 32 : i64, 16 : i64, "32b">
  %c = "tk.alloc"() : () -> !tk.st<bf16, 32 : i64, 16 : i64, "auto">
  // f16 x 48 cols = 96 bytes: 32 divides it, 64 does not
  // CHECK: "tk.alloc"() : () -> !tk.st<f16, 16 : i64, 48 : i64, "32b">
  %d = "tk.alloc"() : () -> !tk.st<f16, 16 : i64, 48 : i64, "auto">
  // f16 x 96 cols = 192 bytes: 64 divides it, 128 does not
  // CHECK: "tk.alloc"() : () -> !tk.st<f16, 16 : i64, 96 : i64, "64b">
  %e = "tk.alloc"() : () -> !tk.st<f16, 16 : i64, 96 : i64, "auto">
  // f32 x 16 cols = 64 bytes
  // CHECK: "tk.alloc"() : () -> !tk.st<f32, 16 : i64, 16 : i64, "64b">
  %f = "tk.alloc"() : () -> !tk.st<f32, 16 : i64, 16 : i64, "auto">
  // f32 x 32 cols = 128 bytes; f32 x 80 cols = 320 bytes (64 divides, 128 does not)
  // CHECK: "tk.alloc"() : () -> !tk.st<f32, 16 : i64, 32 : i64, "128b">
  %h = "tk.alloc"() : () -> !tk.st<f32, 16 : i64, 32 : i64, "auto">
  // CHECK: "tk.alloc"() : () -> !tk.st<f32, 16 : i64, 80 : i64, "64b">
  %i = "tk.alloc"() : () -> !tk.st<f32, 16 : i64, 80 : i64, "auto">
  // bf16 x 80 cols = 160 bytes: only 32 divides it; f32 x 48 cols = 192 bytes: 64
  // CHECK: "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 80 : i64, "32b">
  %n = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 80 : i64, "auto">
  // CHECK: "tk.alloc"() : () -> !tk.st<f32, 32 : i64, 48 : i64, "64b">
  %o = "tk.alloc"() : () -> !tk.st<f32, 32 : i64, 48 : i64, "auto">
  // bf16 x 256 cols = 512 bytes
  // CHECK: "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 256 : i64, "128b">
  %j = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 256 : i64, "auto">
  // fixed swizzles are the author's: kept
  // CHECK: "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "none">
  %k = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "none">
  // CHECK: "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "32b">
  %l = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "32b">
  // shared vectors have no swizzle
  // CHECK: "tk.alloc"() : () -> !tk.sv<f32, 64 : i64>
  %m = "tk.alloc"() : () -> !tk.sv<f32, 64 : i64>
  // users see the chosen layout
  // CHECK: "tk.group_load"(%[[A]], {{.*}}) {warps = 1 : i64} : (!tk.st<bf16, 64 : i64, 64 : i64, "128b">
  "tk.group_load"(%a, %g, %c0, %c0, %c0, %c0) {warps = 1 : i64} : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, index, index, index, index) -> ()
  // CHECK: "tk.load"(%[[A]], {{.*}}) : (!tk.st<bf16, 64 : i64, 64 : i64, "128b">, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  %x = "tk.load"(%a, %c0, %c0) : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  return
}
