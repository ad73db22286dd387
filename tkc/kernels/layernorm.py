"""Fused dropout + residual + LayerNorm (and RMSNorm), forward and backward.

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
only feeds the norm) and no dresidual. dw and db are summed per block over
its rows into one row of a partial-sum buffer per block, which the caller
reduces (a [blocks, D] sum: a few hundred rows).

RMSNorm (kind "rms", tkc/kernels/rmsnorm.py) is the same code without the
mean and b: y = h * rstd * w, rstd = rsqrt(mean(h^2) + eps),
dh = rstd * (g - xhat * mean(g * xhat)) + dh_next, xhat = h * rstd.

Two shapes of kernel, chosen per D (`split_at`):

- one warp a row (D <= split_at): the row is a flat vector of D/32 values a
  lane (16-byte accesses), `warps` rows a block. The backward's warps take
  rows w, w + W, ... (W warps in the grid), sum dw/db in registers and then
  per block through shared memory (warps * D f32 a sum).
- a row split over S warps (D > split_at): one block of S warps a row, warp
  s holding columns s*L .. s*L + L - 1 (L = D / S rounded up to 256; the last
  pieces ragged when 256 * S does not divide D), lane_values = L/32 values a
  lane. The row's sums go through shared memory (one 32-float piece a warp,
  tk.sync). The forward runs one row a block (grid: N blocks); the backward's
  blocks loop over rows b, b + B, ... (B = the partial sums' rows) and keep
  dw/db in shared memory (8 * D bytes; each warp updates its own columns,
  no synchronisation), written to the block's row of the partial sums at
  the end. Arguments, partial-sum shape and grid rule are the same as the
  one-warp kernels'; only the block size (S warps, not `warps`) differs.

The switch point: the one-warp kernels keep about 3 (forward) and 7
(backward) vectors of D/32 f32 values a lane live; at D 1024 the backward
takes 197-242 registers and at 2048 it spills, the forward 62-96 at 1024,
128-168 at 2048 and spills from 4096 (ptxas, sm_90a). So the forward splits
above 2048 and the backward above 1024 (SPLIT_AT). A split row takes 32
values a lane (LANE_VALUES; D / 1024 warps a row) up to 16 warps (ROW_WARPS;
D 16384), then more values a lane: 32 warps would cap a thread at 64
registers. The values a lane (LANE_VALUES) were measured on the H200 (kernel
time, CUDA graph, N 8192 x D 8192): the forward 115 / 101 / 76 µs at 16 /
32 / 64 a lane (fewer threads a row, so more rows in flight an SM; a copy
65, F.layer_norm 117), the backward 205 / 142 / 160 (aten's 258); at D 4096
(N 16384) 16 / 32 gave the forward 91 / 75 and the backward 151 / 154.
BENCHMARKS.md, session 9. These are the defaults: which values a lane
tkc.layer_norm and tkc.rms_norm run is tuned data per GPU and D bucket
(tkc/torchops/norm_tuned.py; a tuned value is passed as lane_values). With
dropout, 16 (DROPOUT_LANE_VALUES), a register limit, not a choice: at 32 the
D 8192 LayerNorm backward and RMSNorm forward spill 16 bytes. A block
issues all of its row's loads at once (a 16384 row: 64 KB of x and residual
in flight an SM), and the shared memory of the backward's sums (128 KB at
16384) leaves room for one such block an SM.
"""
from __future__ import annotations

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, i32, rv, sv
from tkc.diagnostics import TkcError
from tkc.ops import fill, iota, load, rand, rsqrt, store, sum, where, zero

# The dropout's Philox seed and offset, i32 [2] on the device (a graph-safe generator's draw:
# a captured graph's replays and a compiled graph's calls each get new ones; torchops/norms.py)
PHILOX = gl(i32, 1, 1, 1, 2)
# Read from memory, the seed is a register across the backward's row loop, where it was a
# launch argument read from the constant bank: at D 4096 without a residual (16 values a lane,
# 8 warps, 80 registers) ptxas 13.0 keeps it in local memory, stored once and reloaded a row
# (4 bytes; reading only the seed left the same). The split norms spilling slightly measured
# no slower (docs/kernels.md)
DROPOUT_BWD_SPILLS = 8

