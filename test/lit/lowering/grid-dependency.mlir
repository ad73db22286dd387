// Every kernel starts by waiting for the grid before it in the stream
// (griddepcontrol.wait: its writes visible) and then letting the next grid
// launch (launch_dependents), before any other instruction than reading its
// parameters: the runtime launches with programmatic stream serialization
// allowed, and nothing may read global memory the previous kernel writes
// before the wait. A TMA kernel's tensor-map prefetch and barrier
// initialisation come after it too.
// RUN: tkc %s --pass-pipeline=tk-verify,tk-layout-selection --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
// CHECK-LABEL: .entry copy(
// CHECK-NOT: {{ld|st|cp|prefetch|mbarrier}}.{{global|shared|async|tensormap|init}}
// CHECK: griddepcontrol.wait;
// CHECK-NOT: {{ld|st|cp}}.{{global|shared|async}}
// CHECK: griddepcontrol.launch_dependents;
// CHECK: ld.global.v4.b32
// CHECK: st.global.v4.b32
// CHECK-NOT: griddepcontrol
func.func @copy(%x: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>,
                %y: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>)
    attributes {tk.kernel, tk.arg_names = ["x", "y"]} {
  %c0 = arith.constant 0 : index
  %b = "tk.block_idx"() {dim = "x"} : () -> index
  %t = "tk.load"(%x, %c0, %c0, %b, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  "tk.store"(%y, %t, %c0, %c0, %b, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, !tk.rt<bf16, 16 : i64, 64 : i64, "row">, index, index, index, index) -> ()
  return
}
