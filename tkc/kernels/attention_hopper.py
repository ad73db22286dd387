"""Attention forward on Hopper, written as a plain pipelined loop.

O = softmax(Q K^T * scale [+ causal mask]) V, and the log-sum-exp of each
query row (natural log; +inf for a row with no key, whose output is 0), for
the backward. bf16 in and out, f32 softmax and accumulation.

A block owns BQ = 128 query rows of one head: two consumer warpgroups of 64
rows each (a subtile of the block's Q tile), which share the K and V tiles.
tk-pipeline-staging turns the loop over KV tiles into a producer warpgroup
streaming K and V by TMA through a ring of stages, full/empty mbarriers and
the setmaxnreg split; Q is loaded once. Per KV tile each warpgroup computes
S = Q K^T (wgmma from shared memory), the online softmax on S in registers
(exp2, the scale folded into log2 e), and O += P V (wgmma with P from
registers).

Shapes: any Lq and Lk. TMA zero-fills past the ends, keys past Lk are masked
inside the kernel (only in the tiles that reach past Lk or the diagonal), and
the output's TMA store clips. Causal masks align bottom-right, as
FlashAttention 2+: query i sees key j iff j <= i + Lk - Lq; a causal block
stops at its last unmasked tile and the grid runs the longest blocks first.
GQA/MQA: Hq a multiple of Hkv (checked at launch), query head h reads KV
head h // (Hq / Hkv).

Layouts (the gl each tensor is viewed as; `layout=`):
  "bhld": q [B, Hq, Lq, D], k, v [B, Hkv, Lk, D] (SDPA's); lse [B, Hq, Lq]
  "blhd": q [B, Lq, Hq, D], k, v [B, Lk, Hkv, D] (FlashAttention's), viewed
          as [B, L, H*D] so a tile is 128 rows of one head's D columns
"""
from __future__ import annotations

import math

import tkc
from tkc import bf16, f32, gl, rt, rv, st, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import (div_row, eq, exp2, iota, log2, mul_row, neg_infty, row_max, row_sum,
                     store, sub_row, subtile, where, zero)

LOG2E, LN2 = math.log2(math.e), math.log(2)
BQ = 128                    # query rows per block: two consumer warpgroups of 64
HEAD_DIMS = (64, 128)
LAYOUTS = ("bhld", "blhd")


def attention_hopper(D: int = 128, causal: bool = False, layout: str = "bhld",
                     KV: int | None = None, stages="auto"):
    """The forward kernel attn(q, k, v, o, lse, scale) for head dim D."""
    if D not in HEAD_DIMS:
        raise TkcError(f"attention: head dim {D} is not supported (one of {HEAD_DIMS})")
    if layout not in LAYOUTS:
        raise TkcError(f"attention: layout must be one of {LAYOUTS}, got {layout!r}")
    KV = KV or 128
    name = "_".join(x for x in (f"attn_fwd_d{D}", "causal" if causal else "", layout,
                                f"kv{KV}", "" if stages == "auto" else f"s{stages}") if x)
    bhld = layout == "bhld"

    def tile(b, h, t):  # the (b, d, r, c) coordinates of row tile t of head h
        return (b, h, t, 0) if bhld else (0, b, t, h)

    if bhld:
        dims = dict(q=gl(bf16, "B", "Hq", "Lq", D), k=gl(bf16, "B", "Hkv", "Lk", D))
    else:
        dims = dict(q=gl(bf16, 1, "B", "Lq", "HqD"), k=gl(bf16, 1, "B", "Lk", "HkvD"))
    Q, K = dims["q"], dims["k"]

    @tkc.kernel(name=name, warps=8, divisible={"Hq": "Hkv"} if bhld else {"HqD": "HkvD"},
                grid=lambda q, k, v, o, lse, scale: (tkc.cdiv(q.r, BQ), q.d if bhld else q.c // D,
                                                     q.b if bhld else q.d))
    def attn(q: Q, k: K, v: K, o: Q, lse: gl(f32, "B", "Hq", 1, "Lq"), scale: tkc.f32):
        qb, h, b, wg, w = (tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z,
                           tkc.warpgroupid(), tkc.warpid())
        Lq, Lk = q.r, k.r
        if causal:  # the longest blocks first
            qb = tkc.cdiv(Lq, BQ) - 1 - qb
        hk = h // (lse.d // (k.d if bhld else k.c // D))
        q_s, o_s = st(bf16, BQ, D), st(bf16, BQ, D)
        k_s, v_s = st(bf16, KV, D), st(bf16, KV, D)
        tma.load(q_s, q, tile(b, h, qb))
        row0 = qb * BQ + w * 16          # this warp's first query row
        shift = Lk - Lq                  # causal: query i sees key j iff j <= i + shift
        n = tkc.cdiv(Lk, KV)
        if causal:
            n = tkc.max(tkc.min(n, tkc.cdiv(qb * BQ + BQ + shift, KV)), 0)
        o_r, m, l = zero(rt(f32, 16, D)), neg_infty(rv(f32, 16)), zero(rv(f32, 16))
        c = scale * LOG2E
        for j in tkc.range(n, stages=stages):
            tma.load(k_s, k, tile(b, hk, j))
            tma.load(v_s, v, tile(b, hk, j))
            s = zero(rt(f32, 16, KV))
            warpgroup.mma_ABt(s, subtile(q_s, 64, D, (wg, 0)), k_s)
            warpgroup.mma_async_wait(s)
            s = s * c
            edge = j * KV + KV > Lk       # a tile reaching past Lk or the diagonal is masked
            if causal:
                edge = edge | (j * KV + KV - 1 > row0 + shift)
            with tkc.if_(edge):
                col = iota(rt(f32, 16, KV), 1) + j * KV
                keep = col < Lk
                if causal:
                    keep = keep & (col <= iota(rt(f32, 16, KV), 0) + (row0 + shift))
                s = where(keep, s, -math.inf)
            m_prev = m
            m = row_max(s, init=m)
            ms = where(eq(m, -math.inf), 0.0, m) if causal else m  # a row with no key yet
            s = exp2(sub_row(s, ms))
            alpha = exp2(m_prev - ms)
            l = row_sum(s, init=l * alpha)
            o_r = mul_row(o_r, alpha)
            warpgroup.mma_AB(o_r, s.to(bf16), v_s)
            warpgroup.mma_async_wait(o_r)
        empty = eq(l, 0.0)               # no key (causal, Lq > Lk): O = 0, lse = +inf
        o_r = div_row(o_r, where(empty, 1.0, l))
        store(lse, where(empty, math.inf, (m + log2(l)) * LN2), (b, h, 0, qb * (BQ // 16) + w),
              clip=True)
        warpgroup.store(o_s, o_r.to(bf16), (wg, 0))
        tma.store(o, o_s, tile(b, h, qb))

    return attn
