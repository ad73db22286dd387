# tk-pipeline-staging on a split-K GEMM (gemm_hopper(split=2)): a (2, 1, 1)
# cluster whose CTAs sum halves of K (the k loop starts at the CTA's half).
# No load is multicast: the loop's bounds follow block_idx.x, so its variable
# differs between the CTAs although A's coordinates name no block index along
# x. The author's tkc.cluster_sync() that opens the kernel (after the barrier
# inits) and the one that closes it stay in the kernel's body, around the
# producer / consumer split: every warp of both CTAs meets there. The partial
# tiles cross by tk.tma_store_cta in the consumers' code. The partial tiles lie
# over the ring (after_loop): the consumers meet after the drain (the last wait
# and release) before any warp writes them, since another may still read the
# last slot.
# RUN: tkc %s --emit=tile | FileCheck %s
from tkc.kernels.gemm_hopper import gemm_hopper

# CHECK-LABEL: func.func @gemm_hopper_bf16_ab_128x64x64_np_k2(
# CHECK-NOT: tk.tma_load_multicast
# CHECK: "tk.init_barrier"
# CHECK-NOT: scf.if
# CHECK: "tk.cluster_sync"() : () -> ()
# CHECK-NEXT: %{{.*}} = "tk.warpid"()
# CHECK: scf.if
# CHECK: {tk.staged = {role = "producer"
# CHECK: } {tk.staged = {role = "consumer"
# CHECK-NEXT: "tk.warpgroup_mma_wait"({{.*}}) {pending = 0 : i64}
# CHECK: "tk.arrive"
# CHECK: "tk.sync"() {id = 1 : i64, warps = 8 : i64}
# CHECK-NOT: "tk.sync"
# CHECK: "tk.store"(
# CHECK: "tk.sync"() {id = 1 : i64, warps = 8 : i64}
# CHECK: "tk.tma_store_cta"
# CHECK-NOT: tk.tma_load_multicast
# CHECK: "tk.cluster_sync"() : () -> ()
# CHECK-NEXT: return
split_k = gemm_hopper("bf16", BN=64, persistent=False, split=2)
