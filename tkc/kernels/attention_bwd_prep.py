"""The attention backward's preprocessing (attention_prep) and the layout of
what it writes: the statistics the backward kernel reads (lse * log2 e and
delta = rowsum(dO * O), padded to whole query tiles: stats_columns, and for
varlen each sequence from _stats_start) and the zeroed f32 dQ accumulator the
backward adds to (attention_bwd_kernel.py). _layout_dims: the gl annotations
of a layout, which both kernels take.
"""
from __future__ import annotations

import math

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, i32, rv
from tkc.diagnostics import TkcError
from tkc.ops import load, store, sum, zero

from .attention_hopper import LAYOUTS, LOG2E

WARPS_PREP = 4
# Query rows a warp of attention_prep: enough that a warp has 1 KB of O and
# dO in flight (one 128-byte row of each at D = 64 left the kernel at 47% of
# the HBM bandwidth on the H100: too few bytes in flight for its latency).
ROWS_PREP = {64: 4, 96: 2, 128: 2, 256: 1}
STATS_ALIGN = 128           # the statistics' rows: whole query tiles (attention_prep)


def _layout_dims(layout: str, D: int, dtype=bf16):
    """(q-like gl, k-like gl) annotations of a layout, in dtype (strided, as
    the forward's)."""
    if layout == "bhld":
        return gl(dtype, "B", "Hq", "Lq", D, strided=True), gl(dtype, "B", "Hkv", "Lk", D, strided=True)
    return gl(dtype, 1, 1, "Tq", "HqD", strided=True), gl(dtype, 1, 1, "Tk", "HkvD", strided=True)


def stats_columns(Lq: int, batches: int | None = None) -> int:
    """Columns of the backward's statistics (attention_prep's output) for Lq
    query rows; varlen (batches = B, Lq = Tq): each sequence starts at a
    multiple of STATS_ALIGN, at most one STATS_ALIGN after its packed row."""
    pad = -(-Lq // STATS_ALIGN) * STATS_ALIGN
    return pad if batches is None else pad + batches * STATS_ALIGN


def _stats_start(q0, b):
    """Where varlen sequence b (from packed row q0) starts in the statistics:
    FlashAttention-3's padded offsets, (q0 + b * A) rounded down to A. Each
    sequence's whole tiles end before the next's start."""
    return (q0 + b * STATS_ALIGN) // STATS_ALIGN * STATS_ALIGN


def attention_prep(D: int = 128, layout: str = "bhld"):
    """The backward's preprocessing, ROWS_PREP[D] query rows a warp (their o
    and dO rows as flat vectors, all loaded before the first sum): the
    statistics the backward reads,
    stats[b, h, 0, i] = lse * log2 e and stats[b, h, 1, i] = delta =
    sum_d dO * O, for i up to Lq rounded up to whole tiles (STATS_ALIGN:
    stats_columns), the rows past Lq +inf and 0, so that their P is 0; and
    it zeroes the backward's f32 dQ accumulator (laid out as o) row by row,
    as FlashAttention-3's preprocessing does, instead of a memset launch of
    its own. prep(o, do, lse, stats, dq) with lse [B, Hq, 1, Lq] and stats
    [B, Hq, 2, stats_columns(Lq)]; varlen: prep(o, do, lse, stats, dq, cu_q,
    max_q) with lse [1, Hq, 1, Tq] and stats [1, Hq, 2, stats_columns(Tq,
    B)], sequence b's rows at _stats_start (FlashAttention-3's padded
    offsets); rows of dq outside every sequence are not written (the
    offsets rise from 0 to Tq: tkc.attention_varlen checks them)."""
    if layout not in LAYOUTS:
        raise TkcError(f"attention backward: layout must be one of {LAYOUTS}, got {layout!r}")
    W, R = WARPS_PREP, ROWS_PREP[D]
    Q = _layout_dims(layout, D)[0]
    QF = _layout_dims(layout, D, f32)[0]

    def rows(o, do, lse, stats, dq, at, h, i0, b=0):
        """Rows i0 .. i0 + R - 1; at(i): the coordinates of row i in o, dO
        and dq. Every load is issued before the first store (which could
        alias them)."""
        ii = [i0 + r for r in range(R)]
        xs = [load(rv(f32, D, "flat"), o, at(i), fill=0.0) for i in ii]
        ys = [load(rv(f32, D, "flat"), do, at(i), fill=0.0) for i in ii]
        ls = [load(f32, lse, at=(b, h, 0, i), fill=math.inf) for i in ii]
        for i, x, y, lse_i in zip(ii, xs, ys, ls):
            store(stats, lse_i * LOG2E, at=(b, h, 0, i), clip=True)
            store(stats, sum(x * y), at=(b, h, 1, i), clip=True)
            store(dq, zero(rv(f32, D, "flat")), at(i), clip=True)

    if layout == "varlen":
        @tkc.kernel(name=f"attn_prep_d{D}_varlen", warps=W,
                    grid=lambda o, do, lse, stats, dq, cu_q, max_q:
                    (tkc.cdiv(max_q, STATS_ALIGN) * (STATS_ALIGN // (W * R)), lse.d, cu_q.c - 1))
        def prep(o: Q, do: Q, lse: gl(f32, 1, "Hq", 1, "Tq"), stats: gl(f32, 1, "Hq", 2, None), dq: QF,
                 cu_q: gl(i32, 1, 1, 1, "B1"), max_q: tkc.i32):
            i, h, b = (tkc.block_idx.x * W + tkc.warpid()) * R, tkc.block_idx.y, tkc.block_idx.z
            q0, q1 = load(i32, cu_q, at=(0, 0, 0, b), fill=0), load(i32, cu_q, at=(0, 0, 0, b + 1), fill=0)
            n = q1 - q0
            rows(o.slice("r", q0, n), do.slice("r", q0, n), lse.slice("c", q0, n),
                 stats.slice("c", _stats_start(q0, b), tkc.cdiv(n, STATS_ALIGN) * STATS_ALIGN),
                 dq.slice("r", q0, n), lambda i: (0, 0, i, h), h, i)
        return prep

    def grid(o, do, lse, stats, dq):
        return (stats.c // (W * R), stats.d, stats.b)

    @tkc.kernel(name=f"attn_prep_d{D}_{layout}", warps=W, grid=grid)
    def prep(o: Q, do: Q, lse: gl(f32, "B", "Hq", 1, "Lq"), stats: gl(f32, "B", "Hq", 2, None), dq: QF):
        i, h, b = (tkc.block_idx.x * W + tkc.warpid()) * R, tkc.block_idx.y, tkc.block_idx.z
        rows(o, do, lse, stats, dq, lambda i: (b, h, i, 0), h, i, b)

    return prep