# Limits of registers (ptxas, sm_90a), not tuning choices:
SPLIT_AT = {"fwd": 2048, "bwd": 1024}  # the largest D a single warp holds a row for (above: spills)
DROPOUT_LANE_VALUES = 16  # a split row's values a lane with dropout, whose random numbers take registers (32: spills)
ROW_WARPS = 16       # the most warps a row (512 threads: 128 registers), more values a lane beyond
# The default (tuned per GPU: tkc/torchops/norm_tuned.py): a split row's values a lane, at least
LANE_VALUES = {"fwd": 64, "bwd": 32}
# What tuning chooses from: None (the rule above) or a split at that many values a lane (64 won
# no key on the H200: measured at N 16384, D 1024-16384, 2026-11-29)
LANE_CHOICES = (None, 8, 16, 32)


def split_args(lane_values: int | None) -> dict:
    """The builders' split arguments of a lane choice (None: the rule)."""
    return {} if lane_values is None else {"split_at": 0, "lane_values": lane_values}


def lane_choices(kind: str, D: int, dropout: bool) -> list:
    """The LANE_CHOICES a row of D can take: a split over at most ROW_WARPS
    warps (no table picked more, H200 or H100, and at 32 warps, 64 registers
    a thread, the backward at D 16384 spilled 4-56 B), at most
    DROPOUT_LANE_VALUES a lane with dropout; a backward of D <=
    SPLIT_AT keeps one warp a row (its split kernels' per-block partial sums
    are not the one-warp kernels', so tuning could not check one against the
    other)."""
    out = []
    for v in LANE_CHOICES:
        if v is not None:
            if (dropout and v > DROPOUT_LANE_VALUES) or (kind == "bwd" and D <= SPLIT_AT["bwd"]):
                continue
            try:
                if row_split(D, kind, **split_args(v))[0] > ROW_WARPS:
                    continue
            except TkcError:  # more warps a row than a block has
                continue
        out.append(v)
    return out


def _check_d(D: int, what: str = "layernorm") -> None:
    if D % 256:  # a flat vector of 8-element chunks: 16-byte accesses
        raise TkcError(f"{what}: the row length D = {D} must be a multiple of 256")


def _name(kind: str, D: int, dropout: bool, residual: bool, norm: str = "layernorm", S: int = 0) -> str:
    return (f"{norm}_{kind}_{D}{'_dropout' if dropout else ''}{'' if residual else '_nores'}"
            f"{f'_split{S}' if S else ''}")


