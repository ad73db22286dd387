// IRDL constraint failures: the parser rejects each file at the offending
// op or type parameter, located, with the op's name; exit 1, no traceback.
// RUN: rm -rf %t && split-file %s %t
// RUN: not tkc %t/dtype.mlir 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not tkc %t/layout.mlir 2>&1 | FileCheck %s --check-prefix=LAYOUT
// RUN: not tkc %t/swizzle.mlir 2>&1 | FileCheck %s --check-prefix=SWIZZLE
// RUN: not tkc %t/operands.mlir 2>&1 | FileCheck %s --check-prefix=OPERANDS
// RUN: not tkc %t/fill.mlir 2>&1 | FileCheck %s --check-prefix=FILL
// RUN: not tkc %t/dim.mlir 2>&1 | FileCheck %s --check-prefix=DIM
// RUN: not tkc %t/mma.mlir 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: not tkc %t/group.mlir 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not tkc %t/warps.mlir 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: not tkc %t/index.mlir 2>&1 | FileCheck %s --check-prefix=INDEX
// RUN: not tkc %t/unknown.mlir 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not tkc %t/badtype.mlir 2>&1 | FileCheck %s --check-prefix=BADTYPE

// DTYPE: {{.*}}dtype.mlir:2:32: error: 'i64' does not satisfy the constraint
// DTYPE-NOT: Traceback
// LAYOUT: {{.*}}layout.mlir:2:32: error: '"diag"' does not satisfy the constraint
// LAYOUT-NOT: Traceback
// SWIZZLE: {{.*}}swizzle.mlir:2:33: error: '"16b"' does not satisfy the constraint
// SWIZZLE-NOT: Traceback
// OPERANDS: {{.*}}operands.mlir:2:8: error: exp: expects exactly 1 operands, but got 0
// OPERANDS-NOT: Traceback
// FILL: {{.*}}fill.mlir:2:8: error: fill: 'i64' does not satisfy the constraint
// FILL-NOT: Traceback
// DIM: {{.*}}dim.mlir:2:8: error: block_idx: '"w"' does not satisfy the constraint
// DIM-NOT: Traceback
// MMA: {{.*}}mma.mlir:2:8: error: mma_ab: expected base type 'tk.rt' but got 'tk.rv'
// MMA-NOT: Traceback
// GROUP: {{.*}}group.mlir:2:3: error: group_load: expected base type 'tk.gl' but got 'tk.st'
// GROUP-NOT: Traceback
// WARPS: {{.*}}warps.mlir:2:3: error: 'tk.group_load' op attribute "warps" is expected but not provided
// WARPS-NOT: Traceback
// INDEX: {{.*}}index.mlir:2:8: error: load: expected 'index' but got 'i32'
// INDEX-NOT: Traceback
// UNKNOWN: {{.*}}unknown.mlir:2:3: error: unregistered operation 'tk.frobnicate'
// UNKNOWN-NOT: Traceback
// BADTYPE: {{.*}}badtype.mlir:1:22: error: expected dynamic type
// BADTYPE-NOT: Traceback

//--- dtype.mlir
func.func @f() {
  %0 = "tk.zero"() : () -> !tk.rt<i64, 16 : i64, 16 : i64, "row">
  return
}
//--- layout.mlir
func.func @f() {
  %0 = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 16 : i64, "diag">
  return
}
//--- swizzle.mlir
func.func @f() {
  %0 = "tk.alloc"() : () -> !tk.st<f32, 16 : i64, 16 : i64, "16b">
  return
}
//--- operands.mlir
func.func @f() {
  %0 = "tk.exp"() : () -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  return
}
//--- fill.mlir
func.func @f(%n: i64) {
  %0 = "tk.fill"(%n) : (i64) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  return
}
//--- dim.mlir
func.func @f() {
  %0 = "tk.block_idx"() {dim = "w"} : () -> index
  return
}
//--- mma.mlir
func.func @f(%v: !tk.rv<f32, 16 : i64, "col">, %t: !tk.rt<f32, 16 : i64, 16 : i64, "row">) {
  %0 = "tk.mma_ab"(%v, %t, %t) : (!tk.rv<f32, 16 : i64, "col">, !tk.rt<f32, 16 : i64, 16 : i64, "row">, !tk.rt<f32, 16 : i64, 16 : i64, "row">) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  return
}
//--- group.mlir
func.func @f(%s: !tk.st<f32, 16 : i64, 16 : i64, "none">, %i: index) {
  "tk.group_load"(%s, %s, %i, %i, %i, %i) {warps = 1 : i64} : (!tk.st<f32, 16 : i64, 16 : i64, "none">, !tk.st<f32, 16 : i64, 16 : i64, "none">, index, index, index, index) -> ()
  return
}
//--- warps.mlir
func.func @f(%s: !tk.st<f32, 16 : i64, 16 : i64, "none">, %g: !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, %i: index) {
  "tk.group_load"(%s, %g, %i, %i, %i, %i) : (!tk.st<f32, 16 : i64, 16 : i64, "none">, !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, index, index, index, index) -> ()
  return
}
//--- index.mlir
func.func @f(%g: !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, %i: i32) {
  %0 = "tk.load"(%g, %i, %i, %i, %i) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, i32, i32, i32, i32) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  return
}
//--- unknown.mlir
func.func @f() {
  "tk.frobnicate"() : () -> ()
  return
}
//--- badtype.mlir
func.func @f(%x: !tk.tile<f32>) {
  return
}
