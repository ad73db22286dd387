// Every tk op in a valid kernel: parses, passes tk-verify, prints back, and
// the printed IR parses and verifies again (round trip).
// RUN: tkc %s --pass-pipeline=tk-verify | FileCheck %s
// RUN: tkc %s --pass-pipeline=tk-verify | tkc /dev/stdin --pass-pipeline=tk-verify | FileCheck %s

// CHECK-LABEL: func.func @all_ops
// CHECK-SAME: tk.kernel
// CHECK-SAME: tk.warps = 4 : i64
func.func @all_ops(%a: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>,
                   %o: !tk.gl<f32, -1 : i64, 2 : i64, 64 : i64, 64 : i64>,
                   %s: f32, %n: i32)
    attributes {tk.kernel, tk.warps = 4 : i64,
                tk.grid = ["cdiv(a.r, 64)", "1", "1"], tk.arg_names = ["a", "o", "s", "n"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // CHECK: "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "auto">
  %sa = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "auto">
  // CHECK: "tk.alloc"() : () -> !tk.st<f32, 16 : i64, 32 : i64, "none">
  %sf = "tk.alloc"() : () -> !tk.st<f32, 16 : i64, 32 : i64, "none">
  // CHECK: "tk.alloc"() : () -> !tk.sv<f32, 64 : i64>
  %sv = "tk.alloc"() : () -> !tk.sv<f32, 64 : i64>
  // CHECK: "tk.laneid"() : () -> index
  %lane = "tk.laneid"() : () -> index
  // CHECK: "tk.warpid"() : () -> index
  %w = "tk.warpid"() : () -> index
  // CHECK: "tk.warpgroupid"() : () -> index
  %wg = "tk.warpgroupid"() : () -> index
  // CHECK: "tk.block_idx"() {dim = "x"} : () -> index
  %bx = "tk.block_idx"() {dim = "x"} : () -> index
  // CHECK: "tk.grid_dim"() {dim = "y"} : () -> index
  %gy = "tk.grid_dim"() {dim = "y"} : () -> index
  // CHECK: "tk.dim"(%{{.*}}) {axis = "r"}
  %rows = "tk.dim"(%a) {axis = "r"} : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>) -> index
  // CHECK: "tk.group_load"({{.*}}) {warps = 4 : i64}
  "tk.group_load"(%sa, %a, %c0, %c0, %bx, %c0) {warps = 4 : i64} : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, index, index, index, index) -> ()
  // CHECK: "tk.sync"() : () -> ()
  "tk.sync"() : () -> ()
  // CHECK: "tk.load"
  %x = "tk.load"(%sa, %w, %c0) : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  %xb = "tk.load"(%sa, %c0, %c0) : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, index, index) -> !tk.rt<bf16, 64 : i64, 32 : i64, "col">
  %xg = "tk.load"(%a, %c0, %c0, %c1, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, index, index, index, index) -> !tk.rt<bf16, 32 : i64, 64 : i64, "row">
  %vg = "tk.load"(%a, %c0, %c0, %c1, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, index, index, index, index) -> !tk.rv<f32, 64 : i64, "row">
  %vs = "tk.load"(%sv) : (!tk.sv<f32, 64 : i64>) -> !tk.rv<f32, 64 : i64, "row">
  // CHECK: "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %acc0 = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %on = "tk.ones"() : () -> !tk.rv<f32, 16 : i64, "col">
  %ni = "tk.neg_infty"() : () -> !tk.rv<f32, 16 : i64, "col">
  %pi = "tk.pos_infty"() : () -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: "tk.fill"
  %fl = "tk.fill"(%s) : (f32) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: "tk.mma_ab"
  %acc1 = "tk.mma_ab"(%x, %xb, %acc0) : (!tk.rt<bf16, 16 : i64, 64 : i64, "row">, !tk.rt<bf16, 64 : i64, 32 : i64, "col">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %xbt = "tk.load"(%sa, %c0, %c0) : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, index, index) -> !tk.rt<bf16, 32 : i64, 64 : i64, "row">
  // CHECK: "tk.mma_abt"
  %acc2 = "tk.mma_abt"(%x, %xbt, %acc1) : (!tk.rt<bf16, 16 : i64, 64 : i64, "row">, !tk.rt<bf16, 32 : i64, 64 : i64, "row">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %at = "tk.load"(%sa, %c0, %c0) : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, index, index) -> !tk.rt<bf16, 64 : i64, 16 : i64, "col">
  // CHECK: "tk.mma_atb"
  %acc3 = "tk.mma_atb"(%at, %xb, %acc2) : (!tk.rt<bf16, 64 : i64, 16 : i64, "col">, !tk.rt<bf16, 64 : i64, 32 : i64, "col">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: "tk.mma_atbt"
  %acc = "tk.mma_atbt"(%at, %xbt, %acc3) : (!tk.rt<bf16, 64 : i64, 16 : i64, "col">, !tk.rt<bf16, 32 : i64, 64 : i64, "row">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: "tk.exp"
  %e = "tk.exp"(%acc) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %e2 = "tk.exp2"(%e) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %l = "tk.log"(%e2) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %l2 = "tk.log2"(%l) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %ab = "tk.abs"(%l2) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %re = "tk.relu"(%ab) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %ng = "tk.neg"(%on) : (!tk.rv<f32, 16 : i64, "col">) -> !tk.rv<f32, 16 : i64, "col">
  // CHECK: "tk.add"
  %ad = "tk.add"(%re, %fl) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %sb = "tk.sub"(%ad, %s) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, f32) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %ml = "tk.mul"(%sb, %pi) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %dv = "tk.div"(%ml, %s) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, f32) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %mx = "tk.max"(%ng, %ni) : (!tk.rv<f32, 16 : i64, "col">, !tk.rv<f32, 16 : i64, "col">) -> !tk.rv<f32, 16 : i64, "col">
  %mn = "tk.min"(%dv, %s) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, f32) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: "tk.row_max"
  %rm = "tk.row_max"(%mn, %mx) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 16 : i64, "col">) -> !tk.rv<f32, 16 : i64, "col">
  %rs = "tk.row_sum"(%mn) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rv<f32, 16 : i64, "col">
  %cm = "tk.col_max"(%mn) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rv<f32, 32 : i64, "row">
  %cs = "tk.col_sum"(%mn, %cm) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 32 : i64, "row">) -> !tk.rv<f32, 32 : i64, "row">
  // CHECK: "tk.sub_row"
  %b1 = "tk.add_row"(%mn, %rm) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 16 : i64, "col">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %b2 = "tk.sub_row"(%b1, %rs) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 16 : i64, "col">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %b3 = "tk.mul_row"(%b2, %rs) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 16 : i64, "col">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %b4 = "tk.div_row"(%b3, %rs) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 16 : i64, "col">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %b5 = "tk.add_col"(%b4, %cs) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %b6 = "tk.sub_col"(%b5, %cs) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %b7 = "tk.mul_col"(%b6, %cs) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %b8 = "tk.div_col"(%b7, %cs) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, !tk.rv<f32, 32 : i64, "row">) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  // CHECK: "tk.copy"{{.*}} -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  %cp = "tk.copy"(%b8) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  // CHECK: "tk.swap_layout"{{.*}} -> !tk.rt<bf16, 16 : i64, 32 : i64, "col">
  %sw = "tk.swap_layout"(%cp) : (!tk.rt<bf16, 16 : i64, 32 : i64, "row">) -> !tk.rt<bf16, 16 : i64, 32 : i64, "col">
  // CHECK: "tk.transpose"{{.*}} -> !tk.rt<bf16, 32 : i64, 16 : i64, "col">
  %tr = "tk.transpose"(%sw) : (!tk.rt<bf16, 16 : i64, 32 : i64, "col">) -> !tk.rt<bf16, 32 : i64, 16 : i64, "col">
  // CHECK: "tk.transpose"{{.*}} -> !tk.rt<bf16, 32 : i64, 16 : i64, "row">
  %tr2 = "tk.transpose"(%sw) : (!tk.rt<bf16, 16 : i64, 32 : i64, "col">) -> !tk.rt<bf16, 32 : i64, 16 : i64, "row">
  // CHECK: "tk.store"
  "tk.store"(%sf, %b8, %c0, %c0) : (!tk.st<f32, 16 : i64, 32 : i64, "none">, !tk.rt<f32, 16 : i64, 32 : i64, "row">, index, index) -> ()
  "tk.store"(%sv, %vg) : (!tk.sv<f32, 64 : i64>, !tk.rv<f32, 64 : i64, "row">) -> ()
  "tk.store"(%o, %b8, %c0, %c1, %c0, %c0) : (!tk.gl<f32, -1 : i64, 2 : i64, 64 : i64, 64 : i64>, !tk.rt<f32, 16 : i64, 32 : i64, "row">, index, index, index, index) -> ()
  "tk.sync"() : () -> ()
  // CHECK: "tk.group_store"({{.*}}) {warps = 2 : i64}
  "tk.group_store"(%o, %sf, %c0, %c0, %c0, %c1) {warps = 2 : i64} : (!tk.gl<f32, -1 : i64, 2 : i64, 64 : i64, 64 : i64>, !tk.st<f32, 16 : i64, 32 : i64, "none">, index, index, index, index) -> ()
  %c4 = arith.constant 4 : index
  // CHECK: scf.for
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%t = %acc0) -> (!tk.rt<f32, 16 : i64, 32 : i64, "row">) {
    %u = "tk.add"(%t, %s) : (!tk.rt<f32, 16 : i64, 32 : i64, "row">, f32) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
    scf.yield %u : !tk.rt<f32, 16 : i64, 32 : i64, "row">
  }
  // CHECK: return
  return
}
