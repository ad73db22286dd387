"""Hedgehog attention forward on Hopper (ThunderKittens' kernels/hedgehog):
a sliding-window softmax over the last chunk and a half plus linear
attention with a learned softmax feature map over everything before.

    q, k [B, H, L, 128], v, o [B, H, L, 128] (bf16, SDPA's layout); qmap,
    kmap [H, 128, 64] (bf16); alpha, beta [H] (f32). Chunks of C = 64 steps;
    query t in chunk c = t // 64:

    phi(x) = max(concat(softmax(x map), softmax(-(x map))), 1e-6)   (128 features;
             the clamp is ThunderKittens' reference's)
    W(t)   = {s <= t, s // 64 >= c - 1}: the chunk causally and the whole chunk before
    a(t, s) = beta_h exp((q_t.k_s - m_t) scale), s in W(t), m_t = max_{s in W(t)} q_t.k_s
    a(t, s) = alpha_h phi(q_t).phi(k_s),          s // 64 <= c - 2
    o_t = sum_s a(t, s) v_s / (sum_s a(t, s) + 1e-6)

The reference is tkc.kernels.reference.hedgehog. Any L: TMA reads zeros past
the end and o is stored clipped. Padded key rows of the last chunk cannot
reach a valid query: inside the window they lie after it (causal mask), and
the linear part sees a chunk only two chunks later.

A block owns one (batch, head) and walks its chunks in order, as
linear_attention does: two consumer warpgroups split the value columns (each
owns 64 of o and of the state), both compute the chunk's scores and phi(q);
tk-pipeline-staging streams q, k and v by TMA through a ring. Chunk c - 1's
k and v stay in shared memory (copied out of the ring at the end of each
chunk: a second TMA load of them would not leave room for two stages). Per
chunk c:

    Xq = q_c qmap, Xk = k_(c-1) kmap             (wgmma; then phi in registers)
    phi(k_(c-1)) -> shared: warpgroup 0 the softmax(+) half, 1 the softmax(-) half
    o  = alpha phi(q) H_s                        (H_s: the state over chunks <= c - 2, bf16)
    n  = alpha phi(q) Z_s                        (Z_s: sum of phi(k) over them, 16 equal columns)
    H += phi(k_(c-1))^T v_(c-1), Z += phi(k_(c-1))^T 1   (registers, f32: now chunks <= c - 1)
    S = q k_c^T (causal), S' = q k_(c-1)^T (none at c = 0), m = row max of both
    P = beta exp((S - m) scale), o += P v_c + P' v_(c-1), l = row sums
    o /= l + n + 1e-6; then H, Z -> H_s, Z_s and k_c, v_c -> the previous-chunk tiles

Computing phi(k) one chunk late keeps the state single: the shared copy the
o wgmma reads lags the registers by the one chunk the window covers. At c = 0
the previous-chunk tiles hold zeros and phi(k) is multiplied by 0 (phi(0) is
not 0). The normaliser's state Z is F x 16 (every column the same sum, the B
operand a tile of ones) so that phi(q) . Z is a wgmma like the numerator's;
warpgroup w keeps Z's rows of its own sign half.
"""
from __future__ import annotations

import math

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import (exp2, fma, load, max, mul_row, ones, rcp, row_max, row_sum, store, subtile,
                     where, zero)

from .linear_attention import C, CONSUMERS, _causal, _panel, _publish

D = 128                 # q and k's head dim
DV = 128                # v's
P = 64                  # the map's projected columns: F = 2 P features (softmax(+), softmax(-))
F = 2 * P
N1 = 16                 # the normaliser's columns (all equal): the narrowest wgmma
CLAMP = 1e-6
LOG2E = math.log2(math.e)   # exp(x) = exp2(x log2 e): the scale folds into one FFMA
# No spills (ptxas 13.0; 8 bytes, the loop's 64-bit trip count, while every
# ldmatrix / stmatrix position held its own address register): the state,
# the scores and phi(q) stay in registers and no wgmma is serialised. The
# consumers take the producer's spare registers (setmaxnreg 24 / 240, not
# 40 / 232: more spills there; 1% faster).
SPILLS = 0


def _feature(x):
    """softmax over the P columns of each row of x, clamped below at CLAMP."""
    e = exp2(fma(x, LOG2E, row_max(x) * -LOG2E))
    return max(mul_row(e, rcp(row_sum(e))), CLAMP)


