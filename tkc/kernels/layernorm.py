"""Fused dropout + residual + LayerNorm, forward and backward.

One row per warp as a flat vector (D/32 values a lane, 16-byte accesses).
Forward, per row: h = dropout(x) + residual (dropout: tk.rand over the
numbering of x's elements, so the backward redraws the same mask), then
y = (h - mean) * rstd * w + b; it writes y, h (the pre-norm residual the
next layer adds to) and the row's mean and rstd (for the backward). Rows are
ragged (any N): loads fill, stores clip. Without a residual
(residual=False) it reads x only and writes no h: h = dropout(x), which the
backward recomputes from x.

Backward, per row: xhat = (h - mean) * rstd, g = w * dy,
dh = rstd * (g - xhat * mean(g * xhat) - mean(g)) + dh_next (the gradient
flowing into h from the next layer), dresidual = dh, dx = dropout's mask *
dh / (1 - p). Without dropout dx is dresidual: only dx is written (as
flash-linear-attention does). Without a residual there is no dh_next (h
only feeds the norm) and no dresidual. dw and db are summed per warp over
its rows (a warp takes rows w, w + W, ... of the W warps), then per block
through shared memory into one row of a partial-sum buffer per block, which
the caller reduces (a [blocks, D] sum: a few hundred rows).
"""
from __future__ import annotations

import tkc
from tkc import bf16, f32, gl, i32, rv, sv
from tkc.diagnostics import TkcError
from tkc.ops import load, rand, rsqrt, store, sum, where, zero


def _check_d(D: int) -> None:
    if D % 256:  # a flat vector of 8-element chunks: 16-byte accesses
        raise TkcError(f"layernorm: the row length D = {D} must be a multiple of 256")


def _name(kind: str, D: int, dropout: bool, residual: bool) -> str:
    return f"layernorm_{kind}_{D}{'_dropout' if dropout else ''}{'' if residual else '_nores'}"


def layernorm_fwd(D: int, dropout: bool = False, warps: int = 4, residual: bool = True):
    """x, residual, w, b: [N, D] / [D] bf16 -> y, h [N, D] bf16; mean, rstd [N] f32.
    residual=False: no residual in, no h out (x, w, b -> y, mean, rstd)."""
    _check_d(D)

    def V():  # a new flat-vector handle (load/zero/rand bind and return their destination)
        return rv(f32, D, "flat")

    def dropped(x, row, p, seed, offset):  # dropout(x) of the row
        v = load(V(), x, (0, 0, row, 0), fill=0.0)
        if dropout:
            v = where(rand(V(), seed, offset, row * D) < p, 0.0, v * (1.0 / (1.0 - p)))
        return v

    def normalise(v, w, b, y, mean, rstd, row, eps):  # y of the row v, and its statistics
        wv, bv = load(V(), w, (0, 0, 0, 0)), load(V(), b, (0, 0, 0, 0))
        mu = sum(v) * (1.0 / D)
        d = v - mu
        r = rsqrt(sum(d * d) * (1.0 / D) + eps)
        out = d * r * wv + bv
        store(y, out, (0, 0, row, 0), clip=True)
        store(mean, mu, at=(0, 0, 0, row), clip=True)
        store(rstd, r, at=(0, 0, 0, row), clip=True)

    name = _name("fwd", D, dropout, residual)
    if residual:
        @tkc.kernel(name=name, warps=warps,
                    grid=lambda x, res, w, b, y, h, mean, rstd, p, eps, seed, offset:
                    (tkc.cdiv(x.r, warps), 1))
        def fwd(x: gl(bf16, 1, 1, "N", D), res: gl(bf16, 1, 1, "N", D), w: gl(bf16, 1, 1, 1, D),
                b: gl(bf16, 1, 1, 1, D), y: gl(bf16, 1, 1, "N", D), h: gl(bf16, 1, 1, "N", D),
                mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"),
                p: f32, eps: f32, seed: i32, offset: i32):
            row = tkc.block_idx.x * warps + tkc.warpid()
            v = dropped(x, row, p, seed, offset) + load(V(), res, (0, 0, row, 0), fill=0.0)
            store(h, v, (0, 0, row, 0), clip=True)
            normalise(v, w, b, y, mean, rstd, row, eps)

        return fwd

    @tkc.kernel(name=name, warps=warps,
                grid=lambda x, w, b, y, mean, rstd, p, eps, seed, offset: (tkc.cdiv(x.r, warps), 1))
    def fwd_nores(x: gl(bf16, 1, 1, "N", D), w: gl(bf16, 1, 1, 1, D), b: gl(bf16, 1, 1, 1, D),
                  y: gl(bf16, 1, 1, "N", D), mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"),
                  p: f32, eps: f32, seed: i32, offset: i32):
        row = tkc.block_idx.x * warps + tkc.warpid()
        normalise(dropped(x, row, p, seed, offset), w, b, y, mean, rstd, row, eps)

    return fwd_nores


