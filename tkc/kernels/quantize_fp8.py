"""bf16 -> e4m3 with DeepSeek's 1x128 scales: the activation side of the
block-scaled FP8 GEMM (scaled_mm_blockwise.py).

For each row m and block of 128 columns kb (x [M, K], K a multiple of 128):

    amax        = max |x[m, kb*128 : kb*128 + 128]|    (NaNs left out)
    scale[m,kb] = max(amax, 2^-100) / 448               (448: e4m3's finite max)
    q[m, k]     = satfinite(x[m, k] * (448 / max(amax, 2^-100)))

so that q * scale is x to e4m3's precision. The floor 2^-100 keeps an
all-zero block (and a block of values below it) finite: 448/amax would be
infinite, and 0 * inf NaN; such a block's q is 0 (or its tiny values
scaled up, still exact to e4m3). The multiplier is one correctly rounded
division a row (div ieee=True on the 16-row vector), the same in the
interpreter and on the GPU, so q matches bit for bit. Non-finite input:
an infinity makes its block's amax, and so its scale, infinite, its
multiplier 0, its q 0 and the infinity's own q NaN (inf * 0): the block
dequantises to NaN, never to a finite number. A NaN is left out of amax
(the GPU's max.f32 drops NaNs and numpy's max keeps them: a where before
the max makes them agree) and stays NaN in q (satfinite keeps NaN).

The scales are written transposed, s [K/128, M] (row kb holds every row's
scale of column block kb): the layout the GEMM reads a K step's 16 row
scales from as one contiguous 64-byte piece, DeepGEMM's "MN-major" scale
layout and torch._scaled_mm's BlockWise1x128 (scale [M, K/128] with
strides (1, M)).

Memory-bound: read 2 bytes, write 1 + 4/128 an element, in one pass. A warp
takes 16 rows x 128 columns in the "wide" layout (8 adjacent elements a
lane: a load instruction reads 32 bytes of each of 16 rows), a block 4 warps
down one column block (64 rows), five blocks an SM for the bytes in flight
(94 registers a lane; 5 measured 3% faster than 4 on the H200, 6 spills).
q's stores are 16 bytes a lane (the two lanes of a row trade halves: whole
32-byte sectors; stored as held, 8 bytes a lane, they half-filled each
sector and the kernel ran at half a copy's bandwidth). Rows past M read 0
(fill); q's rows are padded to a multiple of ROWS (the op allocates them
and returns the first M); the scales' store clips at M.
"""
from __future__ import annotations

import tkc.dsl as tkc
from tkc.dsl import bf16, f8e4m3, f32, gl, rt, rv
from tkc.ops import abs, div, fill, load, max, mul_row, row_max, store, where

BLOCK = 128           # the columns a scale covers (DeepSeek's 1x128)
E4M3_MAX = 448.0
AMAX_FLOOR = 2.0 ** -100
WARPS = 4
ROWS = 16 * WARPS     # a block's rows: q's rows are padded to a multiple of this


@tkc.kernel(warps=WARPS, blocks_per_sm=5, divisible={"K": BLOCK},
            grid=lambda x, q, s: (tkc.cdiv(x.c, BLOCK), tkc.cdiv(x.r, ROWS)))
def quantize_fp8(x: gl(bf16, 1, 1, "M", "K"), q: gl(f8e4m3, 1, 1, "M", "K"), s: gl(f32, 1, 1, "KB", "M")):
    """x [M, K] bf16 -> q [MP, K] e4m3 (MP: M rounded up to ROWS), s [K/128, M] f32."""
    kb, i = tkc.block_idx.x, tkc.block_idx.y * WARPS + tkc.warpid()
    t = load(rt(bf16, 16, BLOCK, "wide"), x, (0, 0, i, kb), fill=0.0).to(f32)
    a = where(t == t, abs(t), 0.0)                 # NaN fails t == t: out of the max
    amax = max(row_max(a), AMAX_FLOOR)
    top = fill(rv(f32, 16), E4M3_MAX)
    store(q, mul_row(t, div(top, amax, ieee=True)).to(f8e4m3), (0, 0, i, kb), clip=True)
    store(s, div(amax, top, ieee=True), (0, 0, kb, i), clip=True)
