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
warpgroups do not meet for them (tkc.range's store_warp). Causal blocks
start at the first query tile that sees their keys and mask only the tiles
on the diagonal.

At D = 256 dK and dV of 64 keys would fill a warpgroup's registers, so a
block owns 64 keys and splits the work by operand and by halves of D, and
dQ goes by atomic adds from registers (attention_bwd's docstring).

Shapes and layouts as attention_hopper's ("bhld": strided gls, "varlen"). Rows past
Lq add nothing (P = 0; to dQ too: its TMA add through a varlen sequence's
slice adds exact zeros past the sequence's end); keys past Lk (zero, or the
next sequence's) are masked, and dK and dV are clipped when stored: by the
TMA store that takes them from K's and V's shared tiles after the loop
(dkv_tma), or, for varlen (whose slices a TMA store cannot clip to), from
registers.

attention_prep and the statistics' layout: attention_bwd_prep.py. The
schedules (BackwardSchedule) and the spaces tkc.attention picks from:
attention_schedule.py; dq_result reads dQ's accumulator back.
"""
from __future__ import annotations

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, i32, rt, rv, st, sv, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import exp2, iota, load, store, sub_col, subtile, where, zero

from .attention_bwd_prep import _layout_dims, _stats_start
from .attention_hopper import HEAD_DIMS, LAYOUTS, LOG2E
from .attention_schedule import BackwardSchedule

BKV = 128                   # keys per block: two consumer warpgroups of 64
BKV_WIDE = 64               # D = 256: keys per block (each warpgroup half of D of dK and dV)
WARPS = 8                   # the consumer warps (two warpgroups)
STAGES = 2                  # the Q/dO ring
# The consumers keep dK and dV (64 f32 registers each at D = 128) in their
# 240 registers beside S^T, dP^T, the statistics and the wgmma descriptors;
# ptxas spills a few values in some of tkc.attention's kernels (D = 64 with
# BQ = 128: S^T and dP^T 64 registers each, the statistics 32 each).
# Removing them was measured (H200, 2026-11-30, on f3dadde): swizzled offsets
# XOR-ed at each access inside the loop and a 32-bit step division left no
# spills but made the backward 3-8% slower at D = 64 and D = 128 alike. At D = 64,
# BQ = 64 spills nothing (its producer given 32 registers, the consumers 232)
# but ran 6-30% slower than BQ = 128 at every tuned key (H200, 2026-11-30): the
# spills left are three loop-invariant shared addresses reloaded a step (L1)
# and four epilogue values kept across the loop. D = 128 without the mask
# spills 4 bytes in the producer's 24 registers (a value reloaded a step of
# its loop); giving it 32 leaves the consumers 232, in which ptxas
# serialises their wgmma (C7514; tried 2026-12-02).
SPILLS = 192


def _panels(nbytes: int) -> str:
    """The widest swizzle whose panels tile a row part of nbytes."""
    return next(s for s in ("128b", "64b", "32b") if nbytes % int(s[:-1]) == 0)


def attention_bwd(D: int = 128, causal: bool = False, layout: str = "bhld",
                  schedule: BackwardSchedule = BackwardSchedule()):
    """The backward kernel for head dim D: bwd(q, k, v, do, stats, dq, dk, dv,
    scale) (layout="varlen": ..., cu_q, cu_k, max_k, scale), stats from
    attention_prep, as `schedule` (attention_schedule.BackwardSchedule) has
    it. dq is an f32 accumulator laid out as q, zeroed (by attention_prep),
    that receives scale * dS K: at D <= 128 by TMA reduce-adds of a shared
    tile (through a sequence's slice for varlen, where rows past its end add
    exact zeros), issued by a store warp; at D = 256, where a shared dQ tile
    does not fit, by atomic adds from registers (red.global.add.v2.f32 a
    column pair, clipped at the edges).

    BQ: query rows a step (128 only at D = 64: dQ is then split between the
    warpgroups by rows, else by columns).

    D = 256 (backward_split): a block owns BKV_WIDE = 64 keys; one warpgroup
    computes S^T and P^T, the other dP^T and then dS^T (P^T handed over in
    shared memory), and each keeps half of D of dK and dV and computes that
    half of dQ, from P^T and dS^T in shared memory.

    overlap (D <= 128): the wait for S^T leaves dP^T's wgmma in flight and
    the one for dP^T dV's, so that P^T and dS^T are computed under the
    tensor cores' work (FlashAttention-3's intra-warpgroup overlap).
    ds_slots (D <= 128): dS^T's shared tiles; with 2 the query tiles
    alternate between them, so that writing one needs no barrier for the
    last tile's dQ wgmmas (the barrier before dQ's wgmma orders those of two
    tiles back).
    stats_acc (D <= 128): S^T's accumulator starts at -lse / c and dP^T's
    at -delta (both read from shared memory before the wgmmas are issued),
    so that the wgmmas subtract the statistics: P^T = exp2(c S^T') and dS^T
    = P^T dP^T', with no subtraction waiting for a statistic's load after
    the wgmma's wait.
    dkv_tma (not varlen): dK and dV leave through K's and V's shared tiles
    (free once the block's last wgmma has read them) by TMA stores, instead
    of from registers (4-byte stores, clipped). A TMA store cannot clip to a
    varlen sequence's slice.
    dq_packed (D = 256): each lane adds its four values of a 16-column block
    and row as one red.global.add.v4.f32, at columns 4t .. 4t + 3 (store's
    packed), where the pairs took two; dq_result undoes the order."""
    if D not in HEAD_DIMS:
        raise TkcError(f"attention backward: head dim {D} is not supported (one of {HEAD_DIMS})")
    if layout not in LAYOUTS:
        raise TkcError(f"attention backward: layout must be one of {LAYOUTS}, got {layout!r}")
    if not isinstance(schedule, BackwardSchedule):
        raise TkcError(f"attention backward: schedule must be a BackwardSchedule, got "
                       f"{type(schedule).__name__}")
    BQ, overlap, ds_slots, stats_acc = schedule.BQ, schedule.overlap, schedule.ds_slots, schedule.stats_acc
    dkv_tma, dq_packed = schedule.dkv_tma, schedule.dq_packed
    if BQ == 128 and D != 64:
        raise TkcError(f"attention backward: BQ must be 64, or 128 at D = 64 (shared memory), "
                       f"got {BQ!r} at D = {D}")
    if D == 256 and (overlap or ds_slots > 1 or stats_acc):
        raise TkcError("attention backward: overlap, ds_slots and stats_acc schedule the D <= 128 body; "
                       "at D = 256 the warpgroups split the work by operand (backward_split)")
    if dq_packed and D != 256:
        raise TkcError("attention backward: dq_packed orders dQ's atomic adds, which only D = 256 makes "
                       "(at D <= 128 dQ goes by TMA adds)")
    if dkv_tma and layout == "varlen":
        raise TkcError("attention backward: dkv_tma needs a layout other than varlen (a TMA store cannot "
                       "clip to a sequence's slice)")
    name = schedule.name(D, causal, layout)
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

    def backward(q, k, v, do, stats, dq_acc, dk, dv, scale, kb, h0, group, tile, vec, out):
        """One block: keys kb * BKV.. of KV head h0 // group's tiles `tile(h, t)`,
        against every query tile of heads h0 .. h0 + group - 1 that sees them;
        vec(h, row, t): coordinates of query tile t's BQ statistics (row 0:
        lse * log2 e, 1: delta); out(h, t): of a warp's 16 rows of dK and dV."""
        wg, w = tkc.warpgroupid(), tkc.warpid()
        Lq, Lk = q.r, k.r
        hk = h0 // group
        # a dQ split by columns: each warpgroup reads half of K's columns and writes half of dQ's, whole
        # swizzle panels (D 96's 48 columns: 32-byte panels of K, 64-byte ones of dQ)
        k_panels = "auto" if D == 128 or by_rows else _panels(D // 2 * 2)
        k_s, v_s = st(bf16, BKV, D, k_panels), st(bf16, BKV, D)
        # the producer issues a TMA load a panel: K's six 32-byte ones (D 96) spill 8 bytes in 24 registers
        regs = (32, 232) if k_panels == "32b" else (24, 240)
        q_s, do_s = st(bf16, BQ, D), st(bf16, BQ, D)
        ring_s = st(bf16, ds_slots * BKV, BQ)   # dS^T, both warpgroups' keys, ds_slots tiles
        lse_s, delta_s = sv(f32, BQ), sv(f32, BQ)
        dq_s = st(f32, BQ, D, "auto" if by_rows or D // 2 % 32 == 0 else _panels(D // 2 * 4))
        tma.load(k_s, k, tile(hk, kb))
        tma.load(v_s, v, tile(hk, kb))
        key0 = kb * BKV + w * 16         # this warp's first key
        shift, first, per_head = query_tiles(kb, BKV, Lq, Lk)
        dk_r, dv_r = zero(rt(f32, 16, D)), zero(rt(f32, 16, D))
        c = scale * LOG2E
        for it in tkc.range(per_head * group, stages=STAGES, registers=regs, store_warp=True,
                            store_slots=2):
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
            # overlap: P^T under dP^T's wgmma, dS^T under dV's
            warpgroup.mma_async_wait(*((s,) if overlap else (s, dp)), pending=int(overlap))
            if not stats_acc:
                lse = stat(lse_s)
            p = masked(exp2(s * c if stats_acc else sub_col(s * c, lse)), key0, i * BQ, Lk, shift)
            warpgroup.mma_AB(dv_r, p.to(bf16), do_s)                   # dV += P^T dO
            if overlap:
                warpgroup.mma_async_wait(dp, pending=1)
            if not stats_acc:
                delta = stat(delta_s)
            ds = (p * (dp if stats_acc else sub_col(dp, delta))).to(bf16)
            warpgroup.mma_AB(dk_r, ds, q_s)                            # dK += dS^T Q
            dst_s = subtile(ring_s, BKV, BQ, (it % ds_slots, 0)) if ds_slots > 1 else ring_s
            # the last tile's dQ mmas (both warpgroups) read dst_s; with two
            # slots, tile it - 2's were retired before tile it - 1's barrier
            # below
            if ds_slots == 1:
                tkc.sync()
            warpgroup.store(subtile(dst_s, 64, BQ, (wg, 0)), ds, (0, 0))
            tkc.fence_async()
            tkc.sync()
            if by_rows:
                dqp = warpgroup.mma_AtB(subtile(dst_s, BKV, 64, (0, wg)), k_s, zero(rt(f32, 16, D)))
            else:
                dqp = warpgroup.mma_AtB(dst_s, subtile(k_s, BKV, D // 2, (0, wg)),
                                        zero(rt(f32, 16, D // 2)))
            warpgroup.mma_async_wait(dqp, dv_r, dk_r)
            part = subtile(dq_s, 64, D, (wg, 0)) if by_rows else subtile(dq_s, BQ, D // 2, (0, wg))
            warpgroup.store(part, dqp * scale, (0, 0))
            tma.store_add(dq_acc, dq_s, tile(h, i))
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
        for it in tkc.range(per_head * group, stages=STAGES, registers=(24, 240)):
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
    # warp ids uniform for ptxas (a warpgroup's subtiles, a warp's keys and
    # its rows of dK and dV on the uniform datapath: docs/attention.md)
    options = dict(spills=SPILLS, uniform_ids="warp")
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

    @tkc.kernel(name=name, warps=8, divisible={"Hq": "Hkv"}, grid=lambda q, k, *_: (tkc.cdiv(k.r, keys), k.d, k.b),
                **options)
    def bwd(q: Q, k: K, v: K, do: Q, stats: gl(f32, "B", "Hq", 2, None), dq: QF, dk: K, dv: K,
            scale: tkc.f32):
        kb, hk, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        group = stats.d // k.d
        tile = lambda h, t: (b, h, t, 0)   # noqa: E731
        body(q, k, v, do, stats, dq, dk, dv, scale, kb, hk * group, group, tile,
             lambda h, row, t: (b, h, row, t), tile)

    return bwd


def dq_result(dq, dtype, packed: bool = False):
    """The backward's dQ in `dtype` from its f32 accumulator (a torch tensor,
    head dim last), one copy; packed (dq_packed's order: of each 16 columns,
    2t, 2t + 1, 2t + 8, 2t + 9 held at 4t .. 4t + 3) undone by a strided one."""
    import torch
    if not packed:
        return dq.to(dtype)
    out = torch.empty_like(dq, dtype=dtype)   # dq's strides (its layout)
    out.unflatten(-1, (-1, 2, 4, 2)).copy_(dq.unflatten(-1, (-1, 4, 2, 2)).transpose(-3, -2))
    return out
