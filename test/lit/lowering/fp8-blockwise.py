# The block-scaled FP8 GEMM (tkc/kernels/scaled_mm_blockwise.py) and its
# grouped masked variant (scaled_mm_grouped.py): the producer sets the TMA
# coordinates (4-D boxes: the group is the d coordinate; A's tile, B's tile,
# the tile's row scales of the step and the 16 weight scales around it) after
# finding its live tile from the experts' counts (tk.ragged_item: a loop of
# count loads; the consumers run it too), a consumer step reads its 16 row scales (two
# floats a lane) and its weight scale (one word for every lane) from the
# ring's stage: three shared loads, no global ones, no bounds checks (TMA
# zero-filled past the scales' ends), issues the four
# k32 e4m3 wgmmas into the partial, waits, and promotes with one FFMA an
# accumulator element (64 a lane: 16 x 128 f32 over 32 lanes; the loop is
# rotated: the FFMAs of step k - 1 open the body of step k). ptxas takes it.
# RUN: tkc %s --kernel scaled_mm_blockwise_bf16_128x128x128 --emit=ptx -o %t.ptx && FileCheck %s < %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
# RUN: tkc %s --kernel scaled_mm_grouped_masked_bf16_128x128x128 --emit=ptx -o %t2.ptx && FileCheck %s --check-prefix=MASKED < %t2.ptx
# RUN: ptxas -arch=sm_90a %t2.ptx -o %t2.cubin
from tkc.kernels.scaled_mm_blockwise import scaled_mm_blockwise
from tkc.kernels.scaled_mm_grouped import grouped_masked

# CHECK-LABEL: .entry scaled_mm_blockwise_bf16_128x128x128(
# CHECK-COUNT-4: cp.async.bulk.tensor.4d
# CHECK-COUNT-64: fma.rn.f32
# CHECK: mbarrier.try_wait
# CHECK-NOT: ld.global
# CHECK-COUNT-3: ld.shared.b32
# CHECK-NOT: ld.
# CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
# CHECK: wgmma.commit_group
# CHECK: wgmma.wait_group.sync.aligned

# MASKED-LABEL: .entry scaled_mm_grouped_masked_bf16_128x128x128(
# MASKED: ld.global.b32
# MASKED-COUNT-4: cp.async.bulk.tensor.4d
# MASKED: ld.global.b32
# MASKED-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3

dense = scaled_mm_blockwise("bf16")
masked = grouped_masked("bf16")
