// --print-ir-after-all prints each pass's IR to stderr (tk and upstream
// passes alike), and the final IR alone goes to stdout.
// RUN: tkc %s --pass-pipeline=tk-verify,tk-layout-selection,canonicalize --print-ir-after-all 2>%t.err | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=ERR < %t.err

// ERR: // -----// IR Dump After tk-verify //----- //
// ERR: "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 64 : i64, "auto">
// ERR: // -----// IR Dump After tk-layout-selection //----- //
// ERR: arith.addi
// ERR: "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 64 : i64, "128b">
// ERR: // -----// IR Dump After canonicalize //----- //
// ERR-NOT: arith.addi
// ERR: "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 64 : i64, "128b">

// OUT-NOT: IR Dump
// OUT: "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 64 : i64, "128b">
// OUT: "tk.load"(%{{.*}}, %[[C2:.*]], %[[C2]])
func.func @k() attributes {tk.kernel} {
  %c1 = arith.constant 1 : index
  %c2 = arith.addi %c1, %c1 : index
  %s = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 64 : i64, "auto">
  %x = "tk.load"(%s, %c2, %c2) : (!tk.st<bf16, 16 : i64, 64 : i64, "auto">, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  return
}
