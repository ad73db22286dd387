// Upstream passes run by name in a tkc pipeline, and --print-ir-after-all
// prints the IR after each entry like mlir-opt.
// RUN: tkc %s --pass-pipeline=canonicalize | FileCheck %s
// RUN: tkc %s --pass-pipeline='builtin.module(canonicalize)' | FileCheck %s
// RUN: tkc %s --pass-pipeline='canonicalize,cse' --print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=DUMP
// RUN: not tkc %s --pass-pipeline=no-such-pass 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// CHECK-LABEL: func.func @fold
// CHECK-NEXT: %[[C:.*]] = arith.constant 2 : i32
// CHECK-NEXT: return %[[C]]
func.func @fold() -> i32 {
  %0 = arith.constant 1 : i32
  %1 = arith.addi %0, %0 : i32
  return %1 : i32
}

// DUMP: // -----// IR Dump After canonicalize //----- //
// DUMP: arith.constant 2 : i32
// DUMP: // -----// IR Dump After cse //----- //
// DUMP: func.func @fold

// UNKNOWN: error: unknown pass or bad pipeline entry 'no-such-pass'
// UNKNOWN-NOT: Traceback