def hedgehog(stages="auto", registers=(24, 240)):
    """The kernel hh(q, k, v, qmap, kmap, alpha, beta, o, scale) (shapes above);
    `registers`: the (producer, consumer) setmaxnreg counts."""
    DVh = DV // CONSUMERS
    name = "hedgehog_d128_v128" + ("" if stages == "auto" else f"_s{stages}") + (
        "" if registers == (24, 240) else "_r%d_%d" % registers)
    QK, V = gl(bf16, "B", "H", "L", D), gl(bf16, "B", "H", "L", DV)
    MAP, HEADS = gl(bf16, 1, "H", D, P), gl(f32, 1, 1, 1, "H")

    @tkc.kernel(name=name, warps=4 * CONSUMERS, grid=lambda q, *_: (q.d, q.b), spills=SPILLS)
    def hh(q: QK, k: QK, v: V, qmap: MAP, kmap: MAP, alpha: HEADS, beta: HEADS, o: V,
           scale: tkc.f32):
        h, b = tkc.block_idx.x, tkc.block_idx.y
        wg, w = tkc.warpgroupid(), tkc.warpid()
        q_s, k_s, v_s = st(bf16, C, D), st(bf16, C, D), st(bf16, C, DV, _panel(DVh))
        kp_s, vp_s = st(bf16, C, D), st(bf16, C, DV, _panel(DVh))   # chunk c - 1
        qm_s, km_s = st(bf16, D, P), st(bf16, D, P)
        kf_s = st(bf16, C, F)                        # phi(k_(c-1))
        h_s, z_s = st(bf16, F, DV, _panel(DVh)), st(bf16, F, N1)
        one_s = st(bf16, C, N1)
        mine = lambda x, rows: subtile(x, rows, DVh, (0, wg))  # noqa: E731  this warpgroup's columns
        tma.load(qm_s, qmap, (0, h, 0, 0))
        tma.load(km_s, kmap, (0, h, 0, 0))
        a_h = load(f32, alpha, at=(0, 0, 0, h), fill=0.0)
        b_h = load(f32, beta, at=(0, 0, 0, h), fill=0.0)
        sign = where(wg == 0, 1.0, -1.0)            # this warpgroup's half of phi(k)

        # the state at zero (registers and shared), no previous chunk, the ones
        state = [zero(rt(f32, 16, DVh)) for _ in range(F // 64)]
        z = zero(rt(f32, 16, N1))                    # Z's rows of this warpgroup's half
        _publish(state, h_s, F, mine)
        warpgroup.store(subtile(z_s, P, N1, (wg, 0)), z.to(bf16), (0, 0))
        blank = zero(rt(bf16, 16, 64))
        warpgroup.store(subtile(kp_s, C, 64, (0, wg)), blank, (0, 0))
        warpgroup.store(mine(vp_s, C), blank, (0, 0))
        with tkc.if_(wg == 0):
            warpgroup.store(one_s, ones(rt(bf16, 16, N1)), (0, 0))
        tkc.fence_async()
        tkc.sync()

        for c in tkc.range(tkc.cdiv(q.r, C), stages=stages, registers=registers):
            tma.load(q_s, q, (b, h, c, 0))
            tma.load(k_s, k, (b, h, c, 0))
            tma.load(v_s, v, (b, h, c, 0))
            xq, xk = zero(rt(f32, 16, P)), zero(rt(f32, 16, P))
            warpgroup.mma_AB(xq, q_s, qm_s)
            warpgroup.mma_AB(xk, kp_s, km_s)
            warpgroup.mma_async_wait(xq, xk)
            kf = _feature(xk * sign) * where(c > 0, 1.0, 0.0)
            warpgroup.store(subtile(kf_s, C, P, (0, wg)), kf.to(bf16), (0, 0))
            pq, nq = ((_feature(x) * a_h).to(bf16) for x in (xq, -xq))
            tkc.fence_async()
            tkc.sync()                               # both halves of phi(k) are in kf_s

            o_r, n = zero(rt(f32, 16, DVh)), zero(rt(f32, 16, N1))
            for i, x in enumerate((pq, nq)):         # the chunks <= c - 2
                warpgroup.mma_AB(o_r, x, subtile(h_s, P, DVh, (i, wg)))
                warpgroup.mma_AB(n, x, subtile(z_s, P, N1, (i, 0)))
            for t in range(F // 64):                 # the state gains chunk c - 1
                warpgroup.mma_AtB(state[t], subtile(kf_s, C, 64, (0, t)), mine(vp_s, C))
            warpgroup.mma_AtB(z, subtile(kf_s, C, P, (0, wg)), one_s)
            # phi(q)'s registers are free once its wgmmas are done: only then the scores
            o_r, n = warpgroup.mma_async_wait(o_r, n, pending=F // 64 + 1)
            n_max = row_max(n)                       # n's registers are free before the scores
            s, sp = zero(rt(f32, 16, C)), zero(rt(f32, 16, C))
            warpgroup.mma_ABt(s, q_s, k_s)
            warpgroup.mma_ABt(sp, q_s, kp_s)
            s, sp = warpgroup.mma_async_wait(s, sp)

            # the window: chunk c causally, chunk c - 1 whole (none at c = 0)
            s = where(_causal(w), s, -math.inf)
            sp = sp + where(c > 0, 0.0, -math.inf)
            c2 = scale * LOG2E
            m = row_max(sp, init=row_max(s)) * -c2
            p, pp = (exp2(fma(x, c2, m)) * b_h for x in (s, sp))
            den = row_sum(pp, init=row_sum(p)) + n_max + 1e-6
            warpgroup.mma_AB(o_r, p.to(bf16), mine(v_s, C))
            warpgroup.mma_AB(o_r, pp.to(bf16), mine(vp_s, C))
            warpgroup.mma_async_wait(o_r, z, *state)
            store(o, mul_row(o_r, rcp(den)).to(bf16), (b, h, c * (C // 16) + w % 4, wg), clip=True)

            tkc.sync()               # every wgmma of this chunk has read the shared tiles
            _publish(state, h_s, F, mine)
            warpgroup.store(subtile(z_s, P, N1, (wg, 0)), z.to(bf16), (0, 0))
            kc = load(rt(bf16, 16, 64), k_s, (w % 4, wg))
            vc = load(rt(bf16, 16, 64), v_s, (w % 4, wg))
            store(kp_s, kc, (w % 4, wg))
            store(vp_s, vc, (w % 4, wg))
            tkc.fence_async()
            tkc.sync()

    return hh

