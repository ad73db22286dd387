"""tkc.attention's forward for few query rows a KV head: a decode step.

A decode step asks attention of one new token (or a few) a head over a long
KV cache: q [B, Hq, 1, D] against k, v [B, Hkv, Lk, D]. The forward kernel
gives each block 64 query rows of one query head and all of its head's keys,
so a decode step runs B x Hq blocks, each 1/64 full, each reading its KV
head's whole cache (G = Hq / Hkv times over), on a few SMs: 3-10x slower than
SDPA's FlashDecoding on the H200 (2026-11-30), where the step is a read of
the cache at HBM speed.

So, as FlashDecoding and FlashAttention's GQA packing do, when a KV head's
G x Lq query rows fit one 64-row tile this plan

- packs them into that tile: q viewed as [B, Hkv, G x Lq, D], one KV head's
  query heads one after another (a view, no copy: it exists for SDPA's
  layout and for any layout when Lq = 1 or G = 1; otherwise, as for
  FlashAttention's [B, L, H, D] memory with several queries, of a contiguous
  copy of q, the output written contiguous and copied into the op's);
- splits the keys over the SMs: attention_hopper's "split" layout, the grid
  B x Hkv x splits, split s reading keys s x chunk .. (chunk whole KV tiles)
  and writing its normalised output (f32) and lse;
- merges the splits into the op's output and lse, viewed packed the same
  way: in an eager call in the same launch (a query tile's last split to
  finish merges them, counting on a zeroed i32 a tile, which it zeroes
  again; buffers of the stream's own, plans.stream_buffers: one launch and
  one allocation less of host time), in a call captured into a CUDA graph
  by attention_merge_splits (the fused tail costs ~2 µs of kernel time at
  a small step, which a replay pays); with one split (more KV heads than
  the SMs hold blocks) the usual forward, persistent, writes them itself.

Causal calls with several queries (a speculative decoding step's draft
tokens, a small chunk of a prompt against its cache) keep their mask once
packed: the split kernel's runtime mask reads row r as query r mod Lq, which
sees key j iff j <= r mod Lq + Lk - Lq (bottom-right, as unpacked); they
always run split and merged (the unsplit kernel's mask is the unpacked one),
so with neither keys to split nor heads to pack (a short causal prompt) the
usual forward runs.
One query needs no mask: it sees every key. The backward is the usual one:
it reads q, k, v, o and the lse, which are the same whichever forward made
them.

A decode loop's cache is one key longer at every step (transformers'
DynamicCache concatenates, in new memory): a new signature each call. Its
steps share one family of launches (_Steps: q's signature, k's batch and
heads), one per split count, prepared with k and v free (their key count
and strides read per launch; runtime/launch.py), so no step plans anew and
none keeps anything past a few steps.

splits: tuned data per GPU (SPLITS: tkc/tune/tables), keyed by the head
dim, the packed row tiles (B x Hkv x tiles of 64 rows) and the KV tiles, both
rounded up to powers of two, and the SMs; a key no table holds takes the
model's count (`splits`: the fewest rounds of blocks times tiles a block). A
split past Lk's end (chunk rounding) sees no key and weighs nothing.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..kernels.attention_hopper import HEAD_DIMS
from ..kernels.attention_schedule import decode_schedule
from ..kernels.attention_tuned import decode_kernels, decode_lengths_kernel
from ..tune import Bound, autotune, bucket
from .checks import arranged, dense, strided_takes
from .plans import At, PlanCache, resident, signature, sms, stream_buffers

__all__ = ["SPLITS", "decode_family", "decode_plan", "family_key", "family_step", "lengths_plan", "packable",
           "packed_rows", "splits"]

ROWS = 64        # one consumer warpgroup's query tile
MIN_TILES = 2    # KV tiles a split reads at least (its Q load and merge row pay for them)
BLOCK_COST = 1   # a block's start and merge row, in KV tiles' time (splits)


def packable(q: Tensor, k: Tensor) -> bool:
    """Whether a KV head's G x Lq query rows fit one tile."""
    return q.shape[1] // k.shape[1] * q.shape[2] <= ROWS


