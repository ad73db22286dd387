// Rings (tk.alloc {stages = N}): N slots one stride apart (the type's size
// rounded up to its alignment: 8192 for this 128b st, 128 for a 64-byte sv),
// counted whole in shared_bytes. tk.stage at a run-time index adds
// index * stride to every address of the slot (group copy, ldmatrix, sv
// loads); at a constant index it folds into the static offset (slot 2 of the
// st ring is 16384 bytes in). ptxas assembles the result.
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// NVVM: \22shared_bytes\22: 33152
// NVVM: scf.for %[[I:.*]] = %{{.*}} to
// NVVM: %[[K:.*]] = arith.remui %[[I]], %{{.*}} : index
// NVVM-NEXT: %[[STRIDE:.*]] = arith.constant 8192 : index
// NVVM-NEXT: %[[SLOT:.*]] = arith.muli %[[K]], %[[STRIDE]] : index
// The group copy: each of the 4 chunks a thread moves lands in the slot.
// NVVM-COUNT-4: arith.addi %{{.*}}, %[[SLOT]] : index
// NVVM: nvvm.barrier0
// The ldmatrix of each of the 4 base tiles reads from the slot.
// NVVM: %[[A:.*]] = arith.addi %{{.*}}, %[[SLOT]] : index
// NVVM-NEXT: %[[A32:.*]] = arith.index_cast %[[A]] : index to i32
// NVVM-NEXT: %[[P:.*]] = llvm.getelementptr %{{.*}}[%[[A32]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// NVVM-NEXT: %[[PA:.*]] = llvm.ptrtoint %[[P]] : !llvm.ptr<3> to i32
// NVVM-NEXT: llvm.inline_asm has_side_effects "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4+0];", "=r,=r,=r,=r,r" %[[PA]]
// NVVM-COUNT-3: "ldmatrix.sync.aligned
// Slot 2, a constant: the instruction's immediate offset.
// NVVM: "stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0+16384], {$1, $2, $3, $4};"
// The sv ring: slot k3 * 128 bytes.
// NVVM: %[[K3:.*]] = arith.remui %[[I]], %{{.*}} : index
// NVVM-NEXT: %[[VSTRIDE:.*]] = arith.constant 128 : index
// NVVM-NEXT: %[[VSLOT:.*]] = arith.muli %[[K3]], %[[VSTRIDE]] : index
// NVVM: %[[VO:.*]] = arith.addi %{{.*}}, %[[VSLOT]] : index
// NVVM-NEXT: arith.index_cast %[[VO]] : index to i32
// NVVM: llvm.load {{.*}} : !llvm.ptr<3> -> f32

// PTX: .extern .shared .align 1024 .b8 __tkc_shared[];
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: stmatrix.sync.aligned.m8n8.x4.shared.b16 [%r{{[0-9]+}}+16384]
// PTX: ld.shared.b32

!s = !tk.st<bf16, 64 : i64, 64 : i64, "128b">
!v = !tk.sv<f32, 16 : i64>
!r = !tk.rt<bf16, 16 : i64, 64 : i64, "row">
!rv = !tk.rv<f32, 16 : i64, "col">
!g = !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>
!gv = !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>
func.func @ring(%a: !g, %o: !gv, %n: i32) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a", "o", "n"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %ring = "tk.alloc"() {stages = 4 : i64} : () -> !s
  %vring = "tk.alloc"() {stages = 3 : i64} : () -> !v
  %nn = arith.index_cast %n : i32 to index
  scf.for %i = %c0 to %nn step %c1 {
    %k = arith.remui %i, %c4 : index
    %slot = "tk.stage"(%ring, %k) : (!s, index) -> !s
    "tk.group_load"(%slot, %a, %c0, %c0, %i, %c0) {warps = 4 : i64} : (!s, !g, index, index, index, index) -> ()
    "tk.sync"() : () -> ()
    %w = "tk.warpid"() : () -> index
    %x = "tk.load"(%slot, %w, %c0) : (!s, index, index) -> !r
    %two = "tk.stage"(%ring, %c2) : (!s, index) -> !s
    "tk.store"(%two, %x, %w, %c0) : (!s, !r, index, index) -> ()
    %k3 = arith.remui %i, %c3 : index
    %vslot = "tk.stage"(%vring, %k3) : (!v, index) -> !v
    %y = "tk.load"(%vslot) : (!v) -> !rv
    "tk.store"(%o, %y, %c0, %c0, %i, %c0) : (!gv, !rv, index, index, index, index) -> ()
    scf.yield
  }
  return
}
