// tk-layout-selection, register layouts: every mma a/b operand gets the
// layout the mma table asks for, at the cheapest place. A free class (values
// made by loads, initialisers and elementwise ops, used by them, by stores or
// as mma operands) is retyped; anything else gets one swap_layout right after
// the definition, shared by all uses that need it. Legal IR is unchanged.
// It runs before tk-verify, which then accepts the result.
// RUN: tkc %s --pass-pipeline=tk-layout-selection,tk-verify | FileCheck %s
// Idempotent: a second run changes nothing.
// RUN: tkc %s --pass-pipeline=tk-layout-selection,tk-layout-selection,tk-verify | FileCheck %s
// The result lowers to PTX (ldmatrix.trans for the retyped shared load).
// RUN: tkc %s --pass-pipeline=tk-layout-selection,tk-verify --emit=ptx | FileCheck %s --check-prefix=PTX

!bst = !tk.st<bf16, 16 : i64, 64 : i64, "128b">
!bgl = !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 16 : i64>
!fgl = !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>
!brow = !tk.rt<bf16, 16 : i64, 16 : i64, "row">
!bcol = !tk.rt<bf16, 16 : i64, 16 : i64, "col">
!frow = !tk.rt<f32, 16 : i64, 16 : i64, "row">
!fcol = !tk.rt<f32, 16 : i64, 16 : i64, "col">
!vec = !tk.rv<f32, 16 : i64, "col">

// A shared load feeding only mma_ab's b is retyped to col: ldmatrix.trans, no swap.
// CHECK-LABEL: func.func @load_retyped
// CHECK: %[[A:.*]] = "tk.load"(%{{.*}}) : (!tk.st<bf16, 16 : i64, 64 : i64, "128b">, index, index) -> !tk.rt<bf16, 16 : i64, 16 : i64, "row">
// CHECK: %[[B:.*]] = "tk.load"(%{{.*}}) : (!tk.st<bf16, 16 : i64, 64 : i64, "128b">, index, index) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK-NOT: swap_layout
// CHECK: "tk.mma_ab"(%[[A]], %[[B]], %{{.*}})
// CHECK-NOT: swap_layout
// CHECK: return
// PTX-LABEL: .entry load_retyped(
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX-NOT: movmatrix
// PTX: ret;
func.func @load_retyped(%o: !fgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %s = "tk.alloc"() : () -> !bst
  %a = "tk.load"(%s, %c0, %c0) : (!bst, index, index) -> !brow
  %b = "tk.load"(%s, %c0, %c0) : (!bst, index, index) -> !brow
  %z = "tk.zero"() : () -> !frow
  %d = "tk.mma_ab"(%a, %b, %z) : (!brow, !brow, !frow) -> !frow
  "tk.store"(%o, %d, %c0, %c0, %c0, %c0) : (!fgl, !frow, index, index, index, index) -> ()
  return
}

// mma_atb wants both operands col; global loads are retyped (a store of the
// value does not care about its layout).
// CHECK-LABEL: func.func @global_retyped
// CHECK: "tk.load"(%arg0, {{.*}}) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK: "tk.load"(%arg0, {{.*}}) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK-NOT: swap_layout
// CHECK: "tk.store"(%arg0, {{.*}}) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK: return
func.func @global_retyped(%g: !bgl, %o: !fgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %a = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!bgl, index, index, index, index) -> !brow
  %b = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!bgl, index, index, index, index) -> !brow
  %z = "tk.zero"() : () -> !frow
  %d = "tk.mma_atb"(%a, %b, %z) : (!brow, !brow, !frow) -> !frow
  "tk.store"(%g, %b, %c0, %c0, %c0, %c0) : (!bgl, !brow, index, index, index, index) -> ()
  "tk.store"(%o, %d, %c0, %c0, %c0, %c0) : (!fgl, !frow, index, index, index, index) -> ()
  return
}

// Already legal: nothing changes (the author's explicit layouts are kept).
// CHECK-LABEL: func.func @legal
// CHECK: "tk.load"({{.*}}) -> !tk.rt<bf16, 16 : i64, 16 : i64, "row">
// CHECK: "tk.load"({{.*}}) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK-NOT: swap_layout
// CHECK: return
func.func @legal(%o: !fgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %s = "tk.alloc"() : () -> !bst
  %a = "tk.load"(%s, %c0, %c0) : (!bst, index, index) -> !brow
  %b = "tk.load"(%s, %c0, %c0) : (!bst, index, index) -> !bcol
  %z = "tk.zero"() : () -> !frow
  %d = "tk.mma_ab"(%a, %b, %z) : (!brow, !bcol, !frow) -> !frow
  %e = "tk.mma_abt"(%a, %a, %d) : (!brow, !brow, !frow) -> !frow
  "tk.store"(%o, %e, %c0, %c0, %c0, %c0) : (!fgl, !frow, index, index, index, index) -> ()
  return
}

