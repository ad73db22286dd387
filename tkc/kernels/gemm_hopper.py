"""Hopper GEMM: TMA loads into swizzled shared tiles, warpgroup wgmma.

C = A @ B with A (M x K), B (K x N) bf16, f32 accumulation. One warpgroup
(4 warps) per block computes a BM x BN tile, BM = 64 (the wgmma M); each
warp holds 16 rows of it as an rt<f32, 16, BN>. Each K step, warp 0 issues
TMA loads of A and B into 128-byte-swizzled shared tiles completing on an
mbarrier; all warps wait for the phase, then the warpgroup multiplies
straight from shared memory. One stage, no pipelining yet: the baseline
the producer/consumer version is measured against.
"""
from __future__ import annotations

import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import zero


def gemm_hopper(out_dtype: str = bf16, BN: int = 256, BK: int = 64):
    BM = 64

    @tkc.kernel(name=f"gemm_hopper_{out_dtype}_{BM}x{BN}x{BK}", warps=4,
                grid=lambda a, b, c: (c.c // BN, c.r // BM))
    def gemm_hopper_kernel(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"),
                           c: gl(out_dtype, 1, 1, "M", "N")):
        bn, bm = tkc.block_idx.x, tkc.block_idx.y
        w = tkc.warpid()
        a_s = st(bf16, BM, BK)
        b_s = st(bf16, BK, BN)
        bar = tkc.barrier(count=1)
        acc = zero(rt(f32, 16, BN))
        for k in tkc.range(a.c // BK):
            with tkc.if_(w == 0):
                tma.expect(bar, a_s, b_s)
                tma.load_async(a_s, a, (0, 0, bm, k), bar)
                tma.load_async(b_s, b, (0, 0, k, bn), bar)
            tkc.wait(bar, k % 2)
            warpgroup.mma_AB(acc, a_s, b_s)
            warpgroup.mma_async_wait(acc)
            tkc.sync()  # every warp is done reading a_s, b_s before the next load
        warpgroup.store(c, acc.to(out_dtype), (0, 0, bm, bn))

    return gemm_hopper_kernel
