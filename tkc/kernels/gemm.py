"""Warp-level GEMM: C = A @ B, bf16 in, f32 accumulate, bf16 or f32 out.

A block of `warps` warps computes a BM x BN tile of C. Each K step, the
block copies a BM x BK tile of A and a BK x BN tile of B into shared memory
(coalesced 16-byte loads), then every warp reads its slab of A (row layout,
ldmatrix) and of B (col layout, ldmatrix.trans) and runs mma.sync. No
pipelining yet: this is the Ampere-style baseline the Hopper GEMM is
measured against.
"""
from __future__ import annotations

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, rt, st
from tkc.ops import group_load, load, mma_AB, store, zero


def gemm(out_dtype: str = bf16, BM: int = 128, BN: int = 128, BK: int = 32,
         WM: int = 2, WN: int = 4):
    """A (M x K) @ B (K x N) -> C (M x N); M, N, K multiples of BM, BN, BK.

    The WM x WN warps of a block each own a (BM/WM) x (BN/WN) tile of C.
    """
    TM, TN = BM // WM, BN // WN

    @tkc.kernel(name=f"gemm_{out_dtype}_{BM}x{BN}x{BK}_w{WM}x{WN}", warps=WM * WN,
                grid=lambda a, b, c: (c.c // BN, c.r // BM))
    def gemm_kernel(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"),
                    c: gl(out_dtype, 1, 1, "M", "N")):
        bn, bm = tkc.block_idx.x, tkc.block_idx.y
        w = tkc.warpid()
        wm, wn = w // WN, w % WN
        a_s = st(bf16, BM, BK)
        b_s = st(bf16, BK, BN)
        acc = zero(rt(f32, TM, TN))
        for k in tkc.range(a.c // BK):
            group_load(a_s, a, (0, 0, bm, k))
            group_load(b_s, b, (0, 0, k, bn))
            tkc.sync()
            a_r = load(rt(bf16, TM, BK), a_s, (wm, 0))
            b_r = load(rt(bf16, BK, TN, "col"), b_s, (0, wn))
            mma_AB(acc, a_r, b_r, acc)
            tkc.sync()
        store(c, acc.to(out_dtype), (0, 0, bm * WM + wm, bn * WN + wn))

    return gemm_kernel