// One value wanted in both layouts (a of one mma, b of two others): it keeps
// row (one swap either way: ties keep the author's layout) and gets exactly
// one swap right after its load, located there, feeding both b uses.
// CHECK-LABEL: func.func @swap_once
// CHECK: %[[X:.*]] = "tk.load"({{.*}}) -> !tk.rt<bf16, 16 : i64, 16 : i64, "row">
// CHECK-NEXT: %[[T:.*]] = "tk.swap_layout"(%[[X]]) : (!tk.rt<bf16, 16 : i64, 16 : i64, "row">) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK-NOT: swap_layout
// CHECK: "tk.mma_ab"(%[[X]], %[[T]],
// CHECK: "tk.mma_ab"(%[[X]], %[[T]],
// CHECK-NOT: swap_layout
// CHECK: return
func.func @swap_once(%o: !fgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %s = "tk.alloc"() : () -> !bst
  %x = "tk.load"(%s, %c0, %c0) : (!bst, index, index) -> !brow loc("k.py":7:5)
  %z = "tk.zero"() : () -> !frow
  %d = "tk.mma_ab"(%x, %x, %z) : (!brow, !brow, !frow) -> !frow
  %e = "tk.mma_ab"(%x, %x, %d) : (!brow, !brow, !frow) -> !frow
  "tk.store"(%o, %e, %c0, %c0, %c0, %c0) : (!fgl, !frow, index, index, index, index) -> ()
  return
}

// A use that needs row (row_max, v1) pins the load: a swap instead of a
// retype. The other operand, reached through a copy, is retyped.
// CHECK-LABEL: func.func @pinned_by_reduce
// CHECK: %[[X:.*]] = "tk.load"({{.*}}) -> !tk.rt<bf16, 16 : i64, 16 : i64, "row">
// CHECK-NEXT: %[[T:.*]] = "tk.swap_layout"(%[[X]])
// CHECK-NEXT: "tk.load"({{.*}}) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK-NEXT: %[[Y:.*]] = "tk.copy"({{.*}}) : (!tk.rt<bf16, 16 : i64, 16 : i64, "col">) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK-NEXT: "tk.row_max"(%[[X]])
// CHECK: "tk.mma_atb"(%[[Y]], %[[T]],
func.func @pinned_by_reduce(%b: !bgl, %o: !fgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%b, %c0, %c0, %c0, %c0) : (!bgl, index, index, index, index) -> !brow
  %a = "tk.load"(%b, %c0, %c0, %c0, %c0) : (!bgl, index, index, index, index) -> !brow
  %y = "tk.copy"(%a) : (!brow) -> !brow
  %m = "tk.row_max"(%x) : (!brow) -> !vec
  %z = "tk.zero"() : () -> !frow
  %d = "tk.mma_atb"(%y, %x, %z) : (!brow, !brow, !frow) -> !frow
  "tk.store"(%o, %d, %c0, %c0, %c0, %c0) : (!fgl, !frow, index, index, index, index) -> ()
  return
}

// Through layout-agnostic ops: f32 load -> exp -> copy to bf16 -> mma_ab's b.
// The whole chain turns col; no swap.
// CHECK-LABEL: func.func @through_elementwise
// CHECK: "tk.load"({{.*}}) -> !tk.rt<f32, 16 : i64, 16 : i64, "col">
// CHECK: "tk.exp"({{.*}}) : (!tk.rt<f32, 16 : i64, 16 : i64, "col">) -> !tk.rt<f32, 16 : i64, 16 : i64, "col">
// CHECK: "tk.mul"({{.*}}) : (!tk.rt<f32, 16 : i64, 16 : i64, "col">, f32) -> !tk.rt<f32, 16 : i64, 16 : i64, "col">
// CHECK: "tk.copy"({{.*}}) : (!tk.rt<f32, 16 : i64, 16 : i64, "col">) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK-NOT: swap_layout
// CHECK: return
func.func @through_elementwise(%g: !fgl, %s: f32, %o: !fgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!fgl, index, index, index, index) -> !frow
  %e = "tk.exp"(%x) : (!frow) -> !frow
  %m = "tk.mul"(%e, %s) : (!frow, f32) -> !frow
  %b = "tk.copy"(%m) : (!frow) -> !brow
  %a = "tk.ones"() : () -> !brow
  %z = "tk.zero"() : () -> !frow
  %d = "tk.mma_ab"(%a, %b, %z) : (!brow, !brow, !frow) -> !frow
  "tk.store"(%o, %d, %c0, %c0, %c0, %c0) : (!fgl, !frow, index, index, index, index) -> ()
  return
}