def packed_rows(q: Tensor, k: Tensor) -> Tensor | None:
    """q as [B, Hkv, G * Lq, D], a view the kernels take, or None where q's
    memory has none (FlashAttention's [B, L, H, D] with several queries and
    heads a KV head: a KV head's rows are not one run; the plans then pack a
    contiguous copy of q)."""
    B, Hq, Lq, D = q.shape
    # a KV head's G query heads, each Lq rows, are one run of rows: heads Lq rows apart
    if not (Hq == k.shape[1] or Lq == 1 or q.stride(1) == Lq * q.stride(2)):
        return None
    packed = q.view(B, k.shape[1], Hq // k.shape[1] * Lq, D)
    return packed if strided_takes(packed) else None


def splits(items: int, keys: int, KV: int, kernel, device: torch.device) -> int:
    """Splits of each KV head's keys. The SMs run the items x splits blocks in
    rounds of `fill` (sms x the blocks an SM holds); a block reads its split's
    share of the KV tiles after a fixed start (its Q load and the ring's
    fill, and a merge row: BLOCK_COST tiles' time), so the step takes rounds
    x (tiles a split + BLOCK_COST): the count that makes that least, the
    fewest of equals; no split shorter than MIN_TILES tiles."""
    fill = sms(device) * resident(kernel, device)
    tiles = -(-keys // KV)
    return min(range(1, max(1, tiles // MIN_TILES) + 1),
               key=lambda s: (-(-items * s // fill) * (-(-tiles // s) + BLOCK_COST), s))


def _split_key(D: int, items: int, keys: int, device: torch.device) -> tuple:
    """The tuned split count's key: D, the packed row tiles and the KV tiles
    (powers of two), the SMs (another GPU's count misses the H200's picks)."""
    return D, bucket(items), bucket(-(-keys // decode_schedule(D).KV)), sms(device)


def _items(B: int, Hkv: int, R: int) -> int:
    """The packed row tiles of a step: a tile of ROWS rows a KV head's R."""
    return B * Hkv * -(-R // ROWS)


def _count(D: int, items: int, keys: int, kernel, device: torch.device) -> int:
    """A call's split count: its key's tuned pick (no more than its KV tiles),
    else the model's (splits)."""
    KV = decode_schedule(D).KV
    tuned = SPLITS[D].choose(_split_key(D, items, keys, device))["splits"]
    return min(tuned, -(-keys // KV)) if tuned else splits(items, keys, KV, kernel, device)


class _SplitMerged(Bound):
    """One split count's forward as tuning times it (attention_hopper's split
    kernel with `splits` bound, 0: the model's count, then the merge: the
    launches a captured step replays) on the arguments (q packed [B, Hkv, R,
    D], k, v, o [B, Hkv, R, D], lse [B, Hkv, 1, R], causal_q, scale);
    building it builds the split kernel."""

    def __init__(self, D: int, count: int):
        split, self.merge = decode_kernels(D)[:2]
        super().__init__(split, splits=count)
        self.D, self.count = D, count

    def _splits(self, qp, k) -> int:
        B, Hkv, R, D = qp.shape
        return self.count or splits(_items(B, Hkv, R), k.shape[2], decode_schedule(D).KV, self.kernel,
                                    getattr(qp, "device", None))

    def __call__(self, qp, k, v, o, lse, causal_q, scale, stream=None):
        B, Hkv, R, D = qp.shape
        S = self._splits(qp, k)
        op = torch.empty(B, Hkv, S * R, D, device=qp.device, dtype=torch.float32)
        lp = torch.empty(B, Hkv, 1, S * R, device=qp.device, dtype=torch.float32)
        self.kernel(qp, k, v, op, lp, S, causal_q, scale, stream=stream)
        self.merge(op, lp, o, lse, stream=stream)

    def interpret(self, qp, k, v, o, lse, causal_q, scale):
        """The same on numpy arrays, by the interpreter (tuning's CPU tests)."""
        B, Hkv, R, D = qp.shape
        S = self._splits(qp, k)
        op, lp = np.zeros((B, Hkv, S * R, D), np.float32), np.zeros((B, Hkv, 1, S * R), np.float32)
        self.kernel.interpret(qp, k, v, op, lp, S, causal_q, scale)
        self.merge.interpret(op, lp, o, lse)


# tkc tune --library's shapes: decode steps of B sequences, Lk keys each (K and V up to 8 GiB)
EXAMPLES = {64: (64, 8), 96: (32, 32), 128: (32, 8), 256: (16, 16)}   # D: (Hq, Hkv) of a common model


def _examples(D: int) -> list:
    Hq, Hkv = EXAMPLES[D]

    def make(B, Lk):
        def args():
            qp = torch.randn(B, Hkv, Hq // Hkv, D, device="cuda").to(torch.bfloat16)
            k, v = (torch.randn(B, Hkv, Lk, D, device="cuda").to(torch.bfloat16) for _ in "kv")
            return [qp, k, v, torch.empty_like(qp),
                    torch.empty(B, Hkv, 1, Hq // Hkv, device="cuda", dtype=torch.float32), 0, D ** -0.5]
        return args
    return [make(B, Lk) for B in (1, 2, 4, 8, 16, 32, 64) for Lk in (256 << i for i in range(10))
            if B * Hkv * Lk * D * 4 <= 8 << 30]   # (each power of two of KV tiles from 2 to 1024)


def _fits(config: dict, key: tuple) -> bool:
    """A key's candidates: no more splits than KV tiles, blocks for at most four rounds of the SMs."""
    D, items, tiles, sm = key
    return config["splits"] <= tiles and items * config["splits"] <= 4 * sm


SPLITS = {D: autotune(space={"splits": [0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]}, name=f"tkc.attention.decode"
                      f".splits.d{D}", fits=_fits, examples=lambda D=D: _examples(D),
                      key=lambda qp, k, *rest: _split_key(qp.shape[3], _items(*qp.shape[:3]), k.shape[2],
                                                          getattr(qp, "device", None)))(
    lambda splits, D=D: _SplitMerged(D, splits)) for D in HEAD_DIMS}


def decode_plan(q: Tensor, k: Tensor, v: Tensor, causal: bool, outputs_of):
    """run(q, k, v, scale, lse=True) -> (o, lse) through the packed split-KV
    forward for q's signature and k, v's key count, or None where it does
    not apply (more rows a KV head than a tile, no rows or keys, a k or v the
    kernels cannot take, a causal call the usual forward serves).
    outputs_of(q) makes outputs(lse): the op's o (q's memory order) and lse
    [B, Hq, Lq] (lse=False: scratch memory).

    The run comes from q's family of steps (_Steps, kept by q's signature and
    k's batch and heads), whose launches take any key count and any k, v
    strides the kernels take: a cache one key longer at every step (in new
    memory, as transformers' DynamicCache concatenates) finds its launches
    planned, where a plan per length cost ~0.7 ms of host time a step."""
    steps = decode_family(q, k, v, causal, outputs_of)
    return None if steps is None else steps.at(q, k, v)


def decode_family(q: Tensor, k: Tensor, v: Tensor, causal: bool, outputs_of):
    """q's family of steps (_Steps, whose at(q, k, v) is decode_plan's run),
    or None where decode_plan gives None. What a step checks of k and v for
    it besides: their key count (> 0) and strides (strided_takes)."""
    if q.numel() == 0 or k.shape[2] == 0 or not packable(q, k) or not (strided_takes(k) and strided_takes(v)):
        return None
    return _families((signature(q), tuple(k.shape[:2]), causal), q, k, causal, outputs_of)


def family_key(key: tuple):
    """eager.grad_key's key of (q, k, v) without k's and v's key count,
    strides and alignment: the key of a decode family's step (family_step,
    which checks those), or None for another key (a None argument)."""
    if len(key) != 7 or len(key[0]) != 7:
        return None
    kk, vs, _, vd, vdev, _, vg = key
    qk, ks, _, kd, kdev, _, kg = kk
    return qk, ks[:2], ks[3:], kd, kdev, kg, vs[:2], vs[3:], vd, vdev, vg


def family_step(steps: "_Steps", scale: float, return_lse: bool):
    """step(q, k, v) for a call whose family_key is that of steps' first:
    the run of k and v's key count (run(q, k, v) -> o, or (o, lse) with
    return_lse), or None where the family's launches cannot take them (no
    key, strides the kernels refuse: the full path's checks and errors).
    A growing KV cache's step, a new eager key at every length, comes here
    past the checks the key fixes."""
    runs: dict = {}   # the family's run (one a split count) -> this flavour of it

    def step(q, k, v):
        if k.shape != v.shape or not k.shape[2] or not (strided_takes(k) and strided_takes(v)):
            return None
        plan = steps.at(q, k, v)
        if plan is None:
            return None
        run = runs.get(plan)
        if run is None:
            run = runs[plan] = (lambda q, k, v: plan(q, k, v, scale)) if return_lse else \
                (lambda q, k, v: plan(q, k, v, scale, False)[0])
        return run
    return step


class _Steps:
    """The decode steps of one family: q's signature, k and v's batch and
    heads (q's device and head dim; what the plans read of k and v but their
    key count). A key count's split count (the tuned one for its KV tiles)
    picks a launch, prepared at its first use with k and v free
    (Kernel.prepare: their key count and strides read per launch)."""

    def __init__(self, q: Tensor, k: Tensor, causal: bool, outputs_of):
        B, Hq, Lq, D = q.shape
        self.D, self.Hkv, self.R, self.Lq, self.device = D, k.shape[1], Hq // k.shape[1] * Lq, Lq, q.device
        self.KV = decode_schedule(D).KV
        self.kernels = decode_kernels(D)
        self.items = _items(B, self.Hkv, self.R)
        self.cq = _causal_q(q, causal)
        packed = _packing(q, k)
        self.copy = None if packed is q else packed   # q's memory has no packed view: a copy's signature
        self.outputs = outputs_of(q)
        self.counts: dict = {}     # KV tiles -> split count
        self.runs: dict = {}       # split count -> run

    def at(self, q: Tensor, k: Tensor, v: Tensor):
        """The run for k and v's key count, or None (a causal call with
        nothing to split or pack: the usual forward's one launch)."""
        tiles = -(-k.shape[2] // self.KV)
        S = self.counts.get(tiles)
        if S is None:
            if len(self.counts) >= 4096:
                self.counts.clear()
            S = self.counts[tiles] = _count(self.D, self.items, k.shape[2], self.kernels[0], self.device)
        if self.cq and S == 1 and self.R == self.Lq:   # one query head a tile, one split: nothing gained
            return None                                # on the usual forward's one launch (a short prompt)
        run = self.runs.get(S)
        if run is None:
            run = self.runs[S] = self._run(q, k, v, S)
        return run

    def _run(self, q: Tensor, k: Tensor, v: Tensor, S: int):
        B, Hkv, R, D = q.shape[0], self.Hkv, self.R, self.D
        forward, merge, whole, fused = self.kernels
        packed, outputs = q if self.copy is None else self.copy, self.outputs
        o, lse = outputs()
        o = o if packed is q else torch.empty_like(packed)
        qp = packed.view(B, Hkv, R, D)
        launch = whole.prepare(qp, k, v, o.view(B, Hkv, R, D), lse.view(B, Hkv, 1, R), 1.0, free=(1, 2)) \
            if S == 1 and not self.cq else _split_merged((forward, merge, fused), qp, k, v, (), S, self.cq, o, lse,
                                                         (1, 2))
        launch = launch if packed is q else _through_copy(launch, packed)

        def run(q, k, v, scale, lse=True):   # (a prepared launch reads its tensors' pointers only)
            o, lse = outputs(lse)
            launch(q, k, v, o, lse, scale)
            return o, lse
        return run


_families = PlanCache(_Steps)


def _packing(q: Tensor, k: Tensor) -> Tensor:
    """q where its memory has the packed view the kernels take (packed_rows),
    else a contiguous copy of it, through which the output goes too
    (_through_copy: a step's few rows, two small launches, where the usual
    forward reads the cache a query head at a time)."""
    return q if packed_rows(q, k) is not None else dense(q)


def _through_copy(launch, packed: Tensor):
    """launch(q, k, v, o, lse, scale, *extra) for a q whose memory has no
    packed view: `launch`, prepared for `packed` (a contiguous copy's
    signature), on q copied so, its output into a contiguous buffer copied
    into o."""
    def through(q, k, v, o, lse, scale, *extra):
        out = torch.empty_like(packed)
        launch(dense(q), k, v, out, lse, scale, *extra)
        o.copy_(out)
    return through


def _causal_q(q: Tensor, causal: bool) -> int:
    """The split kernel's causal_q: Lq for a causal call with several queries
    (their packed rows' mask), else 0 (no mask: one query sees every key)."""
    return q.shape[2] if causal and q.shape[2] > 1 else 0


# the merge's prepared launches by signature: its arguments do not depend on the key count, so
# the families of steps and the k_lengths plans of one q share them
_merges = PlanCache(lambda merge, ts: merge.prepare(*ts))


def _split_merged(kernels: tuple, qp: Tensor, k: Tensor, v: Tensor, extra: tuple, S: int, cq: int, o: Tensor,
                  lse: Tensor, free: tuple = ()):
    """launch(q, k, v, o, lse, scale, *extra) of the split kernels (split,
    merge, fused): `split` (its arguments after the splits' outputs: extra,
    then S, causal_q = cq and the scale) into an f32 buffer of the splits'
    outputs and lse, allocated per call, then `merge` into o and lse, where
    the call is captured into a CUDA graph (kernel time is what a replay
    pays); else one launch of `fused`, which merges its own splits (each
    query tile's last split to finish: attention_hopper._split_kernel; host
    time is what an eager step pays), its buffers the stream's own
    (plans.stream_buffers). Prepared for qp (the packed q), k, v, o, lse's
    signature, the split's arguments at `free` free (Kernel.prepare)."""
    split, merge, fused = kernels
    B, Hkv, R, D = qp.shape
    n, numel = B * Hkv * S * R * D, B * Hkv * R   # the splits' outputs, then their lse: one buffer
    QT = -(-R // ROWS)   # query tiles a (batch, KV head): one counter each
    part = torch.empty(n + numel * S, device=qp.device, dtype=torch.float32)
    parts = part[:n].view(B, Hkv, S * R, D), part[n:].view(B, Hkv, 1, S * R)
    outs = o.view(B, Hkv, R, D), lse.view(B, Hkv, 1, R)
    split = split.prepare(qp, k, v, *parts, *extra, S, cq, 1.0, free=free)
    merged = _merges((merge, signature(*parts, *outs)), merge, (*parts, *outs))   # (the same at every length)
    count = torch.zeros(1, B, Hkv, QT, device=qp.device, dtype=torch.int32)   # (its layout alone)
    fused = fused.prepare(qp, k, v, *parts, *outs, count, *extra, S, cq, 1.0, free=free)

    def launch(q, k, v, o, lse, scale, *extra):   # the buffer's two parts by pointer: no views
        if q.is_cuda and torch.cuda.is_current_stream_capturing():
            part = torch.empty(n + numel * S, device=q.device, dtype=torch.float32)
            split(q, k, v, part, At(part, n * 4), *extra, S, cq, scale)
            merged(part, At(part, n * 4), o, lse)
        else:   # the splits' buffer and counters the stream's own (not capturing): read within the launch
            part, count = stream_buffers(q.device, n + numel * S, B * Hkv * QT)
            fused(q, k, v, part, At(part, n * 4), o, lse, count, *extra, S, cq, scale)
    return launch


def lengths_plan(q: Tensor, k: Tensor, v: Tensor, lens: Tensor, causal: bool, outputs):
    """run(q, k, v, lens, scale) -> (o, lse): the decode path with batch b's
    keys its first lens[b] (tkc.attention's k_lengths, i32 [B], read on the
    device; causal: query i of Lq sees keys j <= i + lens[b] - Lq), for q, k,
    v's signature (packable: the caller checked). Always split and merged:
    the splits are sized by Lk (the cache's capacity) and each batch's keys
    split by its own count; a layout the kernels cannot take is copied (k, v:
    arranged; q: _packing), and an empty q or cache gives o = 0 and lse = +inf."""
    B, Hq, Lq, D = q.shape
    Hkv, R = k.shape[1], Hq // k.shape[1] * Lq
    if q.numel() == 0 or k.shape[2] == 0:
        def empty(q, k, v, lens, scale):
            o, lse = outputs()
            return o.zero_(), lse.fill_(math.inf)
        return empty
    arrange = arranged(k, v)
    packed = _packing(q, k)
    kernels = decode_lengths_kernel(D), decode_kernels(D)[1], decode_lengths_kernel(D, True)
    S = _count(D, _items(B, Hkv, R), k.shape[2], kernels[0], q.device)
    o, lse = outputs()
    launch = _split_merged(kernels, packed.view(B, Hkv, R, D), *arrange(k, v), (lens,), S, _causal_q(q, causal),
                           o if packed is q else torch.empty_like(packed), lse)
    launch = launch if packed is q else _through_copy(launch, packed)

    def run(q, k, v, lens, scale):
        k, v = arrange(k, v)
        o, lse = outputs()
        launch(q, k, v, o, lse, scale, lens)
        return o, lse
    return run
