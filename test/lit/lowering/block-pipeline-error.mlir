// tk.pipeline_load is synchronised by tk-pipeline-staging, which replaces it;
// tk-lower-to-nvvm never lowers one and says so at the op's location.
// RUN: not tkc %s --pass-pipeline=tk-lower-to-nvvm 2>&1 | FileCheck %s

// CHECK: k.py:9:3: error: tk.pipeline_load is a block-level, compiler-synchronised TMA copy: it must be staged by tk-pipeline-staging (the tile pipeline runs it) and is never lowered directly
!s = !tk.st<bf16, 64 : i64, 64 : i64, "128b">
!g = !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>
func.func @unstaged(%a: !g) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a"]} {
  %c0 = arith.constant 0 : index
  %s = "tk.alloc"() : () -> !s
  "tk.pipeline_load"(%s, %a, %c0, %c0, %c0, %c0) : (!s, !g, index, index, index, index) -> () loc("k.py":9:3)
  return
}
