// tk-verify's static race check: a warning (not an error: the IR passes
// through) at the second access, naming both lines and the warps, for warp 0's
// write of an sv that the other warps read with no barrier between; none
// where a tk.sync orders them, or where each warp reads its own part.
// RUN: tkc %s --pass-pipeline=tk-verify 2>&1 >/dev/null | FileCheck %s
// RUN: tkc %s --pass-pipeline=tk-verify 2>&1 >/dev/null | count 1

// CHECK: static-races.mlir:[[# @LINE + 14]]:{{[0-9]+}}: warning: shared-memory race: sv<f32, 64> (allocated at {{.*}}static-races.mlir:[[# @LINE + 4]]) written at {{.*}}static-races.mlir:[[# @LINE + 10]] by warp 0, read at {{.*}}static-races.mlir:[[# @LINE + 14]] by warps 1-3 with no tkc.sync() between
func.func @racy(%x: !tk.gl<f32, 1 : i64, 1 : i64, 4 : i64, 64 : i64>) attributes {tk.kernel, tk.warps = 4 : i64} {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %s = "tk.alloc"() : () -> !tk.sv<f32, 64 : i64>
  %own = "tk.alloc"() : () -> !tk.sv<f32, 64 : i64>
  %w = "tk.warpid"() : () -> index
  %first = arith.cmpi eq, %w, %c0 : index
  %v = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 4 : i64, 64 : i64>, index, index, index, index) -> !tk.rv<f32, 64 : i64, "flat">
  scf.if %first {
    "tk.store"(%s, %v) : (!tk.sv<f32, 64 : i64>, !tk.rv<f32, 64 : i64, "flat">) -> ()
  }
  %q = "tk.load"(%x, %c0, %c0, %w, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 4 : i64, 64 : i64>, index, index, index, index) -> !tk.rv<f32, 16 : i64, "col">
  "tk.store"(%own, %q, %w) : (!tk.sv<f32, 64 : i64>, !tk.rv<f32, 16 : i64, "col">, index) -> ()
  %r = "tk.load"(%s) : (!tk.sv<f32, 64 : i64>) -> !tk.rv<f32, 64 : i64, "flat">
  %mine = "tk.load"(%own, %w) : (!tk.sv<f32, 64 : i64>, index) -> !tk.rv<f32, 16 : i64, "col">
  "tk.sync"() : () -> ()
  %after = "tk.load"(%s) : (!tk.sv<f32, 64 : i64>) -> !tk.rv<f32, 64 : i64, "flat">
  "tk.store"(%x, %after, %c0, %c0, %w, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 4 : i64, 64 : i64>, !tk.rv<f32, 64 : i64, "flat">, index, index, index, index) -> ()
  return
}
