# tk-pipeline-staging on the library's persistent GEMM in (2, 1, 1) clusters
# (gemm_hopper(BN=192, cluster=2)): tk-grid-ordering deals a cluster's CTAs
# the same work items, from block_idx.x / 2 (the cluster's index) on, so the
# items loop's variable, and the A rows it picks, are the same in both CTAs:
# the producer (the warpgroup that gives up registers) multicasts half of A's
# tile a CTA (64 of its 128 rows), while B (its columns follow the CTA) stays
# a plain load.
# RUN: tkc %s --emit=tile | FileCheck %s
from tkc.kernels.gemm_hopper import gemm_hopper

# CHECK-LABEL: func.func @gemm_hopper_bf16_ab_128x192x64_c2(
# CHECK: "tk.decrease_registers"
# CHECK: %[[X:.*]] = "tk.block_idx"() {dim = "x"}
# CHECK-NEXT: %[[TWO:.*]] = arith.constant 2 : index
# CHECK-NEXT: %[[CLUSTER:.*]] = arith.divui %[[X]], %[[TWO]] : index
# CHECK: scf.for %{{.*}} = %[[CLUSTER]] to
# CHECK: "tk.tma_load_multicast"(%{{.*}}) : (!tk.st<bf16, 64 : i64, 64 : i64, "128b">
# CHECK: "tk.tma_load"(%{{.*}}) : (!tk.st<bf16, 64 : i64, 192 : i64
persistent_c2 = gemm_hopper("bf16", BN=192, cluster=2)
