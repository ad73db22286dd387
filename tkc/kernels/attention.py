"""Attention forward, the paper's Figure 1: non-causal, online softmax.

O = softmax(Q K^T * scale) V for Q, K, V, O of shape (batch, heads, n, D).
A block of 4 warps owns 64 query rows (16 per warp, kept in registers).
It walks the keys 64 at a time: the block copies K and V tiles into shared
memory, each warp multiplies its queries with KV_SUB keys at a time and
keeps the running row max `m`, row sum `l` and output `o` (exp2 with the
scale folded into log2(e), so the hardware's ex2 does the exponentials).
"""
from __future__ import annotations

import math

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, rt, rv, st
from tkc.ops import (copy, exp2, group_load, load, mma_AB, mma_ABt, mul_row,
                     neg_infty, row_max, row_sum, store, sub_row, zero, div_row)

LOG2E = math.log2(math.e)


def attention_fwd(D: int = 64, KV_SUB: int = 32):
    """Q, K, V, O: (B, H, N, D) bf16, N a multiple of 64; scale given at launch."""
    WARPS, QROWS, KV = 4, 16, 64

    @tkc.kernel(name=f"attn_fwd_d{D}", warps=WARPS,
                grid=lambda q, k, v, o, scale: (q.r // (WARPS * QROWS), q.d, q.b))
    def attn(q: gl(bf16, "B", "H", "N", D), k: gl(bf16, "B", "H", "N", D),
             v: gl(bf16, "B", "H", "N", D), o: gl(bf16, "B", "H", "N", D),
             scale: tkc.f32):
        qb, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        w = tkc.warpid()
        k_s = st(bf16, KV, D)
        v_s = st(bf16, KV, D)
        q_r = load(rt(bf16, QROWS, D), q, (b, h, qb * WARPS + w, 0))
        o_r = zero(rt(f32, QROWS, D))
        m = neg_infty(rv(f32, QROWS))
        l = zero(rv(f32, QROWS))
        c = scale * LOG2E
        for j in tkc.range(k.r // KV):
            group_load(k_s, k, (b, h, j, 0))
            group_load(v_s, v, (b, h, j, 0))
            tkc.sync()
            for sub in range(KV // KV_SUB):  # unrolled at trace time
                k_r = load(rt(bf16, KV_SUB, D), k_s, (sub, 0))
                att = zero(rt(f32, QROWS, KV_SUB))
                mma_ABt(att, q_r, k_r, att)
                att = att * c
                m_prev = copy(rv(f32, QROWS), m)
                row_max(m, att, m)
                exp2(att, sub_row(att, m))
                alpha = exp2(m_prev - m)
                l = l * alpha
                row_sum(l, att, l)
                mul_row(o_r, o_r, alpha)
                v_r = load(rt(bf16, KV_SUB, D, "col"), v_s, (sub, 0))
                mma_AB(o_r, att.to(bf16), v_r, o_r)
            tkc.sync()
        div_row(o_r, o_r, l)
        store(o, o_r.to(bf16), (b, h, qb * WARPS + w, 0))

    return attn
