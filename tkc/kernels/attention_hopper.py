"""Attention forward on Hopper: TMA and warpgroup wgmma, online softmax.

O = softmax(Q K^T * scale) V, Q, K, V, O of shape (batch, heads, n, D).
A block has WG warpgroups, each owning 64 query rows (its own Q tile); they
share the K and V tiles, which stream through a 2-stage ring, loaded by TMA
one tile ahead of the math. Q arrives by TMA once. WG = 1 is the default:
measured on the H100 (BENCHMARKS.md), two warpgroups sharing K/V ran 5-37%
slower, since the per-tile block barrier couples them, while one-warpgroup
blocks (41 KiB of shared memory at D = 64, KV = 64) fit several per SM and overlap
one block's softmax with another's wgmma. Per KV tile: S = Q K^T (wgmma, both operands in
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


def attention_hopper(D: int = 64, KV: int = 64, WG: int = 1):
    STAGES = 2
    QROWS = 64 * WG

    @tkc.kernel(name=f"attn_hopper_d{D}_kv{KV}_wg{WG}", warps=4 * WG,
                grid=lambda q, k, v, o, scale: (q.r // QROWS, q.d, q.b))
    def attn(q: gl(bf16, "B", "H", "N", D), k: gl(bf16, "B", "H", "N", D),
             v: gl(bf16, "B", "H", "N", D), o: gl(bf16, "B", "H", "N", D), scale: tkc.f32):
        qb, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        w, g = tkc.warpid(), tkc.warpgroupid()
        q_s = [st(bf16, 64, D) for _ in range(WG)]
        k_s = [st(bf16, KV, D) for _ in range(STAGES)]
        v_s = [st(bf16, KV, D) for _ in range(STAGES)]
        q_bar = tkc.barrier()
        full = [tkc.barrier() for _ in range(STAGES)]
        n_kv = k.r // KV
        with tkc.if_(w == 0):  # Q, and the first K/V tile into stage 0
            tma.expect(q_bar, *q_s)
            for i in range(WG):
                tma.load_async(q_s[i], q, (b, h, qb * WG + i, 0), q_bar)
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
                att = _scores(g, q_s, k_s[s], zero(rt(f32, 16, KV)))
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
        warpgroup.store(o, o_r.to(bf16), (b, h, qb * WG + g, 0))

    return attn


def _scores(g, q_s, k_s, att):
    """S = Q K^T for warpgroup g, whose Q tile is q_s[g] (a warpgroup id picks
    a tile only through a branch; the wait stays inside it, so no in-flight
    accumulator crosses the branch)."""
    if len(q_s) == 1:
        warpgroup.mma_ABt(att, q_s[0], k_s)
        return warpgroup.mma_async_wait(att)
    with tkc.if_(g == 0):
        warpgroup.mma_ABt(att, q_s[0], k_s)
        warpgroup.mma_async_wait(att)
    with tkc.else_():
        _scores(g - 1, q_s[1:], k_s, att)
    return att
