// mbarriers: thread 0 initialises (then fence.mbarrier_init and bar.sync 0),
// lane 0 of the calling warp arrives (with a count) or arrives expecting
// bytes, every lane waits in a try_wait.parity loop on the phase's parity;
// fence_async is fence.proxy.async.shared::cta. A barrier is 8 bytes of
// shared memory, aligned 8 (here right after a 64-byte sv).
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// NVVM: \22shared_bytes\22: 72
// NVVM-DAG: %[[BAR:.*]] = llvm.getelementptr %{{.*}}[64] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// NVVM-DAG: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// NVVM-DAG: %[[T0:.*]] = arith.cmpi eq, %[[TID]]
// NVVM-DAG: %[[LANE:.*]] = arith.remui %[[TID]], %c32_i32
// NVVM-DAG: %[[L0:.*]] = arith.cmpi eq, %[[LANE]]
// NVVM: scf.if %[[T0]] {
// NVVM-NEXT: %[[TWO:.*]] = arith.constant 2 : i32
// NVVM-NEXT: nvvm.mbarrier.init %[[BAR]], %[[TWO]]
// NVVM-NEXT: nvvm.fence.mbarrier.init
// NVVM-NEXT: }
// NVVM-NEXT: nvvm.barrier0
// NVVM: scf.if %[[L0]] {
// NVVM: nvvm.mbarrier.arrive.expect_tx %[[BAR]], %{{.*}} : !llvm.ptr<3>, i32 -> i64
// NVVM: scf.if %[[L0]] {
// NVVM-NEXT: %[[THREE:.*]] = arith.constant 3 : i32
// NVVM-NEXT: nvvm.mbarrier.arrive %[[BAR]], %[[THREE]] : !llvm.ptr<3>
// NVVM: arith.andi %{{.*}}, %c1_i32
// NVVM: llvm.inline_asm has_side_effects {{.*}}mbarrier.try_wait.parity.shared::cta.b64
// NVVM: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}

// PTX: mov.u32 %r[[TID:[0-9]+]], %tid.x;
// PTX: setp.ne.b32 %p[[NOT_T0:[0-9]+]], %r[[TID]], 0;
// PTX: and.b32 %r[[LANE:[0-9]+]], %r[[TID]], 31;
// PTX: @%p[[NOT_T0]] bra
// PTX: mbarrier.init.shared.b64 [__tkc_shared+64], %r{{[0-9]+}};
// PTX-NEXT: fence.mbarrier_init.release.cluster;
// PTX: setp.ne.b32 %p[[NOT_L0:[0-9]+]], %r[[LANE]], 0;
// PTX: bar.sync 0;
// PTX-NEXT: @%p[[NOT_L0]] bra
// PTX: mbarrier.arrive.expect_tx.shared.b64 %rd{{[0-9]+}}, [__tkc_shared+64], %r{{[0-9]+}};
// PTX: mbarrier.arrive.shared.b64 %rd{{[0-9]+}}, [__tkc_shared+64], %r{{[0-9]+}};
// PTX: and.b32 %r[[PAR:[0-9]+]], %r{{[0-9]+}}, 1;
// PTX: LAB_WAIT:
// PTX-NEXT: mbarrier.try_wait.parity.shared::cta.b64 P1, [%r{{[0-9]+}}], %r[[PAR]];
// PTX-NEXT: @P1 bra.uni DONE;
// PTX-NEXT: bra.uni LAB_WAIT;
// PTX: fence.proxy.async.shared::cta;
func.func @bars(%n: i32) attributes {tk.kernel, tk.warps = 2 : i64} {
  %v = "tk.alloc"() : () -> !tk.sv<f32, 16 : i64>
  %bar = "tk.alloc"() : () -> !tk.barrier
  "tk.init_barrier"(%bar) {count = 2 : i64} : (!tk.barrier) -> ()
  "tk.expect_bytes"(%bar) {bytes = 4096 : i64} : (!tk.barrier) -> ()
  "tk.arrive"(%bar) {count = 3 : i64} : (!tk.barrier) -> ()
  %k = arith.index_cast %n : i32 to index
  "tk.wait"(%bar, %k) : (!tk.barrier, index) -> ()
  "tk.fence_async"() : () -> ()
  return
}
