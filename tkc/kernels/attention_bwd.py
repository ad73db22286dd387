"""Attention backward on Hopper: dQ, dK, dV of attention_hopper's forward.

With P = softmax(S), S = Q K^T * scale (masked), the forward's log-sum-exp L
and delta = rowsum(dO * O) (the preprocessing kernel, `attention_delta`):

    P = exp(S - L)    dV = P^T dO    dP = dO V^T    dS = P * (dP - delta)
    dK = scale * dS^T Q                dQ = scale * dS K

A block owns BKV = 128 keys of one KV head: two consumer warpgroups of 64
keys each, which keep their dK and dV in registers while the block walks
every query tile that sees its keys, for every query head of the KV head's
group (GQA: dK and dV summed over the group). Q and dO stream through a ring
of stages (tk-pipeline-staging: producer warpgroup, TMA, mbarriers); per
query tile of BQ = 64 rows each warpgroup computes S = Q K^T and dP = dO V^T
for its 64 keys (wgmma from shared memory; each warp 16 query rows, so the
statistics are one value per row, read one element a lane: any Lq and any
varlen offset stay aligned), then P and dS in registers. P and dS go to
shared memory, where the three other products read them: dV += P^T dO and
dK += dS^T Q (the transposed operand from shared memory) and the block's dQ
tile dS K, half its columns per warpgroup (a column subtile of K: whole
swizzle panels, so K is 64-byte swizzled at D = 64). dQ reaches an f32
accumulator in global memory by TMA reduce-adds of a shared tile (or, with
dq="atomic", by atomic adds from registers: slower, BENCHMARKS.md). Causal
blocks start at the first query tile that sees their keys and mask only the
tiles on the diagonal.

Shapes and layouts as attention_hopper's ("bhld", "blhd", "varlen"). Rows past
Lq read lse = +inf (P = 0) and delta = 0, so they add nothing (to dQ too:
its TMA add through a varlen sequence's slice adds exact zeros past the
sequence's end); keys past Lk (zero, or the next sequence's) are masked, and
dK and dV are clipped when stored.
"""
from __future__ import annotations

import functools
import math

import tkc
from tkc import bf16, f32, gl, i32, rt, rv, st, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import exp2, iota, load, store, sub_row, subtile, sum, where, zero

from .attention_hopper import HEAD_DIMS, LAYOUTS, LOG2E, attention_hopper

BKV = 128                   # keys per block: two consumer warpgroups of 64
BQ = 64                     # query rows per step of the loop
# The consumers keep dK and dV (64 f32 registers each at D = 128) in their
# 240 registers beside S, dP, the statistics and the wgmma descriptors; ptxas
# spills a few loop-invariant values (D = 128: 28-124 bytes; D = 64: 0-4).
SPILLS = 128
WARPS_DELTA = 4


def _layout_dims(layout: str, D: int, dtype=bf16):
    """(q-like gl, k-like gl) annotations of a layout, in dtype."""
    if layout == "bhld":
        return gl(dtype, "B", "Hq", "Lq", D), gl(dtype, "B", "Hkv", "Lk", D)
    if layout == "blhd":
        return gl(dtype, 1, "B", "Lq", "HqD"), gl(dtype, 1, "B", "Lk", "HkvD")
    return gl(dtype, 1, 1, "Tq", "HqD"), gl(dtype, 1, 1, "Tk", "HkvD")


