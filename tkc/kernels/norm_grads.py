"""The norms' weight (and bias) gradients from their backward's partial sums.

The LayerNorm and RMSNorm backwards (layernorm.py, rmsnorm.py) sum dw and db
over each block's rows into one row a block of an f32 buffer, part [planes,
P, D] (planes: dw, and db for LayerNorm; P: the backward's blocks, two an SM).
This kernel sums those P rows per plane and writes the gradients in the
weights' dtype, out [planes, D] bf16: one launch where torch took a sum, a
cast and their allocations (on autograd's backward thread, ~80 µs of host
time a LayerNorm fwd+bwd: BENCHMARKS.md). The order of the additions is
fixed (a warp's 16-row steps, then its tile's columns), so the result is
the same on every run.

A warp owns 64 columns of one plane and walks every row, 16 a step (the
last ragged: loads past P read 0); its columns' sums are one col_sum.
"""
from __future__ import annotations

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, rt
from tkc.diagnostics import TkcError
from tkc.ops import col_sum, load, store, zero

COLS = 64   # columns a warp
WARPS = 4


def norm_grads(planes: int):
    """grads(part, out): out[k, :] = sum over p of part[k, p, :], in bf16, for
    part [planes, P, D] f32 (any P; D a multiple of 8: 16-byte rows) and out
    [planes, D] bf16 (planes 1: RMSNorm's dw; 2: LayerNorm's dw, db)."""
    if planes not in (1, 2):
        raise TkcError(f"norm_grads: planes must be 1 (dw) or 2 (dw, db), got {planes!r}")

    @tkc.kernel(name=f"norm_grads_{planes}", warps=WARPS,
                grid=lambda part, out: (tkc.cdiv(part.c, COLS * WARPS), planes))
    def grads(part: gl(f32, 1, planes, "P", "D"), out: gl(bf16, 1, 1, planes, "D")):
        c, k = tkc.block_idx.x * WARPS + tkc.warpid(), tkc.block_idx.y
        acc = zero(rt(f32, 16, COLS))
        for t in tkc.range(tkc.cdiv(part.r, 16)):
            acc += load(rt(f32, 16, COLS), part, (0, k, t, c), fill=0.0)
        store(out, col_sum(acc).to(bf16), (0, 0, k, c), clip=True)
    return grads
