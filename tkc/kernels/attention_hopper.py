"""Attention forward on Hopper, written as a plain pipelined loop.

O = softmax(Q K^T * scale [+ causal mask]) V, and the log-sum-exp of each
query row (natural log; +inf for a row with no key, whose output is 0), for
the backward. bf16 in and out, f32 softmax and accumulation.

A block owns BQ = 64 * consumers query rows of one head: consumer warpgroups
of 64 rows each (a subtile of the block's Q tile), which share the K and V
tiles; two by default.
tk-pipeline-staging turns the loop over KV tiles into a producer warpgroup
streaming K and V by TMA through a ring of stages, full/empty mbarriers and
the setmaxnreg split; Q is loaded once. Per KV tile each warpgroup computes
S = Q K^T (wgmma from shared memory), the online softmax on S in registers
(exp2 of one FFMA per score: the scale folded into log2 e, the row maxima
taken of the raw scores), and O += P V (wgmma with P from registers).

Shapes: any Lq and Lk. TMA zero-fills past the ends, keys past Lk are masked
inside the kernel (only in the tiles that reach past Lk or the diagonal), and
outputs are clipped. Causal masks align bottom-right, as FlashAttention 2+:
query i sees key j iff j <= i + Lk - Lq; a causal block stops at its last
unmasked tile and the grid runs the longest blocks first. GQA/MQA: Hq a
multiple of Hkv (checked at launch), query head h reads KV head h // (Hq / Hkv).

Layouts (`layout=`; the gl each tensor is viewed as):
  "bhld"   q [B, Hq, Lq, D], k, v [B, Hkv, Lk, D], any strides with D's
           elements adjacent (strided gls): SDPA's contiguous layout and
           FlashAttention's [B, L, H, D] memory (q.transpose(1, 2)) alike, or
           q, k, v unbound from one packed projection; lse [B, Hq, Lq]
  "varlen" q [Tq, Hq, D], k, v [Tk, Hkv, D] (a token's H*D elements adjacent, its
           rows strided: q, k, v split from a packed projection): sequences packed along the tokens
           (FlashAttention's varlen), sequence b being rows cu_q[b] .. cu_q[b+1]
           of q and cu_k[b] .. cu_k[b+1] of k and v (cu_q, cu_k: i32 [B + 1]);
           lse [Hq, Tq]. Each block slices its sequence (gl.slice): TMA reads
           past a sequence's end are masked keys, O is stored from registers,
           clipped to the sequence. The grid covers max_q query rows.

  "split"  split-KV (FlashDecoding: few query rows, many keys): q, k, v as
           bhld; the grid's x runs over splits x query tiles, split s reading
           keys s * chunk .. of whole KV tiles (chunk: Lk / splits rounded up to
           KV); its normalised O (f32) and lse go to rows s * Lq .. of o [B, Hq,
           splits * Lq, D] and lse [B, Hq, 1, splits * Lq], which
           attention_merge.attention_merge_splits merges:
           attn(q, k, v, o, lse, splits, causal_q, scale); or with merged=True
           the query tile's last split to finish merges them itself into out
           [B, Hq, Lq, D] (bf16, strided) and lout [B, Hq, 1, Lq], counting
           on count [1, B, Hq, query tiles] (i32, zero before; _split_kernel):
           attn(q, k, v, o, lse, out, lout, count, splits, causal_q, scale).
           The decode path packs a KV head's G query heads of Lq rows each
           into one tile's rows (torchops/attn_decode.py), so its causal mask
           is a runtime one: causal_q = Lq (0: no mask), row r is query r mod Lq and sees
           key j iff j <= r mod Lq + Lk - Lq (causal=False: the flag is the
           unpacked mask's).
           lengths=True: lens after o, lse (and out, lout, count), before splits,
           batch b's keys its first lens[b] (i32 [B], clamped to 0 .. Lk: a
           KV cache's filled part, read on the device; the mask's Lk).

FP8 (dtype="f8e4m3", FlashAttention-3's FP8 forward; bhld, D 64, 128, 256):
attn(q, k, vt, o, lse, q_scale, k_scale, v_scale, scale) with q [B, Hq, Lq,
D] and k [B, Hkv, Lk, D] e4m3, V given transposed and key-permuted as vt
[B, Hkv, D, Lk32] e4m3 (Lk32: Lk rounded up to 32, zero padded; per 32 keys
vt[.., .., d, 32g + p] = V[32g + order[p], d], order =
warpgroup.fp8_lane_order()), per-head f32 scales q_scale [B, Hq], k_scale
and v_scale [B, Hkv], o bf16. S = Q K^T is an FP8 wgmma from shared memory,
dequantised by q_scale * k_scale folded into the softmax's one FFMA
constant; P = exp2(..) * 2^8 is rounded to e4m3 in registers (P <= 1 would
leave e4m3's range below 2^-6 subnormal and flush P < 2^-10 to 0; the 2^8
is free in the FFMA, O and l both carry it, lse takes it out) and O += P V^T
is the wgmma with P from registers in k_order="lanes", whose key order vt
matches; v_scale goes into the final 1 / l.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import math

import tkc.dsl as tkc
from tkc.dsl import bf16, f8e4m3, f32, gl, i32, rt, rv, st, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import (atomic_add, eq, exp2, fma, iota, load, log2, mul_row, neg_infty, rcp, row_max,
                     row_sum, store, sub_row, subtile, where, zero)

from .attention_merge import attention_merge_splits, merge_splits
from .attention_schedule import ForwardSchedule, decode_schedule

LOG2E, LN2 = math.log2(math.e), math.log(2)
HEAD_DIMS = (64, 96, 128, 256)   # 96: Phi-3's, GPT-NeoX's
LAYOUTS = ("bhld", "varlen")
FP8_HEAD_DIMS = (64, 128, 256)   # D 256: O through its own bf16 tile (the FP8 Q's is too small)
P_SHIFT = 8                   # FP8: P is computed as exp2(.. + 8), P * 2^8 (module docstring)


def attention_hopper(D: int = 128, causal: bool = False, layout: str = "bhld",
                     schedule: ForwardSchedule = ForwardSchedule(), dtype: str = "bf16", lengths: bool = False,
                     merged: bool = False):
    """The forward kernel for head dim D: attn(q, k, v, o, lse, scale), or for
    layout="varlen" attn(q, k, v, o, lse, cu_q, cu_k, max_q, scale), or for
    dtype="f8e4m3" attn(q, k, vt, o, lse, q_scale, k_scale, v_scale, scale)
    (the module docstring), as `schedule` (attention_schedule.ForwardSchedule)
    has it:

    consumers: the consumer warpgroups, 64 query rows each (1 to 3), which
    share each K/V tile of KV keys streamed through a ring of `stages`.
    blocks_per_sm: blocks sharing an SM (tkc.kernel's).

    diagonal_mask (causal): only the diagonal's mask, not Lk's as well:
    keys past Lk lie past every query row's diagonal (key j <= i + Lk - Lq
    < Lk for i < Lq; rows past Lq are clipped), so a diagonal tile takes
    one compare and select an element where it took two.

    overlap: FlashAttention-3's intra-warpgroup overlap. Iteration j loads
    K_j and V_(j-1), issues S_j = Q K_j^T and O += P_(j-1) V_(j-1), waits
    for S_j only, and runs the softmax of tile j while that PV wgmma runs;
    P_j is carried to the next iteration. The loop runs once more than there
    are tiles: V_(-1) and K_n lie past the edges (TMA reads zeros, or a
    neighbour sequence's rows, which P = 0 and the mask cancel), a 1/n-tile
    overhead on Q K^T. ptxas places the wait for the PV group
    (WARPGROUP.DEPBAR 0) right after the wait for S, before the softmax (the
    new P's registers are those of the P in flight), so within a warpgroup
    nothing overlaps; with pingpong the other warpgroup's turn does.

    pingpong: FlashAttention-3's ping-pong (warpgroup.turns): the consumer
    warpgroups take turns at issuing their wgmmas (with overlap, S_j and
    PV_(j-1) together; without, S_j), so one warpgroup's softmax runs while
    the tensor cores work for the other.

    persistent: True, one block an SM loops over the work items (query
    tile, head, batch) in grid order; Q has two slots (tk-pipeline-staging),
    so the producer loads the next item's Q right after this item's last K/V
    stage, and its K/V under this item's finish. "zigzag": the rounds of
    items dealt forwards and backwards, so that a block's long and short
    causal items pair up (a static order in grid order gives a block items
    of the same one or two lengths).

    ex2_fma: the share of the softmax's exponentials computed on the FMA
    pipe (exp2's fma=), the rest on the MUFU.

    o_via_q: O leaves by a TMA store through Q's shared tile once the last S
    wgmma has read it (at D = 256 O's own tile does not fit); not varlen."""
    if D not in HEAD_DIMS:
        raise TkcError(f"attention: head dim {D} is not supported (one of {HEAD_DIMS})")
    if layout not in (*LAYOUTS, "split"):
        raise TkcError(f"attention: layout must be one of {(*LAYOUTS, 'split')}, got {layout!r}")
    if (lengths or merged) and layout != "split":
        raise TkcError("attention: per-batch key lengths and merged splits are the split-KV forward's "
                       "(layout='split')")
    if layout == "split" and (causal or dtype != "bf16" or schedule.o_via_q):
        raise TkcError("attention: the split-KV forward is bf16, not causal, and stores O from registers "
                       "(no o_via_q)")
    if not isinstance(schedule, ForwardSchedule):
        raise TkcError(f"attention: schedule must be a ForwardSchedule, got {type(schedule).__name__}")
    if schedule.o_via_q and layout == "varlen":
        raise TkcError("attention: o_via_q needs a layout other than varlen (a TMA store cannot clip to a "
                       "sequence's slice)")
    if schedule.diagonal_mask and not causal:
        raise TkcError("attention: diagonal_mask is the causal mask's (causal=True)")
    fp8 = dtype == "f8e4m3"
    if dtype not in ("bf16", "f8e4m3"):
        raise TkcError(f"attention: dtype must be 'bf16' or 'f8e4m3', got {dtype!r}")
    if schedule.KV == 192 and not fp8:
        raise TkcError("attention: KV = 192 is the FP8 forward's (FlashAttention-3's tile for an FP8 V^T)")
    if fp8 and (layout != "bhld" or D not in FP8_HEAD_DIMS or schedule.o_via_q):
        raise TkcError(f"attention: the FP8 forward is for layout 'bhld' and head dims {FP8_HEAD_DIMS} "
                       f"(O leaves through its own bf16 tile: an FP8 Q's is half its size, so no "
                       f"o_via_q), got layout {layout!r}, D {D}{', o_via_q' if schedule.o_via_q else ''}")
    KV, stages, consumers = schedule.KV, schedule.stages, schedule.consumers
    overlap, pingpong, persistent = schedule.overlap, schedule.pingpong, schedule.persistent
    ex2_fma, diagonal_mask, o_via_q = schedule.ex2_fma, schedule.diagonal_mask, schedule.o_via_q
    name = schedule.name(D, causal, layout) + ("_lengths" if lengths else "") + ("_merged" if merged else "")
    name = name.replace("attn_fwd_", "attn_fwd_fp8_", 1) if fp8 else name
    E = f8e4m3 if fp8 else bf16  # Q's, K's and V's element type
    BQ = 64 * consumers          # query rows per block

    def forward(q, k, v, o, lse, scale, qb, h, hk, tile, lse_tile, by_tma: bool, scales=None,
                packed=None):
        """One block: query rows qb * BQ.. of head h against KV head hk.
        tile(h, t): the gl coordinates of row tile t of head h; lse_tile(h, t)
        those of a warp's 16 statistics; by_tma: O leaves by a TMA store
        (else from registers, clipped). FP8: v is vt (D x keys, tile(h, t)'s
        head and batch, t a KV tile along its columns) and scales is (q_scale
        * k_scale, v_scale) of this block's head. packed (the split layout's
        runtime mask): (P, shift), row r seeing key j iff j <= r mod P + shift."""
        wg, w = tkc.warpgroupid(), tkc.warpid()
        Lq, Lk = q.r, k.r
        q_s, k_s, v_s = st(E, BQ, D), st(E, KV, D), st(E, D, KV) if fp8 else st(bf16, KV, D)
        tma.load(q_s, q, tile(h, qb))
        row0 = qb * BQ + w * 16          # this warp's first query row
        shift = Lk - Lq                  # causal: query i sees key j iff j <= i + shift
        n = tkc.cdiv(Lk, KV)
        if causal:
            n = tkc.max(tkc.min(n, tkc.cdiv(qb * BQ + BQ + shift, KV)), 0)
        n = where(qb * BQ < Lq, n, 0)    # no query row here (a short varlen sequence): no work
        if packed is not None:           # each row's last key: its query's (r mod P) + shift
            P, pshift = packed
            r = iota(rv(f32, 16), 0, start=row0)
            last = r - ((r + 0.5) * (1.0 / P.to(f32))).to(i32).to(f32) * P + pshift  # (exact: r < 2^22)
        o_r, m, l = zero(rt(f32, 16, D)), neg_infty(rv(f32, 16)), zero(rv(f32, 16))
        p = zero(rt(f32, 16, KV)).to(E) if fp8 else zero(rt(bf16, 16, KV))  # (overlap) the last P
        c = scale * LOG2E * scales[0] if fp8 else scale * LOG2E

        def pv(o_r, p, v_s):             # O += P V (FP8: V^T's keys in P's lane order)
            if fp8:
                warpgroup.mma_ABt(o_r, p, v_s, k_order="lanes")
            else:
                warpgroup.mma_AB(o_r, p, v_s)
        turn = warpgroup.turns() if pingpong else contextlib.nullcontext()
        for j in tkc.range(where(n > 0, n + 1, 0) if overlap else n, stages=stages):
            tma.load(k_s, k, tile(hk, j))
            jv = j - 1 if overlap else j
            tma.load(v_s, v, (*tile(hk, 0)[:2], 0, jv) if fp8 else tile(hk, jv))  # vt: keys along columns
            s = zero(rt(f32, 16, KV))
            with turn:
                warpgroup.mma_ABt(s, subtile(q_s, 64, D, (wg, 0)), k_s)
                if overlap:              # O += P V of the previous tile, in flight meanwhile
                    pv(o_r, p, v_s)
            warpgroup.mma_async_wait(s, pending=1 if overlap else 0)  # overlap: PV in flight
            edge = j * KV + KV > Lk       # a tile reaching past Lk or the diagonal is masked
            if causal:
                diagonal = j * KV + KV - 1 > row0 + shift
                edge = diagonal if diagonal_mask else edge | diagonal
            elif packed is not None:     # (every row's last key is at least pshift)
                edge = edge | (j * KV + KV - 1 > pshift)
            with tkc.if_(edge):
                col = iota(rt(f32, 16, KV), 1, start=j * KV)
                keep = None if causal and diagonal_mask else col < Lk
                if causal:
                    seen = col <= iota(rt(f32, 16, KV), 0, start=row0 + shift)
                    keep = seen if keep is None else keep & seen
                elif packed is not None:
                    keep = keep & (sub_row(col, last) <= 0.0)
                s = where(keep, s, -math.inf)
            m_prev = m
            m = row_max(s, init=m)       # of the raw scores: the scale goes into one FFMA
            ms = where(eq(m, -math.inf), 0.0, m) if causal or packed else m  # a row with no key yet
            s = exp2(fma(s, c, ms * -c + P_SHIFT if fp8 else ms * -c), fma=ex2_fma)
            alpha = exp2((m_prev - ms) * c)
            l = row_sum(s, init=l * alpha)
            if overlap:  # P_j's registers only once the PV wgmma reading P_(j-1)'s is done
                warpgroup.mma_async_wait(o_r)
                p = s.to(E)
                o_r = mul_row(o_r, alpha)
            else:
                o_r = mul_row(o_r, alpha)
                pv(o_r, s.to(E), v_s)
                warpgroup.mma_async_wait(o_r)
        if pingpong:
            turn.end()
        empty = eq(l, 0.0)               # no key (causal, Lq > Lk): O = 0, lse = +inf
        if fp8:                          # O and l carry P's 2^8; O is dequantised by v_scale
            o_r = mul_row(o_r, rcp(where(empty, 1.0, l)) * scales[1])
            log_l = log2(l) - P_SHIFT
        else:
            o_r = mul_row(o_r, rcp(where(empty, 1.0, l)))
            log_l = log2(l)
        store(lse, where(empty, math.inf, (m * c + log_l) * LN2), lse_tile(h, qb * (BQ // 16) + w),
              clip=True)
        if by_tma:                       # (D = 256: its own tile would not fit, Q's does: o_via_q)
            o_s = q_s if o_via_q else st(bf16, BQ, D)
            if o_via_q:                  # every warp's wait done: the wgmmas read the warpgroup's Q rows
                warpgroup.sync()
            warpgroup.store(o_s, o_r.to(bf16), (wg, 0))
            tma.store(o, o_s, tile(h, qb))
        else:
            b, d, t, col = tile(h, qb * (BQ // 16) + w)
            store(o, o_r if o.dtype == f32 else o_r.to(bf16), (b, d, t, col), clip=True)  # split: f32

    def grid(q, *_):
        return (tkc.cdiv(q.r, BQ), q.d, q.b)

    def longest_first(qb, nq):
        """The longest causal blocks first (they have the most KV tiles); a
        block past the sequence's nq (varlen) keeps its index: it has no rows."""
        return where(qb < nq, nq - 1 - qb, qb) if causal else qb

    # the warpgroup id uniform for ptxas (tkc.kernel's uniform_ids; "warp",
    # the backward's, measured slower here: docs/attention.md)
    options = dict(blocks_per_sm=schedule.blocks_per_sm, uniform_ids="warpgroup",
                   **(dict(persistent=persistent, order="xyz") if persistent else {}))
    if layout == "varlen":
        @tkc.kernel(name=name, warps=4 * consumers, divisible={"HqD": "HkvD", "HkvD": D},
                    grid=lambda q, k, v, o, lse, cu_q, cu_k, max_q, scale:
                    (tkc.cdiv(max_q, BQ), q.c // D, cu_q.c - 1), **options)
        def attn(q: gl(bf16, 1, 1, "Tq", "HqD", strided=True), k: gl(bf16, 1, 1, "Tk", "HkvD", strided=True),
                 v: gl(bf16, 1, 1, "Tk", "HkvD", strided=True), o: gl(bf16, 1, 1, "Tq", "HqD", strided=True),
                 lse: gl(f32, 1, "Hq", 1, "Tq"), cu_q: gl(i32, 1, 1, 1, "B1"),
                 cu_k: gl(i32, 1, 1, 1, "B1"), max_q: tkc.i32, scale: tkc.f32):
            qb, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
            q0, q1 = load(i32, cu_q, at=(0, 0, 0, b), fill=0), load(i32, cu_q, at=(0, 0, 0, b + 1), fill=0)
            k0, k1 = load(i32, cu_k, at=(0, 0, 0, b), fill=0), load(i32, cu_k, at=(0, 0, 0, b + 1), fill=0)
            qs, os = q.slice("r", q0, q1 - q0), o.slice("r", q0, q1 - q0)
            ks, vs = k.slice("r", k0, k1 - k0), v.slice("r", k0, k1 - k0)
            qb = longest_first(qb, tkc.cdiv(q1 - q0, BQ))
            forward(qs, ks, vs, os, lse.slice("c", q0, q1 - q0), scale, qb, h,
                    h // (q.c // k.c), lambda h, t: (0, 0, t, h), lambda h, t: (0, h, 0, t),
                    by_tma=False)
        return attn

    Q = gl(bf16, "B", "Hq", "Lq", D, strided=True)
    K = gl(bf16, "B", "Hkv", "Lk", D, strided=True)
    if layout == "split":
        return _split_kernel(name, D, KV, BQ, consumers, Q, K, forward, options, lengths, merged)
    if fp8:
        return _fp8_kernel(name, D, BQ, consumers, grid, longest_first, forward, options)

    @tkc.kernel(name=name, warps=4 * consumers, divisible={"Hq": "Hkv"}, grid=grid, **options)
    def attn(q: Q, k: K, v: K, o: Q, lse: gl(f32, "B", "Hq", 1, "Lq"), scale: tkc.f32):
        qb, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        hk = h // (lse.d // k.d)
        qb = longest_first(qb, tkc.cdiv(q.r, BQ))
        forward(q, k, v, o, lse, scale, qb, h, hk, lambda h, t: (b, h, t, 0),
                lambda h, t: (b, h, 0, t), by_tma=D < 256 or o_via_q)

    return attn


def decode_kernels(D: int) -> tuple:
    """tkc.attention's decode path (torchops/attn_decode.py) for head dim D:
    (the split-KV forward, its merge, the unsplit forward: persistent, for
    more packed items than the SMs hold blocks, the split-KV forward that
    merges its splits itself: one launch, for eager calls)."""
    return (attention_hopper(D, False, "split", decode_schedule(D)), attention_merge_splits(D),
            attention_hopper(D, False, "bhld", dataclasses.replace(decode_schedule(D), persistent=True)),
            attention_hopper(D, False, "split", decode_schedule(D), merged=True))


def _split_kernel(name, D, KV, BQ, consumers, Q, K, forward, options, lengths: bool, merged: bool):
    """The split-KV forward (the module docstring's "split" layout): block x =
    split s of query tile qb. With lengths (i32 [B], read on the device, so a
    CUDA graph's replays see new values): batch b's keys are its first
    lengths[b] (clamped to 0 .. Lk), split by that count.

    merged: the splits merge in the same launch. Each block writes its
    split's output and lse, then counts itself done on its query tile's
    counter (count [1, B, Hq, query tiles], i32, zero before the launch),
    and the last of the tile's splits reads them all back and merges them
    into out and lout (attention_merge.merge_splits, a consumer warp a row),
    then zeroes the counter for the next launch: one launch a decode step,
    where attention_merge_splits is a second (H200, 12-01: 3-6 µs less host
    time an eager step; ~2 µs more kernel time at one sequence's step, the
    count's round trip and the last block's tail, the same from B 8)."""
    def body(q, k, v, o, lse, merge, Lk, splits, causal_q, scale):
        x, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        s, qb = x % splits, x // splits
        chunk = tkc.cdiv(tkc.cdiv(Lk, splits), KV) * KV   # whole tiles: TMA boxes stay aligned
        k0 = tkc.min(s * chunk, Lk)
        n = tkc.min(chunk, Lk - k0)
        forward(q, k.slice("r", k0, n), v.slice("r", k0, n), o.slice("r", s * q.r, q.r),
                lse.slice("c", s * q.r, q.r), scale, qb, h, h // (lse.d // k.d),
                lambda h, t: (b, h, t, 0), lambda h, t: (b, h, 0, t), by_tma=False,
                packed=(tkc.max(causal_q, 1), Lk - causal_q - k0))   # (the slice's key indices)
        if merge is None:
            return
        out, lout, count = merge
        done = atomic_add(count, 1, at=(0, b, h, qb), after=[o, lse])   # splits of this tile done before
        with tkc.if_(done == splits - 1):   # the last: every split's output written and visible
            store(count, 0, at=(0, b, h, qb), clip=True)
            w, first = tkc.warpid(), qb * BQ
            for t in tkc.range(tkc.cdiv(tkc.min(q.r - first, BQ), 4 * consumers)):
                merge_splits(o, lse, out, lout, b, h, first + t * (4 * consumers) + w, splits, D)
    O, L = gl(f32, "B", "Hq", "SLq", D), gl(f32, "B", "Hq", 1, "SLq")
    OUT, LOUT, COUNT = Q, gl(f32, "B", "Hq", 1, "Lq"), gl(i32, 1, "B", "Hq", "QT")
    LENS = gl(i32, 1, 1, 1, "B")
    kernel = functools.partial(tkc.kernel, name=name, warps=4 * consumers, divisible={"Hq": "Hkv"}, **options)
    grid = lambda q, splits: (tkc.cdiv(q.r, BQ) * splits, q.d, q.b)   # noqa: E731 (by the arguments' names)

    def keys(k, lens):   # batch b's: its first lens[b], clamped to 0 .. Lk
        return k.r if lens is None else tkc.max(tkc.min(load(i32, lens, at=(0, 0, 0, tkc.block_idx.z), fill=0),
                                                         k.r), 0)
    if merged and lengths:
        @kernel(grid=grid)
        def attn(q: Q, k: K, v: K, o: O, lse: L, out: OUT, lout: LOUT, count: COUNT, lens: LENS,
                 splits: tkc.i32, causal_q: tkc.i32, scale: tkc.f32):
            body(q, k, v, o, lse, (out, lout, count), keys(k, lens), splits, causal_q, scale)
    elif merged:
        @kernel(grid=grid)
        def attn(q: Q, k: K, v: K, o: O, lse: L, out: OUT, lout: LOUT, count: COUNT, splits: tkc.i32,
                 causal_q: tkc.i32, scale: tkc.f32):
            body(q, k, v, o, lse, (out, lout, count), keys(k, None), splits, causal_q, scale)
    elif lengths:
        @kernel(grid=grid)
        def attn(q: Q, k: K, v: K, o: O, lse: L, lens: LENS, splits: tkc.i32, causal_q: tkc.i32, scale: tkc.f32):
            body(q, k, v, o, lse, None, keys(k, lens), splits, causal_q, scale)
    else:
        @kernel(grid=grid)
        def attn(q: Q, k: K, v: K, o: O, lse: L, splits: tkc.i32, causal_q: tkc.i32, scale: tkc.f32):
            body(q, k, v, o, lse, None, keys(k, None), splits, causal_q, scale)
    return attn


def _fp8_kernel(name, D, BQ, consumers, grid, longest_first, forward, options):
    """The FP8 forward's kernel (bhld): the scales of the block's heads loaded
    once, q_scale * k_scale into the softmax's constant, v_scale into 1 / l."""
    @tkc.kernel(name=name, warps=4 * consumers, divisible={"Hq": "Hkv", "Lk32": 32}, grid=grid, **options)
    def attn(q: gl(f8e4m3, "B", "Hq", "Lq", D), k: gl(f8e4m3, "B", "Hkv", "Lk", D),
             vt: gl(f8e4m3, "B", "Hkv", D, "Lk32"), o: gl(bf16, "B", "Hq", "Lq", D),
             lse: gl(f32, "B", "Hq", 1, "Lq"), q_scale: gl(f32, 1, 1, "B", "Hq"),
             k_scale: gl(f32, 1, 1, "B", "Hkv"), v_scale: gl(f32, 1, 1, "B", "Hkv"), scale: tkc.f32):
        qb, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        hk = h // (lse.d // k.d)
        qk = load(f32, q_scale, at=(0, 0, b, h), fill=0.0) * load(f32, k_scale, at=(0, 0, b, hk), fill=0.0)
        forward(q, k, vt, o, lse, scale, longest_first(qb, tkc.cdiv(q.r, BQ)), h, hk,
                lambda h, t: (b, h, t, 0), lambda h, t: (b, h, 0, t), by_tma=True,
                scales=(qk, load(f32, v_scale, at=(0, 0, b, hk), fill=0.0)))
    return attn
