"""Attention forward on Hopper: TMA and warpgroup wgmma, online softmax.

O = softmax(Q K^T * scale) V, Q, K, V, O of shape (batch, heads, n, D).
One warpgroup (4 warps) per block owns 64 query rows. Q arrives by TMA once;
K and V tiles of KV rows stream through a 2-stage ring, loaded by TMA one
tile ahead of the math. Per KV tile: S = Q K^T (wgmma, both operands in
shared memory), the online softmax on S in registers (each warp its 16
rows, exp2 with the scale folded into log2(e)), then O += P V (wgmma with
P from registers). The KV loop is unrolled by the 2 stages at trace time,
so n must be a multiple of 2 * KV.
"""
from __future__ import annotations

import math

import tkc
from tkc import bf16, f32, gl, rt, rv, st, tma, warpgroup
from tkc.ops import exp2, mul_row, neg_infty, row_max, row_sum, sub_row, zero, div_row

LOG2E = math.log2(math.e)


def attention_hopper(D: int = 64, KV: int = 64):
    QROWS, STAGES = 64, 2

    @tkc.kernel(name=f"attn_hopper_d{D}_kv{KV}", warps=4,
                grid=lambda q, k, v, o, scale: (q.r // QROWS, q.d, q.b))
    def attn(q: gl(bf16, "B", "H", "N", D), k: gl(bf16, "B", "H", "N", D),
             v: gl(bf16, "B", "H", "N", D), o: gl(bf16, "B", "H", "N", D), scale: tkc.f32):
        qb, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        w = tkc.warpid()
        q_s = st(bf16, QROWS, D)
        k_s = [st(bf16, KV, D) for _ in range(STAGES)]
        v_s = [st(bf16, KV, D) for _ in range(STAGES)]
        q_bar = tkc.barrier()
        full = [tkc.barrier() for _ in range(STAGES)]
        n_kv = k.r // KV
        with tkc.if_(w == 0):  # Q, and the first K/V tile into stage 0
            tma.expect(q_bar, q_s)
            tma.load_async(q_s, q, (b, h, qb, 0), q_bar)
            tma.expect(full[0], k_s[0], v_s[0])
            tma.load_async(k_s[0], k, (b, h, 0, 0), full[0])
            tma.load_async(v_s[0], v, (b, h, 0, 0), full[0])
        o_r = zero(rt(f32, 16, D))
        m = neg_infty(rv(f32, 16))
        l = zero(rv(f32, 16))
        c = scale * LOG2E
        tkc.wait(q_bar, 0)
        for jr in tkc.range(k.r // (KV * STAGES)):
            for s in range(STAGES):
                j = jr * STAGES + s
                nxt = 1 - s
                tkc.sync()  # every warp is done with the stage the prefetch overwrites
                with tkc.if_(w == 0):
                    with tkc.if_(j + 1 < n_kv):
                        tma.expect(full[nxt], k_s[nxt], v_s[nxt])
                        tma.load_async(k_s[nxt], k, (b, h, j + 1, 0), full[nxt])
                        tma.load_async(v_s[nxt], v, (b, h, j + 1, 0), full[nxt])
                tkc.wait(full[s], jr % 2)
                att = warpgroup.mma_ABt(q_s, k_s[s], zero(rt(f32, 16, KV)))
                warpgroup.mma_async_wait(att)
                att = att * c
                m_prev = m
                m = row_max(att, init=m)
                att = exp2(sub_row(att, m))
                alpha = exp2(m_prev - m)
                l = row_sum(att, init=l * alpha)
                o_r = mul_row(o_r, alpha)
                warpgroup.mma_AB(o_r, att.to(bf16), v_s[s])
                warpgroup.mma_async_wait(o_r)
        o_r = div_row(o_r, l)
        warpgroup.store(o, o_r.to(bf16), (b, h, qb, 0))

    return attn
