"""The grouped block-scaled FP8 GEMM for mixture-of-experts (DeepGEMM's two
layouts): each expert's rows of A times that expert's B, with the block
scales of scaled_mm_blockwise.py (whose `tile` both kernels run).

Contiguous (prefill): the rows of all experts concatenated, a [M, K], each
expert's rows padded to a multiple of 128 so that a 128-row tile belongs to
one expert; expert [M/128] int32 names each row block's expert (-1: a block
of padding only, or any index not of an expert: the block runs no K steps
and its rows of C are not written). b [E, N, K], scale_b [E, N/128, K/128].
A tile reads its expert once (a broadcast load in the producer, whose TMA
coordinates it sets, and in the consumers, whose weight scale it picks). An
expert without rows has no row blocks: nothing to do.

Masked (decode, CUDA graphs: shapes fixed, counts on the device): a [E,
max_m, K], count [E] int32 the rows of each expert in use. The grid's
(col block, row block, expert) space is ragged (tkc.kernel's ragged=): the
persistent blocks stride over the live tiles only, expert e contributing
ceil(count[e] / 128) row blocks, found on the device from count (DeepGEMM's
masked scheduler). So every block gets the floor or ceiling of live / SMs
tiles, an empty expert costs nothing but its count's load, and no tile
runs past its expert's count (the earlier grid covered every row block of
max_m, dead ones running no K steps: 0.93x a per-expert loop on an H200,
its busiest SMs 41-42 live tiles where 39 is the mean). C's row blocks
past count are not written; its rows past count inside a live block hold
whatever A's rows there give (DeepGEMM's are unspecified too).
"""

import tkc.dsl as tkc
from tkc.dsl import f8e4m3, f32, gl, i32
from tkc.ops import load, where

from .scaled_mm_blockwise import BK, BM, BN, _name, shared, tile

# The counts layout's counts are multiples of ALIGN: a tile's row scales are a run of the
# transposed scale_a's row from the tile's first row on, a TMA box whose first column must
# lie on 16 bytes (4 floats; H200: an illegal instruction otherwise, interpreter checked).
ALIGN = 4


def grouped_contiguous(out_dtype: str = "bf16", stages="auto"):
    """a gl(f8e4m3, 1, 1, M, K), b gl(f8e4m3, 1, E, N, K), scale_a gl(f32, 1, 1, K/128, M),
    scale_b gl(f32, 1, E, ceil(N/128), KBS), expert gl(i32, 1, 1, 1, M/128), c gl(out, 1, 1, M, N);
    KBS: K/128 rounded up to a multiple of 4, zeros past K/128 (TMA's 16-byte rows)."""
    def grouped(a: gl(f8e4m3, 1, 1, "M", "K"), b: gl(f8e4m3, 1, "E", "N", "K"),
                scale_a: gl(f32, 1, 1, "KB", "M"), scale_b: gl(f32, 1, "E", "NB", "KBS"),
                expert: gl(i32, 1, 1, 1, "MB"), c: gl(out_dtype, 1, 1, "M", "N")):
        bn, bm = tkc.block_idx.x, tkc.block_idx.y
        smem = shared(out_dtype)
        e = load_index(expert, bm)
        tile(smem, a, b, scale_a, scale_b, c, 0, e, bm, bn, stages, live=(e >= 0) & (e < b.d))

    return tkc.kernel(name=_name("scaled_mm_grouped_contiguous", out_dtype, stages, True), warps=8,
                      persistent=True, order="auto", divisible={"K": BK, "M": BM},
                      grid=lambda c: (tkc.cdiv(c.c, BN), tkc.cdiv(c.r, BM)))(grouped)


