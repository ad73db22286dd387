// Thread-block clusters (tk.cluster = array<i64: 2, 1, 1>): the manifest's
// "cluster" (the runtime launches with it); %cluster_ctarank and %clusterid;
// the barrier's init fence at cluster scope; tkc.cluster_sync as the
// barrier.cluster arrive.release / wait.acquire pair; a multicast TMA load
// with its 16-bit mask (one instruction a panel, here two); a remote arrival
// as mapa + mbarrier.arrive.shared::cluster and waits with the default
// (CTA-scope) semantics, as CUTLASS's (cluster scope ran a GEMM 1.6x slower).
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=MANIFEST
// RUN: tkc %s --emit=ptx | FileCheck %s
// RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=SREG

// MANIFEST: \22cluster\22: [2, 1, 1]

// SREG-DAG: mov.u32 {{%r[0-9]+}}, %cluster_ctarank;
// SREG-DAG: mov.u32 {{%r[0-9]+}}, %clusterid.x;

// CHECK-LABEL: .entry pair(
// CHECK: mbarrier.init.shared.b64
// CHECK-NEXT: fence.mbarrier_init.release.cluster;
// CHECK: barrier.cluster.arrive.release.aligned;
// CHECK-NEXT: barrier.cluster.wait.acquire.aligned;
// CHECK: mbarrier.arrive.expect_tx.shared.b64
// CHECK: mov.b16 [[MASK:%rs[0-9]+]], 3;
// CHECK-COUNT-2: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [{{%rd[0-9]+}}], [{{%rd[0-9]+}}, {{{.*}}}], [__tkc_shared+{{[0-9]+}}], [[MASK]];
// CHECK-NOT: acquire.cluster.shared::cta
// CHECK: mbarrier.try_wait.parity.shared::cta.b64
// CHECK: mapa.shared::cluster.u32 remote, {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK-NEXT: mbarrier.arrive.shared::cluster.b64 _, [remote], {{%r[0-9]+}};
// CHECK: barrier.cluster.arrive.release.aligned;
// CHECK-NEXT: barrier.cluster.wait.acquire.aligned;

!g = !tk.gl<bf16, 1 : i64, 1 : i64, 128 : i64, 128 : i64>
!o = !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 128 : i64>
!s = !tk.st<bf16, 128 : i64, 128 : i64, "128b">
!h = !tk.st<bf16, 64 : i64, 128 : i64, "128b">
func.func @pair(%a: !g, %o: !o) attributes {tk.kernel, tk.warps = 1 : i64, tk.grid = ["2", "1", "1"],
                                                tk.cluster = array<i64: 2, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %r = "tk.cluster_ctarank"() : () -> index
  %x = "tk.cluster_idx"() {dim = "x"} : () -> index
  %s = "tk.alloc"() : () -> !s
  %bar = "tk.alloc"() : () -> !tk.barrier
  "tk.init_barrier"(%bar) {count = 1 : i64} : (!tk.barrier) -> ()
  "tk.cluster_sync"() : () -> ()
  %half = "tk.subtile"(%s, %r, %c0) : (!s, index, index) -> !h
  "tk.expect_bytes"(%bar) {bytes = 32768 : i64} : (!tk.barrier) -> ()
  "tk.tma_load_multicast"(%half, %a, %c0, %c0, %r, %c0, %bar, %c3) : (!h, !g, index, index, index, index, !tk.barrier, index) -> ()
  "tk.wait"(%bar, %c0) : (!tk.barrier, index) -> ()
  %c1 = arith.constant 1 : index
  %peer = arith.subi %c1, %r : index
  "tk.arrive_cta"(%bar, %peer) {count = 1 : i64} : (!tk.barrier, index) -> ()
  "tk.tma_store"(%o, %s, %c0, %c0, %x, %c0) : (!o, !s, index, index, index, index) -> ()
  "tk.tma_store_wait"() {pending = 0 : i64} : () -> ()
  "tk.cluster_sync"() : () -> ()
  return
}
