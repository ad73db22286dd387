"""Attention backward on Hopper: dQ, dK, dV of attention_hopper's forward.

With P = softmax(S), S = Q K^T * scale (masked), the forward's log-sum-exp L
and delta = rowsum(dO * O):

    P = exp(S - L)    dV = P^T dO    dP = dO V^T    dS = P * (dP - delta)
    dK = scale * dS^T Q                dQ = scale * dS K

`attention_prep` first writes the statistics the backward reads, L * log2 e
and delta, padded to whole query tiles (rows past Lq: +inf and 0, so their P
is 0), as FlashAttention-3's preprocessing does.

A block owns BKV = 128 keys of one KV head: two consumer warpgroups of 64
keys each, which keep their dK and dV in registers while the block walks
every query tile that sees its keys, for every query head of the KV head's
group (GQA: dK and dV summed over the group). Q and dO stream through a ring
of stages (tk-pipeline-staging: producer warpgroup, TMA, mbarriers). Per
query tile of BQ rows (64; 128 at D = 64) each warpgroup computes S^T = K Q^T
and dP^T = V dO^T for its 64 keys (FlashAttention-3's SdP_swapAB: wgmma from
shared memory, each warp 16 keys), so P^T and dS^T land in registers in the
layout of a wgmma's A operand: dV += P^T dO and dK += dS^T Q read them from
registers, and only dS^T goes to shared memory, for the block's dQ tile
dS K over its 128 keys (each warpgroup half the columns at BQ = 64, a column
subtile of K: whole swizzle panels, so K is 64-byte swizzled at D = 64; half
the rows at BQ = 128). The statistics are one value per query, a column of
S^T: they travel with each Q/dO tile through the ring as two shared vectors
(TMA, aligned and unbounded: the padding), read where they are used. dQ
reaches an f32 accumulator in global memory by TMA reduce-adds of a shared
tile, issued by a store warp of the producer warpgroup so that the consumer
warpgroups do not meet for them (tkc.range's store_warp); or, with
dq="atomic", by atomic adds from registers (slower, BENCHMARKS.md). Causal
blocks start at the first query tile that sees their keys and mask only the
tiles on the diagonal.

At D = 256 dK and dV of 64 keys would fill a warpgroup's registers, so a
block owns 64 keys and splits the work by operand and by halves of D
(attention_bwd's docstring).

Shapes and layouts as attention_hopper's ("bhld", "blhd", "varlen"). Rows past
Lq add nothing (P = 0; to dQ too: its TMA add through a varlen sequence's
slice adds exact zeros past the sequence's end); keys past Lk (zero, or the
next sequence's) are masked, and dK and dV are clipped when stored: by the
TMA store that takes them from K's and V's shared tiles after the loop
(dkv_tma), or, for varlen (whose slices a TMA store cannot clip to), from
registers.

attention_prep and the statistics' layout: attention_bwd_prep.py. The options
tkc.attention's backward takes, and the measurements behind them:
attention_picks.py (backward_options, BWD_SCHEDULE).
"""
from __future__ import annotations

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, i32, rt, rv, st, sv, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import atomic_add, exp2, iota, load, store, sub_col, subtile, where, zero

from .attention_bwd_prep import _layout_dims, _stats_start
from .attention_hopper import HEAD_DIMS, LAYOUTS, LOG2E

BKV = 128                   # keys per block: two consumer warpgroups of 64
BKV_WIDE = 64               # D = 256: keys per block (each warpgroup half of D of dK and dV)
WARPS = 8                   # the consumer warps (two warpgroups)
CONVERT_ROWS = {64: 32, 128: 16}   # dq_convert: rows a warp a step (64 registers of f32 a lane)
# The consumers keep dK and dV (64 f32 registers each at D = 128) in their
# 240 registers beside S^T, dP^T, the statistics and the wgmma descriptors;
# ptxas spills a few values in tkc.attention's kernels (0c7b1cc): none at
# D = 128, 8-44 bytes at D = 64 with BQ = 128 (S^T and dP^T 64 registers
# each, the statistics 32 each; 24 in the bhld kernel, where consumer warp 0
# issuing dQ's adds spilled 16); 140 in the persistent zigzag twin, and
# (before f62fbe8) up to 160 for dq="atomic" at BQ = 128 (a probe since removed:
# git show 6fca075:scripts/attention_dq.py).
SPILLS = 192