// An mma result (row, fixed) converted to bf16 and used as mma_ab's b (the
// attention P @ V shape): the swap goes right after the copy, not the mma.
// CHECK-LABEL: func.func @after_mma
// CHECK: %[[D:.*]] = "tk.mma_abt"
// CHECK-NEXT: %[[P:.*]] = "tk.copy"(%[[D]]) : (!tk.rt<f32, 16 : i64, 16 : i64, "row">) -> !tk.rt<bf16, 16 : i64, 16 : i64, "row">
// CHECK-NEXT: %[[T:.*]] = "tk.swap_layout"(%[[P]])
// CHECK-NEXT: "tk.mma_ab"(%{{.*}}, %[[T]],
func.func @after_mma(%g: !bgl, %o: !fgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %a = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!bgl, index, index, index, index) -> !brow
  %z = "tk.zero"() : () -> !frow
  %d = "tk.mma_abt"(%a, %a, %z) : (!brow, !brow, !frow) -> !frow
  %p = "tk.copy"(%d) : (!frow) -> !brow
  %e = "tk.mma_ab"(%a, %p, %z) : (!brow, !brow, !frow) -> !frow
  "tk.store"(%o, %e, %c0, %c0, %c0, %c0) : (!fgl, !frow, index, index, index, index) -> ()
  return
}

// Loops: a loop-carried tile keeps its layout; the swap goes at the start of
// the body (it is the iter_arg that needs it). A loop-invariant load is
// retyped outside the loop; a load inside the body is retyped in place.
// CHECK-LABEL: func.func @loop
// CHECK: %[[INV:.*]] = "tk.load"(%arg0, {{.*}}) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK: scf.for {{.*}} iter_args(%[[C:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}}) -> (!tk.rt<bf16, 16 : i64, 16 : i64, "row">, !tk.rt<f32, 16 : i64, 16 : i64, "row">)
// CHECK-NEXT: %[[T:.*]] = "tk.swap_layout"(%[[C]]) : (!tk.rt<bf16, 16 : i64, 16 : i64, "row">) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK-NEXT: %[[IN:.*]] = "tk.load"({{.*}}) -> !tk.rt<bf16, 16 : i64, 16 : i64, "col">
// CHECK-NEXT: %[[D1:.*]] = "tk.mma_ab"(%{{.*}}, %[[T]], %[[ACC]])
// CHECK-NEXT: %[[D2:.*]] = "tk.mma_ab"(%{{.*}}, %[[INV]], %[[D1]])
// CHECK-NEXT: %[[D3:.*]] = "tk.mma_ab"(%{{.*}}, %[[IN]], %[[D2]])
// CHECK-NEXT: scf.yield %[[C]], %[[D3]] : !tk.rt<bf16, 16 : i64, 16 : i64, "row">, !tk.rt<f32, 16 : i64, 16 : i64, "row">
// CHECK-NOT: swap_layout
// CHECK: return
func.func @loop(%g: !bgl, %o: !fgl) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %a = "tk.ones"() : () -> !brow
  %inv = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!bgl, index, index, index, index) -> !brow
  %z = "tk.zero"() : () -> !frow
  %r:2 = scf.for %i = %c0 to %c4 step %c1 iter_args(%c = %a, %acc = %z) -> (!brow, !frow) {
    %in = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!bgl, index, index, index, index) -> !brow
    %d1 = "tk.mma_ab"(%a, %c, %acc) : (!brow, !brow, !frow) -> !frow
    %d2 = "tk.mma_ab"(%a, %inv, %d1) : (!brow, !brow, !frow) -> !frow
    %d3 = "tk.mma_ab"(%a, %in, %d2) : (!brow, !brow, !frow) -> !frow
    scf.yield %c, %d3 : !brow, !frow
  }
  "tk.store"(%o, %r#1, %c0, %c0, %c0, %c0) : (!fgl, !frow, index, index, index, index) -> ()
  return
}

