// Masks: tk.iota converts the lane's part of each coordinate to f32 once and
// adds a constant per element; tk.where is a compare and a select per element.
// Two iotas compared (a causal mask) compare the lanes' difference, one value
// through a volatile asm (never hoisted out of a loop), with a constant per
// element: 6 distinct constants in this 16x16 tile, so 6 setp.
// RUN: tkc %s --pass-pipeline=tk-verify --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --pass-pipeline=tk-verify --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// NVVM-LABEL: llvm.func @causal
// NVVM-COUNT-2: arith.uitofp
// NVVM-NOT: arith.uitofp
// NVVM: %[[D:.*]] = arith.subf
// NVVM: %[[O:.*]] = llvm.inline_asm has_side_effects "mov.b32 $0, $1;", "=f,f" %[[D]]
// NVVM-COUNT-8: arith.cmpf oge, %[[O]], %cst
// NVVM-NOT: arith.cmpf
// NVVM-COUNT-8: arith.select
// PTX-LABEL: .entry causal(
// PTX: mov.b32 [[O:%r[0-9]+]], %r
// PTX-COUNT-6: setp.ge.f32 {{.*}}[[O]], 0f
// PTX-NOT: setp
func.func @causal(%x: !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %t = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, index, index, index, index) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  %r = "tk.iota"() {axis = 0 : i64} : () -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  %c = "tk.iota"() {axis = 1 : i64} : () -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  %m = arith.constant -1.0 : f32
  %o = "tk.where"(%r, %c, %t, %m) {cmp = "ge"} : (!tk.rt<f32, 16 : i64, 16 : i64, "row">, !tk.rt<f32, 16 : i64, 16 : i64, "row">, !tk.rt<f32, 16 : i64, 16 : i64, "row">, f32) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  "tk.store"(%x, %o, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, !tk.rt<f32, 16 : i64, 16 : i64, "row">, index, index, index, index) -> ()
  return
}

// A flat vector's positions: lane * chunk, converted once (LLVM may turn
// uitofp(lane) + c back into uitofp(lane + c), exact for these integers).
// NVVM-LABEL: llvm.func @positions
// NVVM-COUNT-1: arith.uitofp
// NVVM-NOT: arith.uitofp
// PTX-LABEL: .entry positions(
// PTX-COUNT-4: st.global.v4.b32
func.func @positions(%x: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 512 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %i = "tk.iota"() {axis = 0 : i64} : () -> !tk.rv<f32, 512 : i64, "flat">
  "tk.store"(%x, %i, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 512 : i64>, !tk.rv<f32, 512 : i64, "flat">, index, index, index, index) -> ()
  return
}
