"""Fused dropout + residual + LayerNorm, forward and backward.

One row per warp as a flat vector (D/32 values a lane, 16-byte accesses).
Forward, per row: h = dropout(x) + residual (dropout: tk.rand over the
numbering of x's elements, so the backward redraws the same mask), then
y = (h - mean) * rstd * w + b; it writes y, h (the pre-norm residual the
next layer adds to) and the row's mean and rstd (for the backward). Rows are
ragged (any N): loads fill, stores clip.

Backward, per row: xhat = (h - mean) * rstd, g = w * dy,
dh = rstd * (g - xhat * mean(g * xhat) - mean(g)) + dh_next (the gradient
flowing into h from the next layer), dresidual = dh, dx = dropout's mask *
dh / (1 - p); dw and db are summed per warp over its rows (a warp takes rows
w, w + W, ... of the W warps) into a partial-sum buffer of W rows, which the
caller reduces (a [W, D] sum: W is a few hundred).
"""
from __future__ import annotations

import tkc
from tkc import bf16, f32, gl, i32, rv
from tkc.diagnostics import TkcError
from tkc.ops import load, rand, rsqrt, store, sum, where, zero


def _check_d(D: int) -> None:
    if D % 256:  # a flat vector of 8-element chunks: 16-byte accesses
        raise TkcError(f"layernorm: the row length D = {D} must be a multiple of 256")


def layernorm_fwd(D: int, dropout: bool = False, warps: int = 4):
    """x, residual, w, b: [N, D] / [D] bf16 -> y, h [N, D] bf16; mean, rstd [N] f32."""
    _check_d(D)
    def V():  # a new flat-vector handle (load/zero/rand bind and return their destination)
        return rv(f32, D, "flat")

    @tkc.kernel(name=f"layernorm_fwd_{D}{'_dropout' if dropout else ''}", warps=warps,
                grid=lambda x, res, w, b, y, h, mean, rstd, p, eps, seed, offset:
                (tkc.cdiv(x.r, warps), 1))
    def fwd(x: gl(bf16, 1, 1, "N", D), res: gl(bf16, 1, 1, "N", D), w: gl(bf16, 1, 1, 1, D),
            b: gl(bf16, 1, 1, 1, D), y: gl(bf16, 1, 1, "N", D), h: gl(bf16, 1, 1, "N", D),
            mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"),
            p: f32, eps: f32, seed: i32, offset: i32):
        row = tkc.block_idx.x * warps + tkc.warpid()
        v = load(V(), x, (0, 0, row, 0), fill=0.0)
        if dropout:
            v = where(rand(V(), seed, offset, row * D) < p, 0.0, v * (1.0 / (1.0 - p)))
        v = v + load(V(), res, (0, 0, row, 0), fill=0.0)
        store(h, v, (0, 0, row, 0), clip=True)
        mu = sum(v) * (1.0 / D)
        d = v - mu
        r = rsqrt(sum(d * d) * (1.0 / D) + eps)
        out = d * r * load(V(), w, (0, 0, 0, 0)) + load(V(), b, (0, 0, 0, 0))
        store(y, out, (0, 0, row, 0), clip=True)
        store(mean, mu, at=(0, 0, 0, row), clip=True)
        store(rstd, r, at=(0, 0, 0, row), clip=True)

    return fwd


def layernorm_bwd(D: int, dropout: bool = False, warps: int = 4):
    """dy, dh_next, h: [N, D] bf16; w [D]; mean, rstd [N] -> dx, dres [N, D] bf16 and
    per-warp partial sums dw_part, db_part [W, D] f32 (W = grid x warps rows)."""
    _check_d(D)
    def V():
        return rv(f32, D, "flat")

    @tkc.kernel(name=f"layernorm_bwd_{D}{'_dropout' if dropout else ''}", warps=warps,
                grid=lambda dy, dhn, h, w, mean, rstd, dx, dres, dw, db, p, seed, offset:
                (dw.r // warps, 1))
    def bwd(dy: gl(bf16, 1, 1, "N", D), dhn: gl(bf16, 1, 1, "N", D), h: gl(bf16, 1, 1, "N", D),
            w: gl(bf16, 1, 1, 1, D), mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"),
            dx: gl(bf16, 1, 1, "N", D), dres: gl(bf16, 1, 1, "N", D),
            dw: gl(f32, 1, 1, "W", D), db: gl(f32, 1, 1, "W", D), p: f32, seed: i32, offset: i32):
        me = tkc.block_idx.x * warps + tkc.warpid()
        wv = load(V(), w, (0, 0, 0, 0))
        acc_w, acc_b = zero(V()), zero(V())
        for row in tkc.range(me, dy.r, tkc.grid_dim.x * warps):
            g = load(V(), dy, (0, 0, row, 0))
            r = load(f32, rstd, at=(0, 0, 0, row), fill=0.0)
            xhat = (load(V(), h, (0, 0, row, 0)) - load(f32, mean, at=(0, 0, 0, row), fill=0.0)) * r
            acc_w = acc_w + g * xhat
            acc_b = acc_b + g
            gw = g * wv
            c1, c2 = sum(gw * xhat) * (1.0 / D), sum(gw) * (1.0 / D)
            dh = (gw - xhat * c1 - c2) * r + load(V(), dhn, (0, 0, row, 0))
            store(dres, dh, (0, 0, row, 0))
            if dropout:
                dh = where(rand(V(), seed, offset, row * D) < p, 0.0, dh * (1.0 / (1.0 - p)))
            store(dx, dh, (0, 0, row, 0))
        store(dw, acc_w, (0, 0, me, 0))
        store(db, acc_b, (0, 0, me, 0))

    return bwd
