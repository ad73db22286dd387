// Elementwise rules: exp through ex2.approx of x * log2(e), f32 -> bf16
// copies round pairs to nearest even (cvt.rn.bf16x2), tile-scalar ops, a tile
// carried through scf.for as 8 scalars, and swap_layout by movmatrix.
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX

// NVVM-LABEL: llvm.func @softmax_step
// NVVM: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// NVVM: arith.constant 1.44269{{[0-9]*}} : f32
// NVVM: llvm.inline_asm "ex2.approx.ftz.f32 $0, $1;", "=f,f"
// NVVM: arith.truncf {{.*}} : vector<2xf32> to vector<2xbf16>
// NVVM-LABEL: llvm.func @swap
// NVVM-COUNT-4: llvm.inline_asm has_side_effects "movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;"

// PTX-LABEL: .entry softmax_step(
// PTX: ex2.approx.ftz.f32
// PTX: cvt.rn.bf16x2.f32
// PTX-LABEL: .entry swap(
// PTX-COUNT-4: movmatrix.sync.aligned.m8n8.trans.b16
func.func @softmax_step(%a: !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>,
                        %o: !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, %s: f32) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, index, index, index, index) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %x) -> (!tk.rt<f32, 16 : i64, 16 : i64, "row">) {
    %m = "tk.mul"(%acc, %s) : (!tk.rt<f32, 16 : i64, 16 : i64, "row">, f32) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
    scf.yield %m : !tk.rt<f32, 16 : i64, 16 : i64, "row">
  }
  %e = "tk.exp"(%r) : (!tk.rt<f32, 16 : i64, 16 : i64, "row">) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  %b = "tk.copy"(%e) : (!tk.rt<f32, 16 : i64, 16 : i64, "row">) -> !tk.rt<bf16, 16 : i64, 16 : i64, "row">
  "tk.store"(%o, %b, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, !tk.rt<bf16, 16 : i64, 16 : i64, "row">, index, index, index, index) -> ()
  return
}

func.func @swap(%a: !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 16 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 16 : i64, "row">
  %y = "tk.swap_layout"(%x) : (!tk.rt<bf16, 16 : i64, 16 : i64, "row">) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
  "tk.store"(%a, %y, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, !tk.rt<bf16, 16 : i64, 16 : i64, "col">, index, index, index, index) -> ()
  return
}