// A transpose's result may take the other layout than its operand: there it
// is the operand's registers renamed (x's row layout is x.T's col layout),
// so a transposed tile that is only stored takes it and goes out by
// stmatrix.trans with no movmatrix. A use that needs the same layout (a row
// reduction) keeps it, and the lowering swaps (movmatrix); so does a store to
// global memory, where the row layout's pairs are the wider stores.
// CHECK-LABEL: func.func @transpose_stored
// CHECK: %[[X:.*]] = "tk.load"({{.*}}) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
// CHECK: %[[T:.*]] = "tk.transpose"(%[[X]]) : (!tk.rt<bf16, 16 : i64, 32 : i64, "row">) -> !tk.rt<bf16, 32 : i64, 16 : i64, "col">
// CHECK: "tk.store"(%{{.*}}, %[[T]], {{.*}}) : (!tk.st<bf16, 32 : i64, 16 : i64, "32b">, !tk.rt<bf16, 32 : i64, 16 : i64, "col">
// CHECK-LABEL: func.func @transpose_reduced
// CHECK: "tk.transpose"({{.*}}) : (!tk.rt<bf16, 16 : i64, 32 : i64, "row">) -> !tk.rt<bf16, 32 : i64, 16 : i64, "row">
// CHECK-LABEL: func.func @transpose_to_global
// CHECK: "tk.transpose"({{.*}}) : (!tk.rt<bf16, 16 : i64, 32 : i64, "row">) -> !tk.rt<bf16, 32 : i64, 16 : i64, "row">
// PTX-LABEL: .entry transpose_stored(
// PTX-NOT: movmatrix
// PTX: stmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX-NOT: movmatrix
// PTX: ret;
// PTX-LABEL: .entry transpose_reduced(
// PTX: movmatrix.sync.aligned.m8n8.trans.b16
// PTX: ret;
func.func @transpose_stored(%g: !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>,
                            %o: !tk.gl<bf16, 1 : i64, 1 : i64, 32 : i64, 16 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  %t = "tk.transpose"(%x) : (!tk.rt<bf16, 16 : i64, 32 : i64, "row">) -> !tk.rt<bf16, 32 : i64, 16 : i64, "row">
  %s = "tk.alloc"() : () -> !tk.st<bf16, 32 : i64, 16 : i64, "32b">
  "tk.store"(%s, %t, %c0, %c0) : (!tk.st<bf16, 32 : i64, 16 : i64, "32b">, !tk.rt<bf16, 32 : i64, 16 : i64, "row">, index, index) -> ()
  %y = "tk.load"(%s, %c0, %c0) : (!tk.st<bf16, 32 : i64, 16 : i64, "32b">, index, index) -> !tk.rt<bf16, 32 : i64, 16 : i64, "row">
  "tk.store"(%o, %y, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 32 : i64, 16 : i64>, !tk.rt<bf16, 32 : i64, 16 : i64, "row">, index, index, index, index) -> ()
  return
}

func.func @transpose_reduced(%g: !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, %o: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 32 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  %t = "tk.transpose"(%x) : (!tk.rt<bf16, 16 : i64, 32 : i64, "row">) -> !tk.rt<bf16, 32 : i64, 16 : i64, "row">
  %f = "tk.copy"(%t) : (!tk.rt<bf16, 32 : i64, 16 : i64, "row">) -> !tk.rt<f32, 32 : i64, 16 : i64, "row">
  %v = "tk.row_sum"(%f) : (!tk.rt<f32, 32 : i64, 16 : i64, "row">) -> !tk.rv<f32, 32 : i64, "col">
  "tk.store"(%o, %v, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 32 : i64>, !tk.rv<f32, 32 : i64, "col">, index, index, index, index) -> ()
  return
}

func.func @transpose_to_global(%g: !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>,
                               %o: !tk.gl<bf16, 1 : i64, 1 : i64, 32 : i64, 16 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%g, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  %t = "tk.transpose"(%x) : (!tk.rt<bf16, 16 : i64, 32 : i64, "row">) -> !tk.rt<bf16, 32 : i64, 16 : i64, "row">
  "tk.store"(%o, %t, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 32 : i64, 16 : i64>, !tk.rt<bf16, 32 : i64, 16 : i64, "row">, index, index, index, index) -> ()
  return
}
