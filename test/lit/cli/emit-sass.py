# The Hopper GEMM's SASS: warpgroup mma (HGMMA) from TMA-loaded tiles (UTMALDG),
# 4 k16 steps of a 64x256x64 block, 1 TMA for A and 4 (one per 128-byte panel) for B.
# RUN: tkc %s --emit=sass | FileCheck %s
# CHECK-COUNT-5: UTMALDG.4D
# CHECK-COUNT-4: HGMMA.64x256x16.F32.BF16
# CHECK-NOT: LDL
# CHECK-NOT: STL
from tkc.kernels.gemm_hopper import gemm_hopper

kernel = gemm_hopper("bf16")
