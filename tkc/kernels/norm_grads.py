"""The norms' weight (and bias) gradients from their backward's partial sums.

The LayerNorm and RMSNorm backwards (layernorm.py, rmsnorm.py) sum dw and db
over each block's rows into one row a block of an f32 buffer, part [planes,
P, D] (planes: dw, and db for LayerNorm; P: the backward's blocks, as many as the SMs hold).
This kernel sums those P rows per plane and writes the gradients in the
weights' dtype, out [planes, D] bf16: one launch where torch took a sum, a
cast and their allocations (on autograd's backward thread, ~80 µs of host
time a LayerNorm fwd+bwd: BENCHMARKS.md). The order of the additions is
fixed (a warp's 16-row steps, then its tile's columns), so the result is
the same on every run.

A block owns COLS columns of one plane; its WARPS warps split the rows (warp
w takes the 16-row steps w, w + WARPS, ...; the last ragged: loads past P
read 0), each summing its steps into one col_sum; the warps' sums meet in
shared memory, where warp i < COLS / 32 adds the WARPS vectors' i-th 32
columns. Many warps a block keep enough loads in flight: one warp walking
all P rows of 64 columns (16 blocks of 4 warps for a D-4096 reduction) took
33 µs on an H200 for its 17 MB, two thirds of the RMSNorm backward itself.
"""
from __future__ import annotations

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, rt, rv, sv
from tkc.diagnostics import TkcError
from tkc.ops import col_sum, load, store, zero

COLS = 64     # columns a block
WARPS = 16    # the rows' splits (a block of 512 threads)


def norm_grads(planes: int):
    """grads(part, out): out[k, :] = sum over p of part[k, p, :], in bf16, for
    part [planes, P, D] f32 (any P; D a multiple of 8: 16-byte rows) and out
    [planes, D] bf16 (planes 1: RMSNorm's dw; 2: LayerNorm's dw, db)."""
    if planes not in (1, 2):
        raise TkcError(f"norm_grads: planes must be 1 (dw) or 2 (dw, db), got {planes!r}")

    @tkc.kernel(name=f"norm_grads_{planes}", warps=WARPS,
                grid=lambda part, out: (tkc.cdiv(part.c, COLS), planes))
    def grads(part: gl(f32, 1, planes, "P", "D"), out: gl(bf16, 1, 1, planes, "D")):
        c, k, w = tkc.block_idx.x, tkc.block_idx.y, tkc.warpid()
        acc = zero(rt(f32, 16, COLS))
        for t in tkc.range(w, tkc.cdiv(part.r, 16), WARPS):
            acc += load(rt(f32, 16, COLS), part, (0, k, t, c), fill=0.0)
        sums = sv(f32, WARPS * COLS)
        store(sums, col_sum(acc), (w,))
        tkc.sync()
        pieces = COLS // 32
        with tkc.if_(w < pieces):   # warp w: columns 32w.. of the block's, over every warp's sum
            s = load(rv(f32, 32, "flat"), sums, (w,))
            for i in range(1, WARPS):
                s = s + load(rv(f32, 32, "flat"), sums, (i * pieces + w,))
            store(out, s.to(bf16), (0, 0, k, c * pieces + w), clip=True)
    return grads