def grouped_masked(out_dtype: str = "bf16", stages="auto", BM: int = BM):
    """a gl(f8e4m3, 1, E, max_m, K), b gl(f8e4m3, 1, E, N, K), scale_a gl(f32, 1, E, K/128, MMS),
    scale_b gl(f32, 1, E, ceil(N/128), KBS), count gl(i32, 1, 1, 1, E), c gl(out, 1, E, max_m, N);
    MMS and KBS: max_m and K/128 rounded up to multiples of 4, zeros past them (TMA's 16-byte rows).
    BM: the tile's rows, 128 or 192 (scaled_mm_blockwise's heights); an expert has ceil(count / BM)
    row blocks."""
    def grouped(a: gl(f8e4m3, 1, "E", "MM", "K"), b: gl(f8e4m3, 1, "E", "N", "K"),
                scale_a: gl(f32, 1, "E", "KB", "MMS"), scale_b: gl(f32, 1, "E", "NB", "KBS"),
                count: gl(i32, 1, 1, 1, "E"), c: gl(out_dtype, 1, "E", "MM", "N")):
        bn, bm, e = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        smem = shared(out_dtype, BM)
        tile(smem, a, b, scale_a, scale_b, c, e, e, bm, bn, stages)   # live: ragged= gives no other

    return _over_experts("grouped_masked", grouped, out_dtype, stages, BM,
                         lambda c: (tkc.cdiv(c.c, BN), tkc.cdiv(c.r, BM), c.d))


def grouped_counts(out_dtype: str = "bf16", stages="auto", BM: int = BM):
    """a gl(f8e4m3, 1, 1, M, K), b gl(f8e4m3, 1, E, N, K), scale_a gl(f32, 1, 1, K/128, MS),
    scale_b gl(f32, 1, E, ceil(N/128), KBS), count gl(i32, 1, 1, 1, E), ends gl(i32, 1, 1, 1, E),
    c gl(out, 1, 1, M, N): the contiguous layout by counts, expert e's count[e] rows (a
    multiple of ALIGN) right after expert e - 1's, ending at row ends[e] (count's running
    sum). BM: the tile's rows, 128 or 192; an expert has ceil(count / BM) row tiles, each
    starting at a row of its own (TMA coordinates are elements: a, scale_a and c are sliced
    there; the tiles are the live ones of ragged=, so no other).

    An expert of BM rows or more has whole tiles only, which TMA stores whole: its last one
    ends at its last row, over rows its previous tile also writes (the same values: a row's
    sums do not depend on its place in a tile). An expert of fewer rows has one tile, which
    leaves from registers, clipped to the expert's rows (its TMA store aimed past C's end).
    Against 32-row TMA pieces for every tile (H200, 12-01, 16384 rows x 4096 x 7168): the
    same at BM 192, 3% faster at 128, and counts need be multiples of 4, not 32."""
    def grouped(a: gl(f8e4m3, 1, 1, "M", "K"), b: gl(f8e4m3, 1, "E", "N", "K"),
                scale_a: gl(f32, 1, 1, "KB", "MS"), scale_b: gl(f32, 1, "E", "NB", "KBS"),
                count: gl(i32, 1, 1, 1, "E"), ends: gl(i32, 1, 1, 1, "E"), c: gl(out_dtype, 1, 1, "M", "N")):
        bn, bm, e = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        n = load_index(count, e)   # the expert's rows
        whole = n >= BM            # its tiles whole, the last one ending at its last row
        row0 = load_index(ends, e) - n + where(whole, where(bm * BM + BM > n, n - BM, bm * BM), 0)
        smem = shared(out_dtype, BM)
        tile(smem, a.slice("r", row0, BM), b, scale_a.slice("c", row0, BM), scale_b, c.slice("r", row0, BM),
             0, e, 0, bn, stages, row=where(whole, 0, (c.r + BM - 1) // BM),
             clipped=(n < BM, c.slice("r", row0, n)))

    return _over_experts("grouped_counts", grouped, out_dtype, stages, BM,
                         lambda b, c: (tkc.cdiv(c.c, BN), tkc.cdiv(c.r, BM), b.d))


def _over_experts(what: str, grouped, out_dtype: str, stages, BM: int, grid):
    """The persistent kernel of `grouped` over the experts' live tiles (ragged= on its
    count argument: ceil(count / BM) row tiles an expert), BM 128 or 192 rows a tile."""
    if BM not in (128, 192):
        raise ValueError(f"{what}: BM is 128 or 192 (two or three consumer warpgroups), got {BM}")
    return tkc.kernel(name=_name(f"scaled_mm_{what}", out_dtype, stages, True, BM), warps=BM // 16,
                      persistent=True, order="auto", divisible={"K": BK}, ragged=("count", BM),
                      grid=grid)(grouped)


def load_index(g, i):
    """Element i of an i32 vector gl (0 past its end)."""
    return load(i32, g, at=(0, 0, 0, i), fill=0)