def layernorm_bwd(D: int, dropout: bool = False, warps: int = 4, residual: bool = True):
    """dy, dh_next, h: [N, D] bf16; w [D]; mean, rstd [N] -> dx (and with dropout
    dres) [N, D] bf16 and per-block partial sums dw_part, db_part [blocks, D] f32.
    residual=False: dy, x, w, mean, rstd -> dx and the partial sums."""
    _check_d(D)
    q = D // warps  # the columns each warp sums over the block's warps

    def V():
        return rv(f32, D, "flat")

    def grads(dy, h, w, mean, rstd, dx, dw, db, p, seed, offset, dhn=None, dres=None):
        me = tkc.block_idx.x * warps + tkc.warpid()
        wv = load(V(), w, (0, 0, 0, 0))
        acc_w, acc_b = zero(V()), zero(V())
        for row in tkc.range(me, dy.r, tkc.grid_dim.x * warps):
            g, v = load(V(), dy, (0, 0, row, 0)), load(V(), h, (0, 0, row, 0))
            if dropout:
                u = rand(V(), seed, offset, row * D)
                if not residual:  # h = dropout(x), redrawn
                    v = where(u < p, 0.0, v * (1.0 / (1.0 - p)))
            r = load(f32, rstd, at=(0, 0, 0, row), fill=0.0)
            xhat = (v - load(f32, mean, at=(0, 0, 0, row), fill=0.0)) * r
            acc_w = acc_w + g * xhat
            acc_b = acc_b + g
            gw = g * wv
            c1, c2 = sum(gw * xhat) * (1.0 / D), sum(gw) * (1.0 / D)
            dh = (gw - xhat * c1 - c2) * r
            if dhn is not None:
                dh = dh + load(V(), dhn, (0, 0, row, 0))
            if dres is not None:
                store(dres, dh, (0, 0, row, 0))
            if dropout:
                dh = where(u < p, 0.0, dh * (1.0 / (1.0 - p)))
            store(dx, dh, (0, 0, row, 0))
        for acc, out in ((acc_w, dw), (acc_b, db)):  # the block's sum: warp w sums columns w*q..
            part = sv(f32, warps * D)
            store(part, acc, (tkc.warpid(),))
            tkc.sync()
            s = load(rv(f32, q, "flat"), part, (tkc.warpid(),))
            for i in range(1, warps):
                s = s + load(rv(f32, q, "flat"), part, (i * warps + tkc.warpid(),))
            store(out, s, (0, 0, tkc.block_idx.x, tkc.warpid()))

    name = _name("bwd", D, dropout, residual)
    if residual and dropout:
        @tkc.kernel(name=name, warps=warps,
                    grid=lambda dy, dhn, h, w, mean, rstd, dx, dres, dw, db, p, seed, offset: (dw.r, 1))
        def bwd(dy: gl(bf16, 1, 1, "N", D), dhn: gl(bf16, 1, 1, "N", D), h: gl(bf16, 1, 1, "N", D),
                w: gl(bf16, 1, 1, 1, D), mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"),
                dx: gl(bf16, 1, 1, "N", D), dres: gl(bf16, 1, 1, "N", D),
                dw: gl(f32, 1, 1, "W", D), db: gl(f32, 1, 1, "W", D), p: f32, seed: i32, offset: i32):
            grads(dy, h, w, mean, rstd, dx, dw, db, p, seed, offset, dhn=dhn, dres=dres)

        return bwd
    if residual:  # dresidual = dx
        @tkc.kernel(name=name, warps=warps,
                    grid=lambda dy, dhn, h, w, mean, rstd, dx, dw, db, p, seed, offset: (dw.r, 1))
        def bwd(dy: gl(bf16, 1, 1, "N", D), dhn: gl(bf16, 1, 1, "N", D), h: gl(bf16, 1, 1, "N", D),
                w: gl(bf16, 1, 1, 1, D), mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"),
                dx: gl(bf16, 1, 1, "N", D),
                dw: gl(f32, 1, 1, "W", D), db: gl(f32, 1, 1, "W", D), p: f32, seed: i32, offset: i32):
            grads(dy, h, w, mean, rstd, dx, dw, db, p, seed, offset, dhn=dhn)

        return bwd

    @tkc.kernel(name=name, warps=warps,
                grid=lambda dy, x, w, mean, rstd, dx, dw, db, p, seed, offset: (dw.r, 1))
    def bwd_nores(dy: gl(bf16, 1, 1, "N", D), x: gl(bf16, 1, 1, "N", D), w: gl(bf16, 1, 1, 1, D),
                  mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"), dx: gl(bf16, 1, 1, "N", D),
                  dw: gl(f32, 1, 1, "W", D), db: gl(f32, 1, 1, "W", D), p: f32, seed: i32, offset: i32):
        grads(dy, x, w, mean, rstd, dx, dw, db, p, seed, offset)

    return bwd_nores
