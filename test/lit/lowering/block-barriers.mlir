// Barrier rings and named barriers. tk.init_barrier on a ring initialises
// every slot (thread 0: one mbarrier.init per slot, one fence.mbarrier_init;
// then one bar.sync 0 for the block). A slot at a run-time index is
// 8 * index bytes further: arrive, expect_tx and the try_wait loop use that
// address. tk.sync {id, warps} is `bar.sync id, 32 * warps` (warps defaults
// to the kernel's); a plain tk.sync stays `bar.sync 0`; with `arrive` it is
// `bar.arrive id, 32 * warps` (warpgroup.turns' hand-over).
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// NVVM: \22shared_bytes\22: 32
// NVVM-DAG: %[[F0:.*]] = llvm.getelementptr %{{.*}}[0] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// NVVM-DAG: %[[F1:.*]] = llvm.getelementptr %{{.*}}[8] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// NVVM-DAG: %[[E0:.*]] = llvm.getelementptr %{{.*}}[16] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// NVVM-DAG: %[[E1:.*]] = llvm.getelementptr %{{.*}}[24] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// NVVM: scf.if
// NVVM-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// NVVM-NEXT: nvvm.mbarrier.init %[[F0]], %[[ONE]]
// NVVM-NEXT: nvvm.mbarrier.init %[[F1]], %[[ONE]]
// NVVM-NEXT: nvvm.fence.mbarrier.init
// NVVM-NEXT: }
// NVVM-NEXT: nvvm.barrier0
// NVVM: scf.if
// NVVM-NEXT: %[[FOUR:.*]] = arith.constant 4 : i32
// NVVM-NEXT: nvvm.mbarrier.init %[[E0]], %[[FOUR]]
// NVVM-NEXT: nvvm.mbarrier.init %[[E1]], %[[FOUR]]
// NVVM-NEXT: nvvm.fence.mbarrier.init
// NVVM-NEXT: }
// NVVM-NEXT: nvvm.barrier0
// NVVM: scf.for %[[I:.*]] = %{{.*}} to
// NVVM: %[[K:.*]] = arith.remui %[[I]], %{{.*}} : index
// NVVM: %[[EIGHT:.*]] = arith.constant 8 : index
// NVVM-NEXT: %[[FDYN:.*]] = arith.muli %[[K]], %[[EIGHT]] : index
// NVVM: %[[FOFF:.*]] = arith.index_cast %[[FDYN]] : index to i32
// NVVM-NEXT: %[[FULL:.*]] = llvm.getelementptr %{{.*}}[%[[FOFF]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// NVVM: nvvm.mbarrier.arrive.expect_tx %[[FULL]]
// NVVM: %[[FOFF2:.*]] = arith.index_cast %[[FDYN]] : index to i32
// NVVM-NEXT: %[[FULL2:.*]] = llvm.getelementptr %{{.*}}[%[[FOFF2]]]
// NVVM: %[[FADDR:.*]] = llvm.ptrtoint %[[FULL2]] : !llvm.ptr<3> to i32
// NVVM-NEXT: llvm.inline_asm has_side_effects {{.*}}mbarrier.try_wait.parity{{.*}} %[[FADDR]]
// The empty ring is 16 bytes in: the static part joins the dynamic one.
// NVVM: %[[EOFF:.*]] = arith.index_cast %{{.*}} : index to i32
// NVVM-NEXT: %[[SIXTEEN:.*]] = arith.constant 16 : i32
// NVVM-NEXT: %[[EOFF16:.*]] = arith.addi %[[EOFF]], %[[SIXTEEN]] : i32
// NVVM-NEXT: %[[EMPTY:.*]] = llvm.getelementptr %{{.*}}[%[[EOFF16]]]
// NVVM: nvvm.mbarrier.arrive %[[EMPTY]]
// NVVM: %[[ID:.*]] = arith.constant 1 : i32
// NVVM-NEXT: %[[N:.*]] = arith.constant 128 : i32
// NVVM-NEXT: nvvm.barrier id = %[[ID]] number_of_threads = %[[N]]
// NVVM: %[[ID2:.*]] = arith.constant 2 : i32
// NVVM-NEXT: %[[N2:.*]] = arith.constant 256 : i32
// NVVM-NEXT: nvvm.barrier id = %[[ID2]] number_of_threads = %[[N2]]
// NVVM: nvvm.barrier0
// NVVM-NEXT: llvm.inline_asm has_side_effects "bar.arrive 12, 256;", "~{memory}"

// PTX: mbarrier.init.shared.b64 [__tkc_shared], %r[[ONE:[0-9]+]];
// PTX-NEXT: mbarrier.init.shared.b64 [__tkc_shared+8], %r[[ONE]];
// PTX-NEXT: fence.mbarrier_init.release.cluster;
// PTX: bar.sync 0;
// PTX: mbarrier.init.shared.b64 [__tkc_shared+16], %r[[FOUR:[0-9]+]];
// PTX-NEXT: mbarrier.init.shared.b64 [__tkc_shared+24], %r[[FOUR]];
// PTX-NEXT: fence.mbarrier_init.release.cluster;
// PTX: bar.sync 0;
// PTX: bar.sync 1, 128;
// PTX-NEXT: bar.sync 2, 256;
// PTX-NEXT: bar.sync 0;
// PTX-NEXT: // begin inline asm
// PTX-NEXT: bar.arrive 12, 256;
// The full slot's address, and the empty slot 16 bytes further.
// PTX: mbarrier.arrive.expect_tx.shared.b64 %rd{{[0-9]+}}, [%rd[[FULL:[0-9]+]]], %r{{[0-9]+}};
// PTX: mbarrier.try_wait.parity.shared::cta.b64
// PTX: mbarrier.arrive.shared.b64 %rd{{[0-9]+}}, [%rd[[FULL]]+16];

!bar = !tk.barrier
func.func @rings(%n: i32) attributes {tk.kernel, tk.warps = 8 : i64, tk.arg_names = ["n"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %full = "tk.alloc"() {stages = 2 : i64} : () -> !bar
  %empty = "tk.alloc"() {stages = 2 : i64} : () -> !bar
  "tk.init_barrier"(%full) {count = 1 : i64} : (!bar) -> ()
  "tk.init_barrier"(%empty) {count = 4 : i64} : (!bar) -> ()
  %nn = arith.index_cast %n : i32 to index
  scf.for %i = %c0 to %nn step %c1 {
    %k = arith.remui %i, %c2 : index
    %phase = arith.divui %i, %c2 : index
    %f = "tk.stage"(%full, %k) : (!bar, index) -> !bar
    "tk.expect_bytes"(%f) {bytes = 1024 : i64} : (!bar) -> ()
    "tk.wait"(%f, %phase) : (!bar, index) -> ()
    %e = "tk.stage"(%empty, %k) : (!bar, index) -> !bar
    "tk.arrive"(%e) {count = 1 : i64} : (!bar) -> ()
    "tk.sync"() {id = 1 : i64, warps = 4 : i64} : () -> ()
    "tk.sync"() {id = 2 : i64} : () -> ()
    "tk.sync"() : () -> ()
    "tk.sync"() {arrive, id = 12 : i64, warps = 8 : i64} : () -> ()
    scf.yield
  }
  return
}