def attention_bwd(D: int = 128, causal: bool = False, layout: str = "bhld", stages=2,
                  dq: str = "tma"):
    """The backward kernel for head dim D: bwd(q, k, v, do, lse, delta, dq,
    dk, dv, scale) (layout="varlen": ..., cu_q, cu_k, max_k, scale). dq is an
    f32 accumulator laid out as q, zeroed by the caller, that receives
    scale * dS K: by TMA reduce-adds of a shared tile (dq="tma", the default:
    0.61-0.76 of the atomics' time on the H100; through a sequence's slice for
    varlen, where rows past its end add exact zeros) or by atomic adds from
    registers (dq="atomic", clipped at the edges)."""
    if dq not in ("atomic", "tma"):
        raise TkcError(f"attention backward: dq must be 'atomic' or 'tma', got {dq!r}")
    if D not in HEAD_DIMS:
        raise TkcError(f"attention backward: head dim {D} is not supported (one of {HEAD_DIMS})")
    if layout not in LAYOUTS:
        raise TkcError(f"attention backward: layout must be one of {LAYOUTS}, got {layout!r}")
    name = "_".join(x for x in (f"attn_bwd_d{D}", "causal" if causal else "", layout,
                                "" if stages == 2 else f"s{stages}", "" if dq == "tma" else "dqatomic")
                     if x)
    by_tma = dq == "tma"

    def backward(q, k, v, do, lse, delta, dq_acc, dk, dv, scale, kb, h0, group, tile, vec, out):
        """One block: keys kb * BKV.. of KV head h0 // group's tiles `tile(h, t)`,
        against every query tile of heads h0 .. h0 + group - 1 that sees them;
        vec(h, t): coordinates of a warp's 16 statistics; out(h, t): of a
        warp's 16 rows of dK and dV."""
        wg, w = tkc.warpgroupid(), tkc.warpid()
        Lq, Lk = q.r, k.r
        hk = h0 // group
        k_s, v_s = st(bf16, BKV, D, "auto" if D == 128 else "64b"), st(bf16, BKV, D)
        q_s, do_s = st(bf16, BQ, D), st(bf16, BQ, D)
        p_s, ds_s = st(bf16, BQ, BKV), st(bf16, BQ, BKV)
        dq_s = st(f32, BQ, D) if by_tma else None
        tma.load(k_s, k, tile(hk, kb))
        tma.load(v_s, v, tile(hk, kb))
        key0 = kb * BKV + wg * 64        # this warpgroup's first key
        shift = Lk - Lq                  # causal: query i sees key j iff j <= i + shift
        nq = tkc.cdiv(Lq, BQ)
        first = 0
        if causal:                       # the first query tile that sees a key of the block
            first = tkc.min(tkc.max(kb * BKV - shift, 0) // BQ, nq)
        per_head = nq - first
        dk_r, dv_r = zero(rt(f32, 16, D)), zero(rt(f32, 16, D))
        c = scale * LOG2E
        for it in tkc.range(per_head * group, stages=stages, registers=(24, 240)):
            h, i = h0 + it // per_head, first + it % per_head
            tma.load(q_s, q, tile(h, i))
            tma.load(do_s, do, tile(h, i))
            # the rows' statistics, loaded before the mmas so that their
            # latency is hidden under them (after the wait, ncu saw the
            # first use of lse stall: 4% of the kernel's warp samples)
            row = vec(h, i * (BQ // 16) + w % 4)
            lse_r, delta_r = load(rv(f32, 16), lse, row, fill=math.inf), load(rv(f32, 16), delta, row, fill=0.0)
            # S and dP of the tile's 64 queries (rows: each warp 16) and the
            # warpgroup's 64 keys
            s, dp = zero(rt(f32, 16, 64)), zero(rt(f32, 16, 64))
            warpgroup.mma_ABt(s, q_s, subtile(k_s, 64, D, (wg, 0)))
            warpgroup.mma_ABt(dp, do_s, subtile(v_s, 64, D, (wg, 0)))
            warpgroup.mma_async_wait(s, dp)
            p = exp2(sub_row(s * c, lse_r * LOG2E))
            query0 = i * BQ + (w % 4) * 16   # this warp's first query
            edge = key0 + 64 > Lk            # keys past Lk (of the next sequence, varlen)
            if causal:
                edge = edge | (key0 + 63 > query0 + shift)
            with tkc.if_(edge):
                key = iota(rt(f32, 16, 64), 1, start=key0)
                keep = key < Lk
                if causal:
                    keep = keep & (key <= iota(rt(f32, 16, 64), 0, start=query0 + shift))
                p = where(keep, p, 0.0)
            ds = p * sub_row(dp, delta_r)
            tkc.sync()                   # the last tile's mmas (both warpgroups) read p_s, ds_s
            warpgroup.store(subtile(p_s, BQ, 64, (0, wg)), p.to(bf16), (0, 0))
            warpgroup.store(subtile(ds_s, BQ, 64, (0, wg)), ds.to(bf16), (0, 0))
            tkc.fence_async()
            tkc.sync()
            # dQ first: its wait leaves dV and dK in flight under dQ's store
            # (issued last, the wait for dQ waited for all three: ncu, 12% of
            # the warp samples on that one wait)
            dqp = zero(rt(f32, 16, D // 2))                                 # dQ = dS K:
            warpgroup.mma_AB(dqp, ds_s, subtile(k_s, BKV, D // 2, (0, wg)))  # half the columns each
            warpgroup.mma_AtB(dv_r, subtile(p_s, BQ, 64, (0, wg)), do_s)    # dV += P^T dO
            warpgroup.mma_AtB(dk_r, subtile(ds_s, BQ, 64, (0, wg)), q_s)    # dK += dS^T Q
            warpgroup.mma_async_wait(dqp, pending=2)
            if by_tma:
                warpgroup.store(subtile(dq_s, BQ, D // 2, (0, wg)), dqp * scale, (0, 0))
                tma.store_add(dq_acc, dq_s, tile(h, i))
            else:                        # this warp's 16 rows of its half, atomically
                b, d, r, col = tile(h, i * (BQ // 16) + w % 4)
                store(dq_acc, dqp * scale, (b, d, r, col * 2 + wg), clip=True, add=True)
            warpgroup.mma_async_wait(dv_r, dk_r)
        b, d, r, col = out(hk, kb * (BKV // 16) + w)
        store(dk, (dk_r * scale).to(bf16), (b, d, r, col), clip=True)
        store(dv, dv_r.to(bf16), (b, d, r, col), clip=True)

    Q, K = _layout_dims(layout, D)
    QF = _layout_dims(layout, D, f32)[0]
    if layout == "varlen":
        @tkc.kernel(name=name, warps=8, divisible={"HqD": "HkvD", "HkvD": D}, spills=SPILLS,
                    grid=lambda q, k, v, do, lse, delta, dq, dk, dv, cu_q, cu_k, max_k, scale:
                    (tkc.cdiv(max_k, BKV), k.c // D, cu_q.c - 1))
        def bwd(q: Q, k: K, v: K, do: Q, lse: gl(f32, 1, "Hq", 1, "Tq"),
                delta: gl(f32, 1, "Hq", 1, "Tq"), dq: QF, dk: K, dv: K,
                cu_q: gl(i32, 1, 1, 1, "B1"), cu_k: gl(i32, 1, 1, 1, "B1"), max_k: tkc.i32,
                scale: tkc.f32):
            kb, hk, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
            q0, q1 = load(i32, cu_q, at=(0, 0, 0, b), fill=0), load(i32, cu_q, at=(0, 0, 0, b + 1), fill=0)
            k0, k1 = load(i32, cu_k, at=(0, 0, 0, b), fill=0), load(i32, cu_k, at=(0, 0, 0, b + 1), fill=0)
            group = q.c // k.c
            sq, sk = (lambda g: g.slice("r", q0, q1 - q0)), (lambda g: g.slice("r", k0, k1 - k0))
            sv = lambda g: g.slice("c", q0, q1 - q0)  # noqa: E731
            backward(sq(q), sk(k), sk(v), sq(do), sv(lse), sv(delta), sq(dq), sk(dk), sk(dv),
                     scale, kb, hk * group, group, lambda h, t: (0, 0, t, h),
                     lambda h, t: (0, h, 0, t), lambda h, t: (0, 0, t, h))
        return bwd

    relation = {"Hq": "Hkv"} if layout == "bhld" else {"HqD": "HkvD", "HkvD": D}

    def grid(q, k, *_):
        return (tkc.cdiv(k.r, BKV), k.d, k.b) if layout == "bhld" else (tkc.cdiv(k.r, BKV), k.c // D, k.d)

    @tkc.kernel(name=name, warps=8, divisible=relation, grid=grid, spills=SPILLS)
    def bwd(q: Q, k: K, v: K, do: Q, lse: gl(f32, "B", "Hq", 1, "Lq"),
            delta: gl(f32, "B", "Hq", 1, "Lq"), dq: QF, dk: K, dv: K, scale: tkc.f32):
        kb, hk, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        group = lse.d // (k.d if layout == "bhld" else k.c // D)
        tile = (lambda h, t: (b, h, t, 0)) if layout == "bhld" else (lambda h, t: (0, b, t, h))
        backward(q, k, v, do, lse, delta, dq, dk, dv, scale, kb, hk * group, group, tile,
                 lambda h, t: (b, h, 0, t), tile)

    return bwd


def attention_delta(D: int = 128, layout: str = "bhld"):
    """The backward's preprocessing: delta[b, h, i] = sum_d dO * O of each
    query row (f32, laid out as lse), one row per warp as a flat vector
    (16-byte loads): delta(o, do, out) (varlen: delta(o, do, out) over the
    packed rows, out [Hq, Tq])."""
    if layout not in LAYOUTS:
        raise TkcError(f"attention backward: layout must be one of {LAYOUTS}, got {layout!r}")
    W = WARPS_DELTA
    Q = _layout_dims(layout, D)[0]
    if layout == "bhld":
        OUT = gl(f32, "B", "Hq", 1, "Lq")
    else:
        OUT = gl(f32, 1 if layout == "varlen" else "B", "Hq", 1, "Lq" if layout == "blhd" else "Tq")

    def grid(o, do, out):
        return (tkc.cdiv(out.c, W), out.d, out.b)

    @tkc.kernel(name=f"attn_delta_d{D}_{layout}", warps=W, grid=grid)
    def delta(o: Q, do: Q, out: OUT):
        i, h, b = tkc.block_idx.x * W + tkc.warpid(), tkc.block_idx.y, tkc.block_idx.z
        at = (b, h, i, 0) if layout == "bhld" else (0, b, i, h)
        x = load(rv(f32, D, "flat"), o, at, fill=0.0)
        y = load(rv(f32, D, "flat"), do, at, fill=0.0)
        store(out, sum(x * y), at=(b, h, 0, i), clip=True)

    return delta


# Keys from which FlashAttention-3's schedule (ping-pong + intra-warpgroup
# overlap) is the faster forward, per head dim: its loop runs one extra
# iteration, which short sequences do not amortise (H100, BENCHMARKS.md).
LONG_KEYS = {64: 8192, 128: 2048}
# Keys below which one consumer warpgroup a block, two blocks an SM, is the
# faster causal forward at D = 64: 64-row blocks even out the causal work
# that 192-row ones leave uneven (H100, BENCHMARKS.md: 0.68 -> 0.85 of cuDNN
# at L 1k, 0.94 -> 0.91 at 4k; at D = 128 no faster).
PAIRED_CAUSAL_KEYS = {64: 2048}


@functools.lru_cache(maxsize=None)
def attention_kernels(D: int, causal: bool, layout: str):
    """(forward, long forward, delta, backward, paired forward) as
    tkc.attention launches them. The forwards: 2 ring stages at D = 64
    (faster than a deeper ring on the H100), the deepest that fits at D = 128
    (2); three consumer warpgroups at D = 64, two at 128; the long forward
    adds ping-pong and the intra-warpgroup overlap (for Lk >= LONG_KEYS[D]);
    the paired one (causal, Lk < PAIRED_CAUSAL_KEYS[D]) has one consumer
    warpgroup and two blocks an SM (the forward itself where there is none)."""
    base = dict(stages=2, consumers=3) if D == 64 else dict(stages="auto", consumers=2)
    short = attention_hopper(D, causal, layout, **base)
    paired = attention_hopper(D, causal, layout, stages=2, consumers=1, blocks_per_sm=2) \
        if causal and D in PAIRED_CAUSAL_KEYS else short
    return (short, attention_hopper(D, causal, layout, **base, overlap=True, pingpong=True),
            _delta(D, layout), attention_bwd(D, causal, layout), paired)


def forward_kernel(D: int, causal: bool, layout: str, keys: int):
    """The forward for sequences of up to `keys` keys."""
    short, long, _, _, paired = attention_kernels(D, causal, layout)
    if keys >= LONG_KEYS[D]:
        return long
    return paired if keys < PAIRED_CAUSAL_KEYS.get(D, 0) else short


@functools.lru_cache(maxsize=None)
def _delta(D: int, layout: str):
    return attention_delta(D, layout)