def attention_bwd(D: int = 128, causal: bool = False, layout: str = "bhld", stages=2,
                  dq: str | None = None, BQ: int = 64, ex2_fma: float = 0.0, persistent=False,
                  overlap: bool = False, dq_first: bool = False, early_stats: bool = False,
                  ds_slots: int = 1, store_warp: bool = True, dkv_tma: bool | None = None,
                  stats_acc: bool = False, dq_convert: bool = False, dq_slots: int = 2,
                  dq_deinterleave: bool = False, dq_packed: bool = False):
    """The backward kernel for head dim D: bwd(q, k, v, do, stats, dq, dk, dv,
    scale) (layout="varlen": ..., cu_q, cu_k, max_k, scale), stats from
    attention_prep; BQ query rows a step (64, or 128 at D = 64). dq is an
    f32 accumulator laid out as q, zeroed (by attention_prep), that receives
    scale * dS K: by TMA reduce-adds of a shared tile (dq="tma", the default:
    0.83-0.89 of the paired atomics' time on the H100, 0.61-0.76 when each
    element was its own atomic; through a sequence's slice for varlen, where
    rows past its end add exact zeros) or by atomic adds from registers
    (dq="atomic", a red.global.add.v2.f32 per column pair, clipped at the
    edges; the default at D = 256, where a shared dQ tile does not fit).

    D = 256 (backward_split): a block owns BKV_WIDE = 64 keys; one warpgroup
    computes S^T and P^T, the other dP^T and then dS^T (P^T handed over in
    shared memory), and each keeps half of D of dK and dV and computes that
    half of dQ, from P^T and dS^T in shared memory.

    persistent (tkc.kernel's): True, one block an SM over the work items (key
    block, KV head, batch) in grid order, K and V in one slot (two do not fit
    beside the ring and dQ's tiles: the next item's load waits for this
    item's last dQ wgmma); "zigzag", the rounds of items dealt forwards and
    backwards. Causal items shrink along the key blocks, so a zigzag block's
    long and short items pair up (not in tkc.attention: see "Warp ids"
    in attention_picks.py).

    overlap (D <= 128): the wait for S^T leaves dP^T's wgmma in flight and
    the one for dP^T dV's, so that P^T and dS^T are computed under the
    tensor cores' work (FlashAttention-3's intra-warpgroup overlap).
    dq_first (D <= 128): dK's wgmma is issued after dQ's and left in flight
    through dQ's store, into the next tile (whose first wait retires it;
    tk-pipeline-staging holds the Q/dO slot it reads until then).
    ds_slots (D <= 128): dS^T's shared tiles; with 2 the query tiles
    alternate between them, so that writing one needs no barrier for the
    last tile's dQ wgmmas (the barrier before dQ's wgmma orders those of two
    tiles back).
    early_stats (D <= 128): the tile's lse is read from shared memory
    before the wait for S^T and delta before the one for dP^T, so that
    those loads' latency passes under the wgmmas (a stall profile put 11%
    of the samples at D = 128 on the subtractions waiting for them); it
    costs the registers of two row vectors while the wgmmas run.
    stats_acc (D <= 128, not with early_stats): S^T's accumulator starts
    at -lse / c and dP^T's at -delta (both read from shared memory before
    the wgmmas are issued), so that the wgmmas subtract the statistics: P^T
    = exp2(c S^T') and dS^T = P^T dP^T', with no subtraction waiting for a
    statistic's load after the wgmma's wait.
    dkv_tma (default: True where it can be, i.e. not varlen and not
    persistent): dK and dV leave through K's and V's shared tiles (free
    once the block's last wgmma has read them) by TMA stores, instead of
    from registers (4-byte stores, clipped). A TMA store cannot clip to a
    varlen sequence's slice; a persistent block's K and V slots are the
    next item's.
    store_warp (dq="tma", not persistent): dQ's TMA adds are issued by a
    warp of the producer warpgroup (tkc.range's store_warp), so the
    consumer warpgroups no longer meet before each add; False: by consumer
    warp 0 after that meeting (0.90-1.00 of the speed at D 64 and 128 on
    the H100, attention_picks.BWD_SCHEDULE's comment).
    dq_slots (with the store warp): dQ's shared tiles; with 1 the consumers
    write the next tile's dQ once the store warp's add has read the last one
    (an iteration later), which frees 32 KB for a deeper Q/dO ring.
    dq_convert (D <= 128, not varlen or persistent): the kernel also takes
    dq16 (bf16, laid out as q), count (i32 [1, 1, B, Hkv], zeroed) and
    convert (0 or 1) after dv: each block counts itself done on its KV
    head's counter once its dQ adds have completed (tkc.ops.atomic_add), and
    with convert the last of the head's blocks converts the group's dQ
    accumulator to dq16, while it is still in L2: no launch of its own,
    and no second read of the accumulator from memory. On the H100 it
    measured 0.96-1.03 of the conversion launch (counting the blocks costs
    what converting saves; docs/attention.md), so tkc.attention does not
    use it; nor dq_slots=1 (0.96-0.97 at locked clocks).
    dq_deinterleave (dq="tma", not dq_convert): dQ's shared tile is written by
    stmatrix with each 8 columns as their evens, then their odds (store's
    deinterleave: no bank conflicts, half the store instructions), so the
    accumulator holds them in that order: dq_result undoes it. On the H100
    the kernel measured 0.95-0.97 of the pair stores' speed (stmatrix holds
    the MIO queue longer: docs/attention.md), so tkc.attention does not use it.
    dq_packed (dq="atomic"): each lane adds its four values of a 16-column
    block and row as one red.global.add.v4.f32, at columns 4t .. 4t + 3
    (store's packed), where the pairs took two; dq_result undoes the order.
    The L2's reductions bound those adds: at D = 256 the kernel is 1.18-1.24
    faster on the H100 (BENCHMARKS.md 2026-11-27 session 6), so tkc.attention
    takes it there."""
    dq = dq or ("atomic" if D == 256 else "tma")
    if dq not in ("atomic", "tma"):
        raise TkcError(f"attention backward: dq must be 'atomic' or 'tma', got {dq!r}")
    if D not in HEAD_DIMS:
        raise TkcError(f"attention backward: head dim {D} is not supported (one of {HEAD_DIMS})")
    if layout not in LAYOUTS:
        raise TkcError(f"attention backward: layout must be one of {LAYOUTS}, got {layout!r}")
    tma_out = layout != "varlen" and not persistent   # dkv_tma's default
    name = "_".join(x for x in (f"attn_bwd_d{D}", "causal" if causal else "", layout,
                                "" if stages == 2 else f"s{stages}", "" if dq == "tma" else "dqatomic",
                                "" if BQ == 64 else f"q{BQ}", f"fma{round(ex2_fma * 100)}" if ex2_fma else "",
                                "" if not persistent else "zigzag" if persistent == "zigzag" else "persistent",
                                "overlap" if overlap else "", "dqfirst" if dq_first else "",
                                "es" if early_stats else "", "" if ds_slots == 1 else f"ds{ds_slots}",
                                "" if store_warp else "warp0",
                                "" if dkv_tma is None or dkv_tma == tma_out else "dkvtma" if dkv_tma else "dkvreg",
                                "sacc" if stats_acc else "", "cvt" if dq_convert else "",
                                "" if dq_slots == 2 else f"dqs{dq_slots}", "dqdi" if dq_deinterleave else "",
                                "dqpk" if dq_packed else "")
                     if x)
    if BQ not in (64, 128) or (BQ == 128 and D != 64):
        raise TkcError(f"attention backward: BQ must be 64, or 128 at D = 64 (shared memory), "
                       f"got {BQ!r} at D = {D}")
    if dq_slots not in (1, 2) or (dq_slots == 1 and not (store_warp and dq == "tma" and not persistent)):
        raise TkcError(f"attention backward: dq_slots must be 2, or 1 with the store warp, got {dq_slots!r}")
    if ds_slots not in (1, 2):
        raise TkcError(f"attention backward: ds_slots must be 1 or 2, got {ds_slots!r}")
    if stats_acc and (D == 256 or early_stats):
        raise TkcError("attention backward: stats_acc needs D <= 128 and early_stats=False "
                       "(both place the statistics' loads)")
    if D == 256 and (overlap or dq_first or early_stats or ds_slots > 1):
        raise TkcError("attention backward: overlap, dq_first, early_stats and ds_slots schedule the D <= 128 body; "
                       "at D = 256 the warpgroups split the work by operand (backward_split)")
    if D == 256 and dq == "tma":
        raise TkcError("attention backward: at D = 256 dQ goes by atomic adds (dq='atomic'): "
                       "a shared dQ tile ring (128 KB) does not fit beside K, V and the Q/dO ring")
    if dkv_tma and not tma_out:
        raise TkcError("attention backward: dkv_tma needs a layout other than varlen (a TMA store cannot "
                       "clip to a sequence's slice) and a kernel that is not persistent (K's and V's slots "
                       "hold the next item's)")
    if dq_convert and (D == 256 or layout == "varlen" or persistent or dq != "tma"):
        raise TkcError("attention backward: dq_convert needs D <= 128, dq='tma', a layout other than "
                       "varlen (one counter a KV head of a batch) and a kernel that is not persistent")
    if dq_packed and dq != "atomic":
        raise TkcError("attention backward: dq_packed orders dQ's atomic adds (dq='atomic')")
    if dq_deinterleave and (dq != "tma" or dq_convert):
        raise TkcError("attention backward: dq_deinterleave orders dQ's shared tile for its TMA adds "
                       "(dq='tma'), and dq_convert reads the accumulator in its natural order")
    dkv_tma = tma_out if dkv_tma is None else dkv_tma
    by_tma = dq == "tma"
    by_rows = BQ == 128              # dQ split between the warpgroups by rows, else by columns

    def masked(p, key0, query0, Lk, shift):
        """P^T (a warp's 16 keys from key0, BQ queries from query0) with the
        keys past Lk (zero, or the next sequence's) and, causal, those past
        the diagonal zeroed; only a warp whose keys reach either masks."""
        edge = key0 + 16 > Lk
        if causal:
            edge = edge | (key0 + 15 > query0 + shift)
        with tkc.if_(edge):
            key = iota(rt(f32, 16, BQ), 0, start=key0)
            keep = key < Lk
            if causal:
                keep = keep & (key <= iota(rt(f32, 16, BQ), 1, start=query0 + shift))
            p = where(keep, p, 0.0)
        return p

    def query_tiles(kb, keys, Lq, Lk):
        """(shift, first, per_head) of a block of `keys` keys from kb * keys:
        causal query i sees key j iff j <= i + shift, so the block's keys are
        seen from query tile `first` on (0 without the mask), per_head query
        tiles of each head."""
        shift = Lk - Lq
        nq = tkc.cdiv(Lq, BQ)
        first = 0
        if causal:
            first = tkc.min(tkc.max(kb * keys - shift, 0) // BQ, nq)
        return shift, first, nq - first

    def convert_dq(dq_acc, dq16, count, convert, Lq, Lk, h0, group, tile, at):
        """dq_convert: this block counts itself done on its KV head's counter
        (at: its element) once its dQ adds have completed; the last one,
        with convert, converts the group's accumulator, each warp CONVERT_ROWS
        rows a step, each row a flat vector (a lane's D / 32 adjacent
        elements: whole lines a load), all loaded before the first store so
        that 8 KB a warp are in flight."""
        done = atomic_add(count, 1, at=at, after=dq_acc)
        R = CONVERT_ROWS[D]
        per = tkc.cdiv(Lq, R * WARPS)
        with tkc.if_((done == tkc.cdiv(Lk, BKV) - 1) & (convert != 0)):
            for j in tkc.range(group * per):
                h, row0 = h0 + j // per, ((j % per) * WARPS + tkc.warpid()) * R
                xs = [load(rv(f32, D, "flat"), dq_acc, tile(h, row0 + r), fill=0.0) for r in range(R)]
                for r, x in enumerate(xs):
                    store(dq16, x.to(bf16), tile(h, row0 + r), clip=True)

    def backward(q, k, v, do, stats, dq_acc, dk, dv, scale, kb, h0, group, tile, vec, out, cvt=None):
        """One block: keys kb * BKV.. of KV head h0 // group's tiles `tile(h, t)`,
        against every query tile of heads h0 .. h0 + group - 1 that sees them;
        vec(h, row, t): coordinates of query tile t's BQ statistics (row 0:
        lse * log2 e, 1: delta); out(h, t): of a warp's 16 rows of dK and dV;
        cvt: (dq16, count, convert, the counter's element) for dq_convert."""
        wg, w = tkc.warpgroupid(), tkc.warpid()
        Lq, Lk = q.r, k.r
        hk = h0 // group
        k_s, v_s = st(bf16, BKV, D, "auto" if D == 128 or by_rows else "64b"), st(bf16, BKV, D)
        q_s, do_s = st(bf16, BQ, D), st(bf16, BQ, D)
        ring_s = st(bf16, ds_slots * BKV, BQ)   # dS^T, both warpgroups' keys, ds_slots tiles
        lse_s, delta_s = sv(f32, BQ), sv(f32, BQ)
        dq_s = st(f32, BQ, D) if by_tma else None
        tma.load(k_s, k, tile(hk, kb))
        tma.load(v_s, v, tile(hk, kb))
        key0 = kb * BKV + w * 16         # this warp's first key
        shift, first, per_head = query_tiles(kb, BKV, Lq, Lk)
        dk_r, dv_r = zero(rt(f32, 16, D)), zero(rt(f32, 16, D))
        c = scale * LOG2E
        warp = bool(store_warp and by_tma and not persistent)
        for it in tkc.range(per_head * group, stages=stages, registers=(24, 240), store_warp=warp,
                            store_slots=dq_slots if warp else None):
            h, i = h0 + it // per_head, first + it % per_head
            tma.load(q_s, q, tile(h, i))
            tma.load(do_s, do, tile(h, i))
            # the tile's statistics, one per query (column), come with it
            # through the ring (padded to whole tiles by attention_prep): read
            # from shared memory where they are used, no global latency there
            tma.load(lse_s, stats, vec(h, 0, i))
            tma.load(delta_s, stats, vec(h, 1, i))
            # S^T and dP^T of the warpgroup's 64 keys (rows: each warp 16)
            # and the tile's queries: P^T and dS^T are then in registers in
            # the layout of a wgmma's A, for dV += P^T dO and dK += dS^T Q
            stat = lambda v: load(rv(f32, BQ, "row"), v)   # noqa: E731
            s, dp = zero(rt(f32, 16, BQ)), zero(rt(f32, 16, BQ))
            if stats_acc:                # the wgmmas subtract the statistics
                lse, delta = stat(lse_s), stat(delta_s)
                s, dp = sub_col(s, lse * (1.0 / c)), sub_col(dp, delta)
            warpgroup.mma_ABt(s, subtile(k_s, 64, D, (wg, 0)), q_s)
            warpgroup.mma_ABt(dp, subtile(v_s, 64, D, (wg, 0)), do_s)
            # early_stats: each statistic read from shared memory under a
            # wgmma (lse under S^T's, delta under dP^T's), not after its wait
            lse = stat(lse_s) if early_stats else None
            # overlap: P^T under dP^T's wgmma, dS^T under dV's
            warpgroup.mma_async_wait(*((s,) if overlap else (s, dp)), pending=int(overlap))
            if not (early_stats or stats_acc):
                lse = stat(lse_s)
            p = masked(exp2(s * c if stats_acc else sub_col(s * c, lse), fma=ex2_fma), key0, i * BQ, Lk, shift)
            pb = p.to(bf16)
            warpgroup.mma_AB(dv_r, pb, do_s)                           # dV += P^T dO
            delta = stat(delta_s) if early_stats else None
            if overlap:
                warpgroup.mma_async_wait(dp, pending=1)
            if not (early_stats or stats_acc):
                delta = stat(delta_s)
            ds = (p * (dp if stats_acc else sub_col(dp, delta))).to(bf16)
            if not dq_first:
                warpgroup.mma_AB(dk_r, ds, q_s)                        # dK += dS^T Q
            dst_s = subtile(ring_s, BKV, BQ, (it % ds_slots, 0)) if ds_slots > 1 else ring_s
            # the last tile's dQ mmas (both warpgroups) read dst_s; with two
            # slots, tile it - 2's were retired before tile it - 1's barrier
            # below (a persistent work item's first tile still meets: the
            # last item's final slot is not known)
            if ds_slots == 1:
                tkc.sync()
            elif persistent:
                with tkc.if_(it == 0):
                    tkc.sync()
            warpgroup.store(subtile(dst_s, 64, BQ, (wg, 0)), ds, (0, 0))
            tkc.fence_async()
            tkc.sync()
            if by_rows:
                dqp = warpgroup.mma_AtB(subtile(dst_s, BKV, 64, (0, wg)), k_s, zero(rt(f32, 16, D)))
            else:
                dqp = warpgroup.mma_AtB(dst_s, subtile(k_s, BKV, D // 2, (0, wg)),
                                        zero(rt(f32, 16, D // 2)))
            if dq_first:                 # dK's wgmma after dQ's, in flight through dQ's store
                warpgroup.mma_AB(dk_r, ds, q_s)                        # dK += dS^T Q
                warpgroup.mma_async_wait(dqp, dv_r, pending=1)
            else:
                warpgroup.mma_async_wait(dqp, dv_r, dk_r)
            if by_tma:
                part = subtile(dq_s, 64, D, (wg, 0)) if by_rows else subtile(dq_s, BQ, D // 2, (0, wg))
                warpgroup.store(part, dqp * scale, (0, 0), deinterleave=dq_deinterleave)
                tma.store_add(dq_acc, dq_s, tile(h, i))
            else:                        # this warp's 16 rows of its part, atomically
                b, d, r, col = tile(h, i * (BQ // 16) + w % 4 + (4 * wg if by_rows else 0))
                store(dq_acc, dqp * scale, (b, d, r, col if by_rows else col * 2 + wg),
                      clip=True, add=True, packed=dq_packed)
        if dq_first:
            warpgroup.mma_async_wait(dk_r)
        if dkv_tma:                      # through K's and V's tiles: see dkv_tma
            tkc.sync()                   # every warpgroup's last wgmma read them
            warpgroup.store(k_s, (dk_r * scale).to(bf16), (wg, 0))
            warpgroup.store(v_s, dv_r.to(bf16), (wg, 0))
            tma.store(dk, k_s, tile(hk, kb))
            tma.store(dv, v_s, tile(hk, kb))
        else:
            b, d, r, col = out(hk, kb * (BKV // 16) + w)
            store(dk, (dk_r * scale).to(bf16), (b, d, r, col), clip=True)
            store(dv, dv_r.to(bf16), (b, d, r, col), clip=True)
        if cvt is not None:
            convert_dq(dq_acc, *cvt[:3], Lq, Lk, h0, group, tile, cvt[3])

    def backward_split(q, k, v, do, stats, dq_acc, dk, dv, scale, kb, h0, group, tile, vec, out):
        """D = 256, one block: as `backward`, BKV_WIDE keys, the work split
        by operand (S^T / dP^T) and then by halves of D."""
        wg, w = tkc.warpgroupid(), tkc.warpid()
        Lq, Lk, H = q.r, k.r, D // 2
        hk = h0 // group
        k_s, v_s = st(bf16, BKV_WIDE, D), st(bf16, BKV_WIDE, D)
        q_s, do_s = st(bf16, BQ, D), st(bf16, BQ, D)
        # P^T in two slots (warpgroup 0 writes the next tile's while the other may
        # still read this one), dS^T in one (written after the tile's first barrier)
        p_ring, ds_s = st(bf16, 2 * BKV_WIDE, BQ), st(bf16, BKV_WIDE, BQ)
        lse_s, delta_s = sv(f32, BQ), sv(f32, BQ)
        tma.load(k_s, k, tile(hk, kb))
        tma.load(v_s, v, tile(hk, kb))
        key0 = kb * BKV_WIDE + (w % 4) * 16   # this warp's first key (both warpgroups)
        shift, first, per_head = query_tiles(kb, BKV_WIDE, Lq, Lk)
        dk_r, dv_r = zero(rt(f32, 16, H)), zero(rt(f32, 16, H))   # this warpgroup's half of D
        c = scale * LOG2E
        for it in tkc.range(per_head * group, stages=stages, registers=(24, 240)):
            h, i = h0 + it // per_head, first + it % per_head
            tma.load(q_s, q, tile(h, i))
            tma.load(do_s, do, tile(h, i))
            tma.load(lse_s, stats, vec(h, 0, i))   # through the ring, as in `backward`
            tma.load(delta_s, stats, vec(h, 1, i))
            query0 = i * BQ
            dp = zero(rt(f32, 16, BQ))   # (assigned by warpgroup 1's branch)
            p_s = subtile(p_ring, BKV_WIDE, BQ, (it % 2, 0))
            with tkc.if_(wg == 0):       # P^T = exp(S^T - L), masked, to shared memory
                s = warpgroup.mma_async_wait(warpgroup.mma_ABt(k_s, q_s, zero(rt(f32, 16, BQ))))
                p = masked(exp2(sub_col(s * c, load(rv(f32, BQ, "row"), lse_s))), key0, query0, Lk, shift)
                warpgroup.store(p_s, p.to(bf16))
            with tkc.else_():            # dP^T, meanwhile
                dp = warpgroup.mma_async_wait(warpgroup.mma_ABt(v_s, do_s, zero(rt(f32, 16, BQ))))
                dp = sub_col(dp, load(rv(f32, BQ, "row"), delta_s))
            tkc.sync()                   # P^T written; the last tile's mmas done with ds_s
            with tkc.if_(wg == 1):       # dS^T = P^T * (dP^T - delta)
                p = warpgroup.load(rt(bf16, 16, BQ), p_s)
                warpgroup.store(ds_s, (p.to(f32) * dp).to(bf16))
            tkc.fence_async()
            tkc.sync()
            dqp = warpgroup.mma_AtB(ds_s, subtile(k_s, BKV_WIDE, H, (0, wg)), zero(rt(f32, 16, H)))
            warpgroup.mma_AB(dv_r, p_s, subtile(do_s, BQ, H, (0, wg)))   # dV += P^T dO
            warpgroup.mma_AB(dk_r, ds_s, subtile(q_s, BQ, H, (0, wg)))   # dK += dS^T Q
            warpgroup.mma_async_wait(dqp, pending=2)
            b, d, r, col = tile(h, i * (BQ // 16) + w % 4)
            store(dq_acc, dqp * scale, (b, d, r, col * 2 + wg), clip=True, add=True, packed=dq_packed)
            warpgroup.mma_async_wait(dv_r, dk_r)
        if dkv_tma:                      # through K's and V's tiles, as in `backward`
            tkc.sync()
            warpgroup.store(subtile(k_s, BKV_WIDE, H, (0, wg)), (dk_r * scale).to(bf16), (0, 0))
            warpgroup.store(subtile(v_s, BKV_WIDE, H, (0, wg)), dv_r.to(bf16), (0, 0))
            tma.store(dk, k_s, tile(hk, kb))
            tma.store(dv, v_s, tile(hk, kb))
            return
        b, d, r, col = out(hk, kb * (BKV_WIDE // 16) + w % 4)
        store(dk, (dk_r * scale).to(bf16), (b, d, r, col * 2 + wg), clip=True)
        store(dv, dv_r.to(bf16), (b, d, r, col * 2 + wg), clip=True)

    keys = BKV_WIDE if D == 256 else BKV   # a block's keys
    body = backward_split if D == 256 else backward

    Q, K = _layout_dims(layout, D)
    QF = _layout_dims(layout, D, f32)[0]
    # warp ids uniform for ptxas, but not in the persistent loop: "Warp ids" in attention_picks.py
    options = dict(spills=SPILLS, **(dict(persistent=persistent, order="xyz") if persistent
                                     else dict(uniform_ids="warp")))
    if layout == "varlen":
        @tkc.kernel(name=name, warps=8, divisible={"HqD": "HkvD", "HkvD": D}, **options,
                    grid=lambda q, k, v, do, stats, dq, dk, dv, cu_q, cu_k, max_k, scale:
                    (tkc.cdiv(max_k, keys), k.c // D, cu_q.c - 1))
        def bwd(q: Q, k: K, v: K, do: Q, stats: gl(f32, 1, "Hq", 2, None), dq: QF, dk: K, dv: K,
                cu_q: gl(i32, 1, 1, 1, "B1"), cu_k: gl(i32, 1, 1, 1, "B1"), max_k: tkc.i32,
                scale: tkc.f32):
            kb, hk, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
            q0, q1 = load(i32, cu_q, at=(0, 0, 0, b), fill=0), load(i32, cu_q, at=(0, 0, 0, b + 1), fill=0)
            k0, k1 = load(i32, cu_k, at=(0, 0, 0, b), fill=0), load(i32, cu_k, at=(0, 0, 0, b + 1), fill=0)
            group = q.c // k.c
            sq, sk = (lambda g: g.slice("r", q0, q1 - q0)), (lambda g: g.slice("r", k0, k1 - k0))
            t0 = _stats_start(q0, b) // BQ
            body(sq(q), sk(k), sk(v), sq(do), stats, sq(dq), sk(dk), sk(dv),
                 scale, kb, hk * group, group, lambda h, t: (0, 0, t, h),
                 lambda h, row, t: (0, h, row, t0 + t), lambda h, t: (0, 0, t, h))
        return bwd

    relation = {"Hq": "Hkv"} if layout == "bhld" else {"HqD": "HkvD", "HkvD": D}

    def grid(q, k, *_):
        heads = k.d if layout == "bhld" else k.c // D
        return (tkc.cdiv(k.r, keys), heads, k.b if layout == "bhld" else k.d)

    def run(q, k, v, do, stats, dq, dk, dv, scale, cvt=None):
        kb, hk, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        group = stats.d // (k.d if layout == "bhld" else k.c // D)
        tile = (lambda h, t: (b, h, t, 0)) if layout == "bhld" else (lambda h, t: (0, b, t, h))
        body(q, k, v, do, stats, dq, dk, dv, scale, kb, hk * group, group, tile,
             lambda h, row, t: (b, h, row, t), tile,
             *([(*cvt, (0, 0, b, hk))] if cvt else []))

    if dq_convert:
        @tkc.kernel(name=name, warps=8, divisible=relation, grid=grid, **options)
        def bwd(q: Q, k: K, v: K, do: Q, stats: gl(f32, "B", "Hq", 2, None), dq: QF, dk: K, dv: K,
                dq16: Q, count: gl(i32, 1, 1, "B", None), convert: tkc.i32, scale: tkc.f32):
            run(q, k, v, do, stats, dq, dk, dv, scale, (dq16, count, convert))
        return bwd

    @tkc.kernel(name=name, warps=8, divisible=relation, grid=grid, **options)
    def bwd(q: Q, k: K, v: K, do: Q, stats: gl(f32, "B", "Hq", 2, None), dq: QF, dk: K, dv: K,
            scale: tkc.f32):
        run(q, k, v, do, stats, dq, dk, dv, scale)

    return bwd