def row_split(D: int, kind: str, split_at: int | None = None, lane_values: int | None = None,
              dropout: bool = False):
    """(S, L): the warps a row is split over (0: one warp a row) and the columns
    each holds (L = D for one warp)."""
    if D <= (SPLIT_AT[kind] if split_at is None else split_at):
        return 0, D
    if lane_values is None:  # LANE_VALUES a lane, more where a row would need more than ROW_WARPS
        least = DROPOUT_LANE_VALUES if dropout else LANE_VALUES[kind]
        lane_values = max(least, -(-D // (256 * ROW_WARPS)) * 8)
    if lane_values % 8 or lane_values <= 0:
        raise TkcError(f"lane_values must be a positive multiple of 8, got {lane_values}")
    n = D // 256                                  # 256-column pieces (8 a lane, 16 bytes)
    per = -(-n // -(-D // (32 * lane_values)))    # pieces a warp
    S = -(-n // per)
    if S > 32:
        raise TkcError(f"a row of D = {D} at {lane_values} values a lane needs {S} warps "
                       "(at most 32 a block): raise lane_values")
    return S, per * 256


def _row_ops(D: int, S: int, L: int, dropout: bool):
    """The per-row helpers of both kernels: a warp's piece of a row (the whole
    row for one warp a row), stores of it, dropout, block sums."""
    ragged = S * L > D

    def V():  # a new flat-vector handle (load/zero/rand bind and return their destination)
        return rv(f32, L, "flat")

    def piece(g, row, col, fill=False):  # columns col*L.. of row of g
        if ragged:
            return load(V(), g, at=(0, 0, row, col * L), fill=0.0)
        if fill:
            return load(V(), g, (0, 0, row, col), fill=0.0)
        return load(V(), g, (0, 0, row, col))

    def put(g, v, row, col, clip=False):
        if ragged:
            store(g, v, at=(0, 0, row, col * L), clip=True)
        elif clip:
            store(g, v, (0, 0, row, col), clip=True)
        else:
            store(g, v, (0, 0, row, col))

    def drop(v, u, p):  # dropout of v by the numbers u
        return where(u < p, 0.0, v * (1.0 / (1.0 - p)))

    def draw(philox, row, col):  # the dropout numbers of the piece: seed and offset read from philox
        seed, offset = (load(i32, philox, at=(0, 0, 0, i), fill=0) for i in (0, 1))
        return rand(V(), seed, offset, row * D if not S else row * D + col * L)

    def inside(v, col):  # v, zero past the row's end (ragged pieces only)
        return where(iota(V(), 0, start=col * L) >= float(D), 0.0, v) if ragged else v

    def totals(red, xs, at=0):  # the sums over the block's warps of each warp's scalars xs
        if not S:  # (red: 32 floats a warp and sum, from piece `at` on)
            return xs
        for i, x in enumerate(xs):
            store(red, fill(rv(f32, 32, "flat"), x), ((at + i) * S + tkc.warpid(),))
        tkc.sync()
        return [sum(load(rv(f32, 32 * S, "flat"), red, (at + i,))) * (1.0 / 32) for i in range(len(xs))]

    return V, piece, put, drop, draw, inside, totals


def norm_fwd(D: int, dropout: bool = False, warps: int = 4, residual: bool = True, rms: bool = False,
             split_at: int | None = None, lane_values: int | None = None):
    """The forward of LayerNorm (rms=False) or RMSNorm: see layernorm_fwd, rmsnorm_fwd."""
    norm = "rmsnorm" if rms else "layernorm"
    _check_d(D, norm)
    S, L = row_split(D, "fwd", split_at, lane_values, dropout)
    V, piece, put, drop, draw, inside, totals = _row_ops(D, S, L, dropout)
    rows = warps if not S else 1  # rows a block

    def dropped(x, row, col, p, philox):  # dropout(x) of the row
        v = piece(x, row, col, fill=not S)
        if dropout:
            v = drop(v, draw(philox, row, col), p)
        return v

    def normalise(v, w, b, y, mean, rstd, row, col, eps):  # y of the row v, and its statistics
        red = sv(f32, 64 * S) if S else None
        if rms:
            mu, d = None, v
            r = rsqrt(totals(red, [sum(v * v)])[0] * (1.0 / D) + eps)
        else:
            mu = totals(red, [sum(v)])[0] * (1.0 / D)
            d = inside(v - mu, col)
            r = rsqrt(totals(red, [sum(d * d)], at=1)[0] * (1.0 / D) + eps)
        # w and b loaded after the statistics: live across them they cost two more
        # vectors of registers (a 16384 row at 64 a lane: 176 registers, one block an SM)
        wv = piece(w, 0, col)
        bv = piece(b, 0, col) if b is not None else None
        out = d * r * wv + bv if bv is not None else d * r * wv
        put(y, out, row, col, clip=not S)
        if S:
            with tkc.if_(tkc.warpid() == 0):
                stats(mean, mu, rstd, r, row)
        else:
            stats(mean, mu, rstd, r, row)

    def stats(mean, mu, rstd, r, row):
        if mean is not None:
            store(mean, mu, at=(0, 0, 0, row), clip=True)
        store(rstd, r, at=(0, 0, 0, row), clip=True)

    def here():  # (row, col) of the calling warp
        if S:
            return tkc.block_idx.x, tkc.warpid()
        return tkc.block_idx.x * warps + tkc.warpid(), 0

    name = _name("fwd", D, dropout, residual, norm, S)
    deco = dict(name=name, warps=S or warps)
    if rms and residual:
        @tkc.kernel(**deco, grid=lambda x, res, w, y, h, rstd, philox, p, eps:
                    (tkc.cdiv(x.r, rows), 1))
        def rms_fwd(x: gl(bf16, 1, 1, "N", D), res: gl(bf16, 1, 1, "N", D), w: gl(bf16, 1, 1, 1, D),
                    y: gl(bf16, 1, 1, "N", D), h: gl(bf16, 1, 1, "N", D), rstd: gl(f32, 1, 1, 1, "N"),
                    philox: PHILOX, p: f32, eps: f32):
            row, col = here()
            v = dropped(x, row, col, p, philox) + piece(res, row, col, fill=not S)
            put(h, v, row, col, clip=not S)
            normalise(v, w, None, y, None, rstd, row, col, eps)

        return rms_fwd
    if rms:
        @tkc.kernel(**deco, grid=lambda x, w, y, rstd, philox, p, eps: (tkc.cdiv(x.r, rows), 1))
        def rms_fwd_nores(x: gl(bf16, 1, 1, "N", D), w: gl(bf16, 1, 1, 1, D), y: gl(bf16, 1, 1, "N", D),
                          rstd: gl(f32, 1, 1, 1, "N"), philox: PHILOX, p: f32, eps: f32):
            row, col = here()
            normalise(dropped(x, row, col, p, philox), w, None, y, None, rstd, row, col, eps)

        return rms_fwd_nores
    if residual:
        @tkc.kernel(**deco, grid=lambda x, res, w, b, y, h, mean, rstd, philox, p, eps:
                    (tkc.cdiv(x.r, rows), 1))
        def fwd(x: gl(bf16, 1, 1, "N", D), res: gl(bf16, 1, 1, "N", D), w: gl(bf16, 1, 1, 1, D),
                b: gl(bf16, 1, 1, 1, D), y: gl(bf16, 1, 1, "N", D), h: gl(bf16, 1, 1, "N", D),
                mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"),
                philox: PHILOX, p: f32, eps: f32):
            row, col = here()
            v = dropped(x, row, col, p, philox) + piece(res, row, col, fill=not S)
            put(h, v, row, col, clip=not S)
            normalise(v, w, b, y, mean, rstd, row, col, eps)

        return fwd

    @tkc.kernel(**deco, grid=lambda x, w, b, y, mean, rstd, philox, p, eps: (tkc.cdiv(x.r, rows), 1))
    def fwd_nores(x: gl(bf16, 1, 1, "N", D), w: gl(bf16, 1, 1, 1, D), b: gl(bf16, 1, 1, 1, D),
                  y: gl(bf16, 1, 1, "N", D), mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"),
                  philox: PHILOX, p: f32, eps: f32):
        row, col = here()
        normalise(dropped(x, row, col, p, philox), w, b, y, mean, rstd, row, col, eps)

    return fwd_nores


def norm_bwd(D: int, dropout: bool = False, warps: int = 4, residual: bool = True, rms: bool = False,
             split_at: int | None = None, lane_values: int | None = None):
    """The backward of LayerNorm (rms=False) or RMSNorm: see layernorm_bwd, rmsnorm_bwd."""
    norm = "rmsnorm" if rms else "layernorm"
    _check_d(D, norm)
    S, L = row_split(D, "bwd", split_at, lane_values, dropout)
    V, piece, put, drop, draw, inside, totals = _row_ops(D, S, L, dropout)
    q = D // warps  # one warp a row: the columns each warp sums over the block's warps

    def row_grads(row, col, g, v, w, wv, mean, rstd, p, philox, red, dhn, dres, dx, accumulate):
        """dx (and dres) of one row (a warp's piece of it); accumulate(g, xhat)
        adds to dw/db; red: the block sums' buffer (split rows)."""
        u = None
        if dropout and not (S and residual):  # (split rows draw late: fewer live registers)
            u = draw(philox, row, col)
            if not residual:  # h = dropout(x), redrawn
                v = drop(v, u, p)
        r = load(f32, rstd, at=(0, 0, 0, row), fill=0.0)
        xhat = v * r if rms else (v - load(f32, mean, at=(0, 0, 0, row), fill=0.0)) * r
        accumulate(g, xhat)
        gw = g * (wv if wv is not None else piece(w, 0, col))  # split: w a row at a time (L1/L2)
        if rms:
            c1 = totals(red, [sum(gw * xhat)])[0] * (1.0 / D)
            dh = (gw - xhat * c1) * r
        elif S:
            c1, c2 = (c * (1.0 / D) for c in totals(red, [sum(gw * xhat), sum(gw)]))
            dh = (gw - xhat * c1 - c2) * r
        else:
            c1, c2 = sum(gw * xhat) * (1.0 / D), sum(gw) * (1.0 / D)
            dh = (gw - xhat * c1 - c2) * r
        if S:
            tkc.sync()  # every warp has read red before the next row writes it
        if u is None and dropout:
            u = draw(philox, row, col)
        if dhn is not None:
            dh = dh + piece(dhn, row, col)
        if dres is not None:
            put(dres, dh, row, col)
        if dropout:
            dh = drop(dh, u, p)
        put(dx, dh, row, col)

    def grads(dy, h, w, mean, rstd, dx, dw, db, p, philox, dhn=None, dres=None):
        outs = (dw,) if rms else (dw, db)
        if S:
            return split_grads(dy, h, w, mean, rstd, dx, outs, p, philox, dhn, dres)
        me = tkc.block_idx.x * warps + tkc.warpid()
        wv = load(V(), w, (0, 0, 0, 0))
        accs = [zero(V()) for _ in outs]

        def accumulate(g, xhat):
            accs[0] = accs[0] + g * xhat
            if not rms:
                accs[1] = accs[1] + g

        for row in tkc.range(me, dy.r, tkc.grid_dim.x * warps):
            g, v = load(V(), dy, (0, 0, row, 0)), load(V(), h, (0, 0, row, 0))
            row_grads(row, 0, g, v, w, wv, mean, rstd, p, philox, None, dhn, dres, dx, accumulate)
        for acc, out in zip(accs, outs):  # the block's sum: warp w sums columns w*q..
            part = sv(f32, warps * D)
            store(part, acc, (tkc.warpid(),))
            tkc.sync()
            s = load(rv(f32, q, "flat"), part, (tkc.warpid(),))
            for i in range(1, warps):
                s = s + load(rv(f32, q, "flat"), part, (i * warps + tkc.warpid(),))
            store(out, s, (0, 0, tkc.block_idx.x, tkc.warpid()))

    def split_grads(dy, h, w, mean, rstd, dx, outs, p, philox, dhn, dres):
        col = tkc.warpid()
        red = sv(f32, 64 * S)
        accs = [sv(f32, S * L) for _ in outs]  # the block's dw (db) sums; warp s owns piece s
        for acc in accs:
            store(acc, zero(V()), (col,))

        def accumulate(g, xhat):
            for acc, x in zip(accs, (g * xhat, g)):
                store(acc, load(V(), acc, (col,)) + x, (col,))

        for row in tkc.range(tkc.block_idx.x, dy.r, tkc.grid_dim.x):
            g, v = piece(dy, row, col), piece(h, row, col)
            row_grads(row, col, g, v, w, None, mean, rstd, p, philox, red, dhn, dres, dx, accumulate)
        for acc, out in zip(accs, outs):
            put(out, load(V(), acc, (col,)), tkc.block_idx.x, col)

    name = _name("bwd", D, dropout, residual, norm, S)
    deco = dict(name=name, warps=S or warps, spills=DROPOUT_BWD_SPILLS if dropout else 0)
    if rms:
        return _rms_bwd_kernel(D, dropout, residual, deco, grads)
    if residual and dropout:
        @tkc.kernel(**deco,
                    grid=lambda dy, dhn, h, w, mean, rstd, dx, dres, dw, db, philox, p: (dw.r, 1))
        def bwd(dy: gl(bf16, 1, 1, "N", D), dhn: gl(bf16, 1, 1, "N", D), h: gl(bf16, 1, 1, "N", D),
                w: gl(bf16, 1, 1, 1, D), mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"),
                dx: gl(bf16, 1, 1, "N", D), dres: gl(bf16, 1, 1, "N", D),
                dw: gl(f32, 1, 1, "W", D), db: gl(f32, 1, 1, "W", D), philox: PHILOX, p: f32):
            grads(dy, h, w, mean, rstd, dx, dw, db, p, philox, dhn=dhn, dres=dres)

        return bwd
    if residual:  # dresidual = dx
        @tkc.kernel(**deco, grid=lambda dy, dhn, h, w, mean, rstd, dx, dw, db, philox, p: (dw.r, 1))
        def bwd(dy: gl(bf16, 1, 1, "N", D), dhn: gl(bf16, 1, 1, "N", D), h: gl(bf16, 1, 1, "N", D),
                w: gl(bf16, 1, 1, 1, D), mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"),
                dx: gl(bf16, 1, 1, "N", D),
                dw: gl(f32, 1, 1, "W", D), db: gl(f32, 1, 1, "W", D), philox: PHILOX, p: f32):
            grads(dy, h, w, mean, rstd, dx, dw, db, p, philox, dhn=dhn)

        return bwd

    @tkc.kernel(**deco, grid=lambda dy, x, w, mean, rstd, dx, dw, db, philox, p: (dw.r, 1))
    def bwd_nores(dy: gl(bf16, 1, 1, "N", D), x: gl(bf16, 1, 1, "N", D), w: gl(bf16, 1, 1, 1, D),
                  mean: gl(f32, 1, 1, 1, "N"), rstd: gl(f32, 1, 1, 1, "N"), dx: gl(bf16, 1, 1, "N", D),
                  dw: gl(f32, 1, 1, "W", D), db: gl(f32, 1, 1, "W", D), philox: PHILOX, p: f32):
        grads(dy, x, w, mean, rstd, dx, dw, db, p, philox)

    return bwd_nores


def _rms_bwd_kernel(D, dropout, residual, deco, grads):
    """RMSNorm's backward kernels: LayerNorm's arguments less mean and db."""
    if residual and dropout:
        @tkc.kernel(**deco, grid=lambda dy, dhn, h, w, rstd, dx, dres, dw, philox, p: (dw.r, 1))
        def rms_bwd(dy: gl(bf16, 1, 1, "N", D), dhn: gl(bf16, 1, 1, "N", D), h: gl(bf16, 1, 1, "N", D),
                    w: gl(bf16, 1, 1, 1, D), rstd: gl(f32, 1, 1, 1, "N"), dx: gl(bf16, 1, 1, "N", D),
                    dres: gl(bf16, 1, 1, "N", D), dw: gl(f32, 1, 1, "W", D), philox: PHILOX, p: f32):
            grads(dy, h, w, None, rstd, dx, dw, None, p, philox, dhn=dhn, dres=dres)

        return rms_bwd
    if residual:
        @tkc.kernel(**deco, grid=lambda dy, dhn, h, w, rstd, dx, dw, philox, p: (dw.r, 1))
        def rms_bwd(dy: gl(bf16, 1, 1, "N", D), dhn: gl(bf16, 1, 1, "N", D), h: gl(bf16, 1, 1, "N", D),
                    w: gl(bf16, 1, 1, 1, D), rstd: gl(f32, 1, 1, 1, "N"), dx: gl(bf16, 1, 1, "N", D),
                    dw: gl(f32, 1, 1, "W", D), philox: PHILOX, p: f32):
            grads(dy, h, w, None, rstd, dx, dw, None, p, philox, dhn=dhn)

        return rms_bwd

    @tkc.kernel(**deco, grid=lambda dy, x, w, rstd, dx, dw, philox, p: (dw.r, 1))
    def rms_bwd_nores(dy: gl(bf16, 1, 1, "N", D), x: gl(bf16, 1, 1, "N", D), w: gl(bf16, 1, 1, 1, D),
                      rstd: gl(f32, 1, 1, 1, "N"), dx: gl(bf16, 1, 1, "N", D), dw: gl(f32, 1, 1, "W", D),
                      philox: PHILOX, p: f32):
        grads(dy, x, w, None, rstd, dx, dw, None, p, philox)

    return rms_bwd_nores


def layernorm_fwd(D: int, dropout: bool = False, warps: int = 4, residual: bool = True,
                  split_at: int | None = None, lane_values: int | None = None):
    """x, residual, w, b: [N, D] / [D] bf16 -> y, h [N, D] bf16; mean, rstd [N] f32;
    philox (i32 [2] on the device: the dropout's seed and offset), then
    scalars p, eps. residual=False: no residual in, no h out
    (x, w, b -> y, mean, rstd). D <= split_at (default SPLIT_AT["fwd"]): one
    warp a row, `warps` rows a block, grid cdiv(N, warps). Larger D: a row
    over S warps (row_split; lane_values a lane), one row a block, grid N,
    block S warps (`warps` unused); the same arguments."""
    return norm_fwd(D, dropout, warps, residual, False, split_at, lane_values)


def layernorm_bwd(D: int, dropout: bool = False, warps: int = 4, residual: bool = True,
                  split_at: int | None = None, lane_values: int | None = None):
    """dy, dh_next, h: [N, D] bf16; w [D]; mean, rstd [N] -> dx (and with dropout
    dres) [N, D] bf16 and per-block partial sums dw_part, db_part [blocks, D] f32;
    philox as the forward's, scalar p. residual=False: dy, x, w, mean, rstd -> dx and the
    partial sums. The grid is (blocks, 1), blocks = the partial sums' rows
    (any number >= 1; each block loops over its rows), for either shape of
    kernel; block: `warps` warps (D <= split_at, default SPLIT_AT["bwd"]) or
    S warps of a split row (row_split), with 8 * D + 256 * S bytes of shared
    memory, so one block of a 16384 row an SM: launch blocks = a multiple of
    the SMs."""
    return norm_bwd(D, dropout, warps, residual, False, split_at, lane_values)
