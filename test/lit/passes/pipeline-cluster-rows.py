# tk-pipeline-staging in clusters along y (gemm_hopper(cluster_m=4), split-K 2:
# (2, 4, 1) clusters): A's load follows block_idx.y and the split loop's
# bounds follow x, so it stays a plain load; B's follows neither y nor the
# rank along y, so the four CTAs of a cluster's column share it: each loads 16
# of its 64 rows (its rank along y, rank / 2) and multicasts them to the
# column, mask 0b01010101 shifted by its rank along x (rank % 2). A slot's
# empty barrier counts the column's 4 x 4 consumer warps, which release it on
# each CTA of the column (rank % 2 + 0, 2, 4, 6).
# RUN: tkc %s --emit=tile | FileCheck %s
from tkc.kernels.gemm_hopper import gemm_hopper

# CHECK-LABEL: func.func @gemm_hopper_bf16_ab_64x128x64_np_k2_cm4(
# CHECK: "tk.init_barrier"(%{{.*}}) {count = 16 : i64}
# CHECK-NEXT: "tk.cluster_sync"
# CHECK: "tk.tma_load"(%{{.*}}) : (!tk.st<bf16, 64 : i64, 64 : i64, "128b">
# CHECK: %[[RANK:.*]] = "tk.cluster_ctarank"
# CHECK: %[[RY:.*]] = arith.divui %[[RANK]], %{{.*}} : index
# CHECK: %[[RX:.*]] = arith.remui %[[RANK]], %{{.*}} : index
# CHECK: %[[COLUMN:.*]] = arith.constant 85 : index
# CHECK-NEXT: %[[MASK:.*]] = arith.shli %[[COLUMN]], %[[RX]] : index
# CHECK: %[[PART:.*]] = "tk.subtile"(%{{.*}}, %[[RY]], %{{.*}}) : {{.*}} -> !tk.st<bf16, 16 : i64, 128 : i64, "128b">
# CHECK: "tk.tma_load_multicast"(%[[PART]], {{.*}}, %[[MASK]])
# CHECK: %[[R:.*]] = "tk.cluster_ctarank"
# CHECK: %[[X:.*]] = arith.remui %[[R]], %{{.*}} : index
# CHECK: %[[C0:.*]] = arith.addi %[[X]], %{{.*}} : index
# CHECK: %[[C6:.*]] = arith.constant 6 : index
# CHECK-NEXT: %[[C3:.*]] = arith.addi %[[X]], %[[C6]] : index
# CHECK: "tk.arrive_cta"(%{{.*}}, %[[C0]])
# CHECK-COUNT-2: "tk.arrive_cta"
# CHECK-NEXT: "tk.arrive_cta"(%{{.*}}, %[[C3]])
split_rows = gemm_hopper("bf16", BM=64, BN=128, persistent=False, split=2, cluster_m=4)
