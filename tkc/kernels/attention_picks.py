"""Which attention kernels tkc.attention launches: per head dim, mask and
layout the forwards (attention_hopper.py) and the backward with its
preprocessing (attention_bwd_kernel.py, attention_bwd_prep.py), each
specialised as measured on the H100 (the tables below and their comments);
per sequence length the one to launch (forward_kernel, backward_kernels);
and dQ's accumulator read back in the column order the backward's options
leave it in (dq_order, dq_result).
"""
from __future__ import annotations

import dataclasses
import functools

import tkc.dsl as tkc

from .attention_bwd_kernel import attention_bwd
from .attention_bwd_prep import attention_prep
from .attention_hopper import attention_hopper


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
