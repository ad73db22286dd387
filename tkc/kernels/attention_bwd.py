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
"""
from __future__ import annotations

import dataclasses
import functools
import math

import tkc
from tkc import bf16, f32, gl, i32, rt, rv, st, sv, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import atomic_add, exp2, iota, load, store, sub_col, subtile, sum, where, zero

from .attention_hopper import HEAD_DIMS, LAYOUTS, LOG2E, attention_hopper

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
# (before f62fbe8) up to 160 for dq="atomic" at BQ = 128 (scripts/attention_dq.py).
SPILLS = 192
WARPS_PREP = 4
# Query rows a warp of attention_prep: enough that a warp has 1 KB of O and
# dO in flight (one 128-byte row of each at D = 64 left the kernel at 47% of
# the HBM bandwidth on the H100: too few bytes in flight for its latency).
ROWS_PREP = {64: 4, 128: 2, 256: 1}
STATS_ALIGN = 128           # the statistics' rows: whole query tiles (attention_prep)


def _layout_dims(layout: str, D: int, dtype=bf16):
    """(q-like gl, k-like gl) annotations of a layout, in dtype."""
    if layout == "bhld":
        return gl(dtype, "B", "Hq", "Lq", D), gl(dtype, "B", "Hkv", "Lk", D)
    if layout == "blhd":
        return gl(dtype, 1, "B", "Lq", "HqD"), gl(dtype, 1, "B", "Lk", "HkvD")
    return gl(dtype, 1, 1, "Tq", "HqD"), gl(dtype, 1, 1, "Tk", "HkvD")


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
    below BWD_SCHEDULE).

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
    the H100, BWD_SCHEDULE's comment).
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
    # warp ids uniform for ptxas, but not in the persistent loop: "Warp ids" below BWD_SCHEDULE
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


def dq_order(options: dict) -> str | None:
    """The column order attention_bwd's `options` leave dQ's accumulator in
    (dq_result's `order`)."""
    return "packed" if options.get("dq_packed") else "deinterleave" if options.get("dq_deinterleave") else None


def dq_result(dq, dtype, order: str | None = None):
    """The backward's dQ in `dtype` from its f32 accumulator (a torch tensor,
    head dim last), one strided copy: order "deinterleave" (each 8 columns
    held as their evens, then their odds: dq_deinterleave) or "packed" (of
    each 16, columns 2t, 2t + 1, 2t + 8, 2t + 9 held at 4t .. 4t + 3:
    dq_packed)."""
    import torch
    if order is None:
        return dq.to(dtype)
    out = torch.empty_like(dq, dtype=dtype)   # dq's strides (its layout)
    if order == "deinterleave":
        out.unflatten(-1, (-1, 4, 2)).copy_(dq.unflatten(-1, (-1, 2, 4)).transpose(-1, -2))
    else:
        out.unflatten(-1, (-1, 2, 4, 2)).copy_(dq.unflatten(-1, (-1, 4, 2, 2)).transpose(-3, -2))
    return out


def stats_columns(Lq: int, batches: int | None = None) -> int:
    """Columns of the backward's statistics (attention_prep's output) for Lq
    query rows; varlen (batches = B, Lq = Tq): each sequence starts at a
    multiple of STATS_ALIGN, at most one STATS_ALIGN after its packed row."""
    pad = -(-Lq // STATS_ALIGN) * STATS_ALIGN
    return pad if batches is None else pad + batches * STATS_ALIGN


def _stats_start(q0, b):
    """Where varlen sequence b (from packed row q0) starts in the statistics:
    FlashAttention-3's padded offsets, (q0 + b * A) rounded down to A. Each
    sequence's whole tiles end before the next's start."""
    return (q0 + b * STATS_ALIGN) // STATS_ALIGN * STATS_ALIGN


def attention_prep(D: int = 128, layout: str = "bhld"):
    """The backward's preprocessing, ROWS_PREP[D] query rows a warp (their o
    and dO rows as flat vectors, all loaded before the first sum): the
    statistics the backward reads,
    stats[b, h, 0, i] = lse * log2 e and stats[b, h, 1, i] = delta =
    sum_d dO * O, for i up to Lq rounded up to whole tiles (STATS_ALIGN:
    stats_columns), the rows past Lq +inf and 0, so that their P is 0; and
    it zeroes the backward's f32 dQ accumulator (laid out as o) row by row,
    as FlashAttention-3's preprocessing does, instead of a memset launch of
    its own. prep(o, do, lse, stats, dq) with lse [B, Hq, 1, Lq] and stats
    [B, Hq, 2, stats_columns(Lq)]; varlen: prep(o, do, lse, stats, dq, cu_q,
    max_q) with lse [1, Hq, 1, Tq] and stats [1, Hq, 2, stats_columns(Tq,
    B)], sequence b's rows at _stats_start (FlashAttention-3's padded
    offsets); rows of dq outside every sequence are not written (the
    offsets rise from 0 to Tq: tkc.attention_varlen checks them)."""
    if layout not in LAYOUTS:
        raise TkcError(f"attention backward: layout must be one of {LAYOUTS}, got {layout!r}")
    W, R = WARPS_PREP, ROWS_PREP[D]
    Q = _layout_dims(layout, D)[0]
    QF = _layout_dims(layout, D, f32)[0]

    def rows(o, do, lse, stats, dq, at, h, i0, b=0):
        """Rows i0 .. i0 + R - 1; at(i): the coordinates of row i in o, dO
        and dq. Every load is issued before the first store (which could
        alias them)."""
        ii = [i0 + r for r in range(R)]
        xs = [load(rv(f32, D, "flat"), o, at(i), fill=0.0) for i in ii]
        ys = [load(rv(f32, D, "flat"), do, at(i), fill=0.0) for i in ii]
        ls = [load(f32, lse, at=(b, h, 0, i), fill=math.inf) for i in ii]
        for i, x, y, lse_i in zip(ii, xs, ys, ls):
            store(stats, lse_i * LOG2E, at=(b, h, 0, i), clip=True)
            store(stats, sum(x * y), at=(b, h, 1, i), clip=True)
            store(dq, zero(rv(f32, D, "flat")), at(i), clip=True)

    if layout == "varlen":
        @tkc.kernel(name=f"attn_prep_d{D}_varlen", warps=W,
                    grid=lambda o, do, lse, stats, dq, cu_q, max_q:
                    (tkc.cdiv(max_q, STATS_ALIGN) * (STATS_ALIGN // (W * R)), lse.d, cu_q.c - 1))
        def prep(o: Q, do: Q, lse: gl(f32, 1, "Hq", 1, "Tq"), stats: gl(f32, 1, "Hq", 2, None), dq: QF,
                 cu_q: gl(i32, 1, 1, 1, "B1"), max_q: tkc.i32):
            i, h, b = (tkc.block_idx.x * W + tkc.warpid()) * R, tkc.block_idx.y, tkc.block_idx.z
            q0, q1 = load(i32, cu_q, at=(0, 0, 0, b), fill=0), load(i32, cu_q, at=(0, 0, 0, b + 1), fill=0)
            n = q1 - q0
            rows(o.slice("r", q0, n), do.slice("r", q0, n), lse.slice("c", q0, n),
                 stats.slice("c", _stats_start(q0, b), tkc.cdiv(n, STATS_ALIGN) * STATS_ALIGN),
                 dq.slice("r", q0, n), lambda i: (0, 0, i, h), h, i)
        return prep

    def grid(o, do, lse, stats, dq):
        return (stats.c // (W * R), stats.d, stats.b)

    @tkc.kernel(name=f"attn_prep_d{D}_{layout}", warps=W, grid=grid)
    def prep(o: Q, do: Q, lse: gl(f32, "B", "Hq", 1, "Lq"), stats: gl(f32, "B", "Hq", 2, None), dq: QF):
        i, h, b = (tkc.block_idx.x * W + tkc.warpid()) * R, tkc.block_idx.y, tkc.block_idx.z
        rows(o, do, lse, stats, dq, (lambda i: (b, h, i, 0)) if layout == "bhld" else (lambda i: (0, b, i, h)),
             h, i, b)

    return prep


# Keys from which FlashAttention-3's schedule (ping-pong + intra-warpgroup
# overlap) is the faster forward, per head dim: its loop runs one extra
# iteration, which short sequences do not amortise (H100, BENCHMARKS.md).
# D 256 without the mask from 1024 since its forwards store O through Q's
# tile: long over short 0.973-0.994 at 512 keys, 1.035-1.038 at 1k; with the
# mask 0.941 and 0.988, so there the long one starts at 2048 still
# (CAUSAL_LONG_KEYS; ncu, locked clocks, BENCHMARKS.md 2026-11-27 session 8).
LONG_KEYS = {64: 8192, 128: 2048, 256: 1024}
CAUSAL_LONG_KEYS = {256: 2048}
# Keys below which one consumer warpgroup a block (64 query rows), two blocks
# an SM, is the faster causal forward: small blocks even out the causal work
# that 128- or 192-row ones leave uneven. On the H100 (BENCHMARKS.md,
# 2026-11-25), tkc / cuDNN against the short forward: D 64 0.69 -> 0.86 at
# L 1k, 0.83 -> 0.92 at 2k, 0.89 -> 0.94 at 4k; D 128 (64-key tiles, to fit
# two blocks) 0.88 -> 0.93 at L 1k, 0.95 -> 0.89 at 4k. From LONG_KEYS on
# the long forward is ahead of both.
PAIRED_CAUSAL_KEYS = {64: LONG_KEYS[64], 128: LONG_KEYS[128]}
PAIRED_KV = {64: 128, 128: 64}      # key tiles of the paired forward (shared memory)
# Whether the (short, long) forward without a mask is persistent, per head
# dim: a block an SM over the work items, the next item's Q loaded under
# this one's last tiles. On the H100 (BENCHMARKS.md, 2026-11-25), tkc / cuDNN:
# the short one 0.84 -> 0.97 at L 1k and D 64, 0.82 -> 0.98 at D 128, +5% at
# 4k; the long one at D 128 +2-4% from 4k, at D 64 1-1.5% slower (8k, 16k).
# D 256's two Q slots do not fit beside its ring. With the causal mask
# (BENCHMARKS.md, 2026-11-24), or varlen's sequences of mixed lengths, the
# static order leaves the SMs' work uneven; those stay a block a work item.
PERSISTENT = {64: (True, False), 128: (True, True), 256: (False, False)}
# Keys below which the causal forward is persistent with the items dealt in
# zigzag (rounds of one item a block, forwards and backwards: the longest
# query tiles come first in each head, so a block's long and short items
# pair up), per head dim, bhld and blhd. On the H100 (BENCHMARKS.md,
# 2026-11-25), tkc / cuDNN at D 128: 0.90 (paired) -> 1.05 at L 1k, 0.95
# (long) -> 1.01 at 2k, 0.97 -> 1.03 at 4k; at 16k 0.83 against the long
# forward's 1.08. At D 64 with two consumer warpgroups (ZIGZAG_BASE; three
# are slower at 1k) and a quarter of its exponentials on the FMA pipe
# (ZIGZAG_EX2_FMA), over the paired forward (BENCHMARKS.md, 2026-11-26):
# 1.058 / 1.016 / 0.976 / 0.939 at 1k / 2k / 4k / 8k in kernel time at
# locked clocks (ncu), 1.10 / 1.02-1.04 / 1.00-1.04 / 0.99-1.00 in three
# interleaved runs at boost clocks: below 4096 keys (with an eighth it was
# ahead only below 2048).
# At D 64 since 2026-11-27 (session 3), with the cheaper emulation
# (lowering/compute.py's ex2_fma), 3/8 on the FMA pipe and only the
# diagonal's mask, it is ahead of the paired forward at 4k too: 408 against
# 427 us (ncu, locked clocks), and even at 8k (776 against 782; from there
# the long forward runs), so tkc.attention's D 64 causal forward no longer
# takes the paired one (varlen still does).
ZIGZAG_CAUSAL_KEYS = {64: 8192, 128: 8192}
ZIGZAG_BASE = {64: dict(stages=2, consumers=2, diagonal_mask=True)}   # else the short forward's
# The long zigzag forward (D 128 from LONG_KEYS to ZIGZAG_CAUSAL_KEYS): the
# long forward's schedule, a diagonal tile masked once (attention_hopper's
# diagonal_mask; ncu at locked clocks, BENCHMARKS.md 2026-11-27 session 3:
# 1.042 / 1.030 / 1.019 faster at 1k / 2k / 4k, where D 128's short zigzag
# forward is 0.92-0.96 with it and keeps both masks).
ZIGZAG_LONG = dict(overlap=True, pingpong=True, diagonal_mask=True)
# The share of the zigzag forward's exponentials on the FMA pipe, per head
# dim (an interleaved run, tkc / cuDNN at 1k / 2k / 4k / 8k): 1/8 0.92 /
# 0.94 / 0.94 / 0.93, 1/4 0.95 / 0.95 / 0.96 / 0.95, 3/8 0.94 / 0.96 / 0.94
# / 0.93, 1/2 0.89 / 0.90 / 0.91 / 0.90 (ncu: 1/4 1.6-2.7% faster than
# 1/8). At D 64 the exponentials keep the MUFU about as busy as the two
# matrix products keep the tensor cores.
# Since the cheaper emulation (2026-11-27, session 3: 8 instructions an
# element, the softmax's fma folded into its clamp, where it took 10), with
# the diagonal's mask alone, kernel times at 1k / 2k / 4k / 8k (ncu, locked
# clocks, us; BENCHMARKS.md): a quarter 140 / 240 / 440 / 840, 3/8 132 /
# 225 / 408 / 776, a half 137 / 234 / 427 / 816; the old emulation at a
# quarter with both masks (tkc.attention's until then) 142 / 240 / 440 / 843.
ZIGZAG_EX2_FMA = {64: 0.375}
# The share of the softmax's exponentials computed on the FMA pipe (exp2's
# fma=; the rest on the MUFU) is ZIGZAG_EX2_FMA in D 64's zigzag causal
# forward and none elsewhere. The persistent forwards without the mask are
# 6-10% slower with an eighth, the long (ping-pong) ones 1-5%, D 128's zigzag
# forward equal (ncu, locked clocks; BENCHMARKS.md 2026-11-25 session 4).
# The D 128 backward without the mask took an eighth until 2026-11-27 (2-3%
# faster then; in blhd and varlen only since the store warp); with stats_acc
# none is 1.023-1.038 faster in blhd and 1.000-1.005 in bhld (L 1k / 4k / 16k;
# varlen, not measured, addressed as blhd).
# Query rows a step of the backward, per head dim: 128 at D = 64 (its S^T and
# dP^T fill the registers that D = 128's dK and dV take; 7-10% faster than
# 64 on the H100, BENCHMARKS.md), 64 at D = 128 (128 does not fit).
BWD_QUERIES = {64: 128, 128: 64, 256: 64}


# The backward's schedule per head dim (attention_bwd's overlap and
# dq_first), by kernel time at locked clocks on the H100 (ncu, BENCHMARKS.md
# 2026-11-26): overlap is 1.2-3.1% faster at D 64 and 0-1% at D 128;
# dq_first with it 0.6-4.6% at D 128 (bhld and blhd, L 1k and 4k). At D 64
# dq_first makes ptxas serialise the wgmmas (its registers): 6-9% slower;
# for varlen at D 128 it makes ptxas spill 64 bytes where the others spill
# 4-28 (not measured there: varlen keeps the overlap alone).
# early_stats at D 128 (2026-11-26 later, ncu at locked clocks, bhld / blhd,
# L 1k / 4k, causal and not): 1.003-1.010 over overlap + dq_first in all
# eight; ptxas spills 36-48 bytes where it spilled 4-28. At D 64 (BQ = 128:
# 32 registers a statistic) it spills about 500 bytes; for varlen at D 128
# 68 bytes with the mask (not measured: varlen keeps the overlap alone).
# ds_slots=2 (2026-11-26 evening; ncu at locked clocks, bhld / blhd, L 1k /
# 4k): 1.011-1.023 at D 64, 1.000-1.019 at D 128, causal and not (not
# measured for varlen, which keeps one).
# dQ's TMA adds by a store warp (attention_bwd's store_warp, since 2026-11-26
# night; before, consumer warp 0 issued them after the warpgroups met), ncu
# at locked clocks over the kernels before (BENCHMARKS.md 2026-11-26/27
# night): 1.03-1.10 without the mask, 0.995-1.035 with it (D 64 and 128; bhld,
# blhd and varlen; L 1k and 4k). At D 128 dq_first and early_stats then make
# ptxas serialise the wgmmas (its registers): they are dropped, and the
# store-warp kernel without them was the fastest one measured.
# stats_acc (2026-11-27; ncu at locked clocks over the schedule without it,
# bhld / blhd, L 1k / 4k / 16k; BENCHMARKS.md 2026-11-27): D 64 1.023-1.036,
# causal 1.017-1.057; D 128 1.076 / 1.096 / 1.114 in bhld and 1.027-1.038 in
# blhd, causal 1.040-1.061. ptxas spills less with it (the statistics' row
# vectors are no longer live after the waits): 0-32 bytes where it spilled 0-52.
# dq_packed at D = 256 (2026-11-27 session 6; dQ's atomic adds as 16-byte
# red.v4 where the pairs took two): 1.18-1.24 faster at locked clocks, L 1k
# and 4k, causal and not; the whole backward 0.77-0.86 -> 0.93-1.02 of cuDNN.
BWD_SCHEDULE = {64: dict(overlap=True, ds_slots=2, stats_acc=True),
                128: dict(overlap=True, ds_slots=2, stats_acc=True), 256: dict(dq_packed=True)}
# dK and dV through K's and V's shared tiles by TMA stores (attention_bwd's
# dkv_tma, the default outside varlen since 2026-11-27), over 4-byte stores
# from registers, ncu at locked clocks on the H100 (bhld / blhd, L 1k / 4k;
# BENCHMARKS.md 2026-11-27): D 128 1.08-1.09 / 0.99-1.03, causal 1.13-1.14 /
# 1.03-1.06; D 256 1.06-1.07 / 1.02, causal 1.08-1.11 / 1.02-1.03; D 64
# causal 1.09-1.10 / 1.03; D 64 without the mask 1.02-1.03 / 0.97-0.98:
# there the epilogue's four swizzled lane offsets, computed before the loop
# and live across it, make ptxas spill in the loop (68 bytes against 24).
# The (D, causal) pairs that keep the stores from registers, and the keys
# below which they still take the TMA stores: D 64 without the mask with
# stats_acc, over the register stores (BENCHMARKS.md 2026-11-27 later),
# 1.036-1.048 at L 1k, 0.987-0.994 at 4k, 0.966-0.989 at 16k (2k not
# measured).
DKV_REGISTERS = {(64, False): 2048}
# Warp ids: the backward's are warp-uniform for ptxas (tkc.kernel's
# uniform_ids="warp": a warpgroup's subtiles, a warp's keys and its rows of
# dK and dV on the uniform datapath). On the H100 (ncu, locked clocks,
# BENCHMARKS.md 2026-11-26 late), over the kernels before, where no id was:
# 1.017-1.051 at D 64 and 128, causal and not, bhld and blhd, L 1k and 4k,
# 1.004-1.045 at D 256; over "warpgroup" (the forwards'), 1.01-1.03. ptxas
# spills 8-20 bytes where it spilled 36-60. The persistent loop (which
# also holds its work item's coordinates) spills 240-364 bytes with either
# (0.76-0.81 of its speed), so the persistent backward keeps per-lane ids.
# Its zigzag twin, tkc.attention's causal backward at D 64 bhld below 8192
# keys until then (1.02 over a block an item), is now equalled by a block
# an item (370.9 against 372.0 us at L 1k, 1056.8 against 1062.8 at 4k), so
# tkc.attention no longer uses it.


@dataclasses.dataclass(frozen=True)
class AttentionKernels:
    """The kernels tkc.attention launches for one head dim, mask and layout;
    iterating gives each once (the build's list)."""
    short: tkc.Kernel                 # the forward
    long: tkc.Kernel                  # the forward from LONG_KEYS keys on
    prep: tkc.Kernel
    bwd: tkc.Kernel
    paired: tkc.Kernel                # causal below PAIRED_CAUSAL_KEYS (else short)
    zigzag: tuple = ()                # causal below ZIGZAG_CAUSAL_KEYS: short[, long]
    bwd_short: tkc.Kernel | None = None   # the backward below DKV_REGISTERS' keys (else bwd)

    def __iter__(self):
        return iter(dict.fromkeys((self.short, self.long, self.prep, self.bwd, self.paired, *self.zigzag,
                                   *([self.bwd_short] if self.bwd_short else []))))


@functools.lru_cache(maxsize=None)
def attention_kernels(D: int, causal: bool, layout: str) -> AttentionKernels:
    """The kernels as tkc.attention launches them. The forwards: 2 ring
    stages at D = 64 (faster than a deeper ring on the H100), the deepest
    that fits at D = 128 (2); three consumer warpgroups at D = 64, two at
    128; the long forward adds ping-pong and the intra-warpgroup overlap
    (for Lk >= LONG_KEYS[D], with the mask CAUSAL_LONG_KEYS[D] where it
    has D); the paired one (causal, Lk <
    PAIRED_CAUSAL_KEYS[D]) has one consumer warpgroup and two blocks an SM,
    PAIRED_KV[D] keys a tile (the short forward itself where there is none).
    Without the mask and varlen the short and long forwards are persistent
    where PERSISTENT says; with the mask, where ZIGZAG_CAUSAL_KEYS has the
    head dim (not varlen), the short forward (ZIGZAG_BASE) and, where
    LONG_KEYS is below ZIGZAG_CAUSAL_KEYS, the long one persistent in zigzag
    order run below those keys (the paired one only from there on).
    The backward steps BWD_QUERIES[D] query rows at a time, scheduled as
    BWD_SCHEDULE[D] says, a block a work item, dK and dV stored by TMA
    except for varlen and, from their keys on, where DKV_REGISTERS says
    (bwd_short: the TMA one below them). D = 256: 64-key
    tiles (Q and a 2-stage ring fill 192 KB), O through Q's tile (o_via_q;
    from registers for varlen): on the H100 1.11-1.15 faster at L 1k,
    1.03-1.05 at 4k and 1.01-1.02 at 16k than from registers (ncu, locked
    clocks; BENCHMARKS.md 2026-11-27 session 7); the backward splits its
    work by halves of D (attention_bwd)."""
    base = {64: dict(stages=2, consumers=3), 128: dict(stages="auto", consumers=2),
            256: dict(stages=2, consumers=2, KV=64, o_via_q=layout != "varlen")}[D]
    persistent = [p and not causal and layout != "varlen" for p in PERSISTENT[D]]
    short = attention_hopper(D, causal, layout, **base, persistent=persistent[0])
    long = attention_hopper(D, causal, layout, **base, overlap=True, pingpong=True,
                            persistent=persistent[1])
    zigzag = []                          # short, and long where LONG_KEYS comes first
    if causal and D in ZIGZAG_CAUSAL_KEYS and layout != "varlen":
        schedules = [{}] + ([ZIGZAG_LONG] if LONG_KEYS[D] < ZIGZAG_CAUSAL_KEYS[D] else [])
        zigzag = [attention_hopper(D, causal, layout, **{**ZIGZAG_BASE.get(D, base), **x}, persistent="zigzag",
                                   ex2_fma=0.0 if x else ZIGZAG_EX2_FMA.get(D, 0.0)) for x in schedules]
    paired_keys = ZIGZAG_CAUSAL_KEYS[D] if zigzag else 0     # below them the zigzag one runs
    paired = attention_hopper(D, causal, layout, stages=2, consumers=1, blocks_per_sm=2, KV=PAIRED_KV[D]) \
        if causal and PAIRED_CAUSAL_KEYS.get(D, 0) > paired_keys else short
    options = backward_options(D, causal, layout)
    bwd = attention_bwd(D, causal, layout, **options)
    bwd_short = (attention_bwd(D, causal, layout, **dict(options, dkv_tma=True))
                 if options.get("dkv_tma") is False else None)   # DKV_REGISTERS' rows
    return AttentionKernels(short, long, _prep(D, layout), bwd, paired, tuple(zigzag), bwd_short)


def backward_options(D: int, causal: bool, layout: str) -> dict:
    """attention_bwd's options as tkc.attention's backward has them (varlen
    keeps the overlap alone)."""
    schedule = {k: v for k, v in BWD_SCHEDULE[D].items() if not (layout == "varlen" and k == "ds_slots")}
    registers = (D, causal) in DKV_REGISTERS and layout != "varlen"
    return dict(BQ=BWD_QUERIES[D], **schedule, **(dict(dkv_tma=False) if registers else {}))


def forward_kernel(D: int, causal: bool, layout: str, keys: int):
    """The forward for sequences of up to `keys` keys."""
    ks = attention_kernels(D, causal, layout)
    if ks.zigzag and keys < ZIGZAG_CAUSAL_KEYS[D]:
        if keys < LONG_KEYS[D]:
            return ks.zigzag[0]
        return ks.zigzag[1] if len(ks.zigzag) > 1 else ks.long
    if keys >= (CAUSAL_LONG_KEYS.get(D, LONG_KEYS[D]) if causal else LONG_KEYS[D]):
        return ks.long
    return ks.paired if keys < PAIRED_CAUSAL_KEYS.get(D, 0) else ks.short


def backward_kernels(D: int, causal: bool, layout: str, keys: int):
    """(prep, backward) for sequences of up to `keys` keys."""
    ks = attention_kernels(D, causal, layout)
    if ks.bwd_short is not None and keys < DKV_REGISTERS[D, causal]:
        return ks.prep, ks.bwd_short
    return ks.prep, ks.bwd


@functools.lru_cache(maxsize=None)
def _prep(D: int, layout: str):
    return attention_prep(D, layout)
