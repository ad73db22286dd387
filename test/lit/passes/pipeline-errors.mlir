// Pipelines mix tk and upstream passes; a failing entry stops the pipeline
// with a located error (exit 1) and prints no IR.
// RUN: tkc %s --pass-pipeline='canonicalize,tk-verify,cse' | FileCheck %s
// RUN: not tkc %s --pass-pipeline='tk-verify,nope' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not tkc %s --pass-pipeline='canonicalize{bogus=1}' 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not tkc %s --pass-pipeline='func.func(canonicalize' 2>&1 | FileCheck %s --check-prefix=UNBALANCED
// RUN: not tkc %s --pass-pipeline=tk-verify,tk-layout-selection,canonicalize --emit=bogus 2>&1 | FileCheck %s --check-prefix=EMIT

// CHECK-LABEL: func.func @k
// CHECK-NOT: arith.addi
// CHECK: "tk.zero"
// UNKNOWN: error: unknown pass or bad pipeline entry 'nope'
// OPTION: error: unknown pass or bad pipeline entry 'canonicalize{bogus=1}'
// UNBALANCED: error: unbalanced brackets in pass pipeline 'func.func(canonicalize'
// EMIT: invalid choice: 'bogus'
func.func @k() attributes {tk.kernel} {
  %c1 = arith.constant 1 : index
  %c2 = arith.addi %c1, %c1 : index
  %z = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  return
}
