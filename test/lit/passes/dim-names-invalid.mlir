// tk-verify checks tk.dim_names: one entry per argument (4 strings for a gl,
// none for a scalar), and a name only on a runtime dim (names are checked at
// launch; a static dim is fixed by its type).
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | FileCheck %s
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | count 4

// CHECK: {{.*}}dim-names-invalid.mlir:[[# @LINE + 1]]:1: error: kernel @count: tk.dim_names must be an array of 2 arrays (one per argument), got {{\[}}["", "", "M", ""]]
func.func @count(%a: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, %s: f32)
    attributes {tk.kernel, tk.dim_names = [["", "", "M", ""]]} {
  return
}
// CHECK: {{.*}}dim-names-invalid.mlir:[[# @LINE + 2]]:1: error: kernel @entries: tk.dim_names entry 0 must be an array of 4 strings (one per gl dim), got ["M", "K"]
// CHECK: {{.*}}dim-names-invalid.mlir:[[# @LINE + 1]]:1: error: kernel @entries: tk.dim_names entry 1 must be an array of 0 strings (a scalar has no dims), got ["n"]
func.func @entries(%a: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, %n: i32)
    attributes {tk.kernel, tk.dim_names = [["M", "K"], ["n"]]} {
  return
}
// CHECK: {{.*}}dim-names-invalid.mlir:[[# @LINE + 1]]:1: error: kernel @static: argument 0 dim c is static (64) but named 'K': names are for runtime dims
func.func @static(%a: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 64 : i64>)
    attributes {tk.kernel, tk.dim_names = [["", "", "M", "K"]]} {
  return
}
