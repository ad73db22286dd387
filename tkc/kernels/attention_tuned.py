"""Which attention kernels tkc.attention launches: per head dim, mask and
layout, the forward and the backward as autotuned spaces (tkc.autotune) of
the schedules in attention_schedule.py, keyed by (D, causal, layout, key
bucket), and the forward's by the query bucket too where it is the
smaller (forward_key). Which schedule runs for a key is data, per GPU, in tkc/tune/tables:
the H100's picks (measured by hand there), and the same for the H200 until
it is tuned (docs/attention.md).

    forward_kernel(D, causal, layout, keys, queries)  the forward for up to `keys` keys
    decode_kernels(D)                            the decode path's (split, merge, unsplit, merging split)
    decode_lengths_kernel(D, merged)             ... its split with per-batch key lengths
    fp8_forward_kernel(D, causal, keys)          tkc.attention_fp8's (bhld)
    backward_kernels(D, causal, layout, keys)    (prep, backward)
    backward_schedule(D, causal, layout, keys)   the backward's schedule (dq_result's order)

`tkc tune --library --filter tkc.attention` tunes the spaces at their
examples (the eager benchmark's shapes, 128 to 16k keys, and the
forwards' short queries over long keys: QUERY_EXAMPLES); offline
(TKC_OFFLINE=1) it times only candidates already built: `tkc build
tkc/kernels/attention_tuned.py` builds them all (KERNELS).

The package tkc.kernels does not import this module (tkc.tune's tuning
imports tkc.building, which lists tkc.kernels' library); imports are
absolute so that `tkc build` can load the file by its path.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools

from tkc.kernels.attention_bwd_kernel import attention_bwd
from tkc.kernels.attention_bwd_prep import attention_prep, stats_columns
from tkc.kernels.attention_hopper import FP8_HEAD_DIMS, HEAD_DIMS, LAYOUTS, attention_hopper
from tkc.kernels.attention_hopper import decode_kernels as hopper_decode_kernels
from tkc.kernels.attention_schedule import (BUCKETS, BackwardSchedule, ForwardSchedule, backward_space,
                                            decode_schedule, forward_space, fp8_forward_space, key_bucket)
from tkc.tune import autotune, tables

__all__ = ["BACKWARD", "FORWARD", "FP8_FORWARD", "KERNELS", "all_kernels", "backward_kernels",
           "backward_schedule", "decode_kernels", "decode_lengths_kernel", "forward_key", "forward_kernel",
           "fp8_forward_kernel", "space_name"]

EXAMPLE_KEYS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)   # the lengths `tkc tune` tunes at
# The forwards' (queries, keys) examples besides: a prefill's chunk over its cache, a
# cross-attention (a key of a query bucket the examples lack takes the nearest tuned key count's row)
QUERY_EXAMPLES = tuple((q, k) for k in (4096, 16384) for q in (128, 256, 512, 1024))
SMALLEST_HELD = 512   # the smallest bucket every table has a row for (BUCKETS' 128 and 256 came later)
DIRECTIONS = {"forward": (attention_hopper, ForwardSchedule, forward_space),
              "backward": (attention_bwd, BackwardSchedule, backward_space),
              "fp8": (lambda D, causal, layout, s: attention_hopper(D, causal, layout, s, dtype="f8e4m3"),
                      ForwardSchedule, lambda D, causal, layout: fp8_forward_space(D, causal))}


def space_name(direction: str, D: int, causal: bool, layout: str) -> str:
    """The name the tables file a space's picks under (FP8: tkc.attention_fp8.forward...)."""
    op, direction = ("tkc.attention_fp8", "forward") if direction == "fp8" else ("tkc.attention", direction)
    return f"{op}.{direction}.d{D}{'.causal' if causal else ''}.{layout}"


def _keys(direction: str, layout: str, args) -> int:
    """The key count of a kernel call's arguments (k [B, Hkv, Lk, D]; varlen:
    the backward's max_k, the forward's longest sequence of cu_k)."""
    if layout != "varlen":
        return int(args[1].shape[-2])
    if direction == "backward":
        return int(args[10])
    cu_k = args[6]
    return int((cu_k[1:] - cu_k[:-1]).max())


def forward_key(D: int, causal: bool, layout: str, keys: int, queries: int | None = None) -> tuple:
    """The forward's key: (D, causal, layout, the key bucket), and the query
    bucket after it where that is the smaller (a prefill's chunk over its
    cache: a tile of more rows than the chunk's computes rows nobody reads,
    and fewer items fill the SMs, so the long sequences' pick need not be
    the chunk's). queries: Lq, or varlen's max_seqlen_q; without them (the
    backward) the key count's alone."""
    keys = key_bucket(keys)
    if queries is None or key_bucket(queries) >= keys:
        return D, causal, layout, keys
    return D, causal, layout, keys, key_bucket(queries)


def _nearest_query_row(tuned, key: tuple) -> dict | None:
    """The tables' pick for key's query bucket at the nearest key bucket that
    has one (the nearer in powers of two, the longer of two as near), if it
    is one of the space's."""
    *rest, keys, queries = key
    for other in sorted((b for b in BUCKETS if b > queries and b != keys),
                        key=lambda b: (abs(b.bit_length() - keys.bit_length()), -b)):
        config = tables.lookup(tuned.name, (*rest, other, queries))
        if config is not None and config in tuned.configs:
            return config
    return None


def _queries(layout: str, args) -> int:
    """A forward call's query count: q's rows (bhld), or its max_q (varlen)."""
    return int(args[0].shape[-2]) if layout != "varlen" else int(args[7])


def _space(direction: str, D: int, causal: bool, layout: str):
    build, schedule, space = DIRECTIONS[direction]
    by_queries = direction == "forward"   # the key has the query bucket (forward_key)

    def fallback(key):
        if len(key) == 5:   # a short query's key no table holds: that query bucket's nearest row, else
            return _nearest_query_row(tuned, key) or tuned.choose(key[:4])   # the key count's pick
        *rest, keys = key   # a bucket below 512 that a table lacks: the next bucket's pick (512's
        return tuned.choose((*rest, keys * 2)) if keys < SMALLEST_HELD else tuned.default   # rows: every table's

    def key(*args):
        return forward_key(D, causal, layout, _keys(direction, layout, args),
                           _queries(layout, args) if by_queries else None)

    def examples():
        made = [functools.partial(_example, direction, D, causal, layout, n) for n in EXAMPLE_KEYS]
        return made + [functools.partial(_example, direction, D, causal, layout, k, q)
                       for q, k in (QUERY_EXAMPLES if by_queries else ())]

    tuned = autotune(
        space=[dataclasses.asdict(s) for s in space(D, causal, layout)],
        key=key, name=space_name(direction, D, causal, layout), fallback=fallback, examples=examples,
    )(lambda **config: build(D, causal, layout, schedule(**config)))
    return tuned


TRIPLES = list(itertools.product(HEAD_DIMS, (False, True), LAYOUTS))
FORWARD = {t: _space("forward", *t) for t in TRIPLES}
BACKWARD = {t: _space("backward", *t) for t in TRIPLES}
FP8_FORWARD = {(D, causal, "bhld"): _space("fp8", D, causal, "bhld")
               for D, causal in itertools.product(FP8_HEAD_DIMS, (False, True))}


@functools.lru_cache(maxsize=None)
def prep_kernel(D: int, layout: str):
    return attention_prep(D, layout)


def _config(spaces: dict, D: int, causal: bool, layout: str, keys: int, queries: int | None = None) -> tuple:
    """(the space, its pick) for sequences of up to `keys` keys (and, the
    forwards, `queries` queries: forward_key)."""
    tuned = spaces[D, causal, layout]
    return tuned, tuned.choose(forward_key(D, causal, layout, keys, queries))


def forward_kernel(D: int, causal: bool, layout: str, keys: int, queries: int | None = None):
    """The forward for sequences of up to `keys` keys (Lk, or max_seqlen_k)
    and of `queries` queries (Lq, or max_seqlen_q; None: as many as keys)."""
    tuned, config = _config(FORWARD, D, causal, layout, keys, queries)
    return tuned.kernel(config)


def fp8_forward_kernel(D: int, causal: bool, keys: int):
    """tkc.attention_fp8's forward (bhld) for sequences of up to `keys` keys."""
    tuned, config = _config(FP8_FORWARD, D, causal, "bhld", keys)
    return tuned.kernel(config)


def backward_schedule(D: int, causal: bool, layout: str, keys: int) -> BackwardSchedule:
    """The backward's schedule for sequences of up to `keys` keys."""
    return BackwardSchedule(**_config(BACKWARD, D, causal, layout, keys)[1])


def backward_kernels(D: int, causal: bool, layout: str, keys: int):
    """(prep, backward) for sequences of up to `keys` keys."""
    tuned, config = _config(BACKWARD, D, causal, layout, keys)
    return prep_kernel(D, layout), tuned.kernel(config)


decode_kernels = functools.lru_cache(maxsize=None)(hopper_decode_kernels)   # (a plan's kernels load once)


@functools.lru_cache(maxsize=None)
def decode_lengths_kernel(D: int, merged: bool = False):
    """The decode path's split-KV forward with per-batch key lengths
    (tkc.attention's k_lengths; merged by decode_kernels(D)[1], or, merged,
    by itself). Not in the library: it compiles at its first call, or with
    `tkc build tkc/kernels/attention_tuned.py`."""
    return attention_hopper(D, False, "split", decode_schedule(D), lengths=True, merged=merged)


def _preps() -> list:
    return [prep_kernel(D, layout) for D in HEAD_DIMS for layout in LAYOUTS]


def all_kernels() -> list:
    """Every candidate of every space, and the preps: what tuning offline needs built."""
    return [*_preps(), *(k for t in (*FORWARD.values(), *BACKWARD.values(), *FP8_FORWARD.values())
                         for k in t.kernels()), *(k for D in HEAD_DIMS for k in decode_kernels(D)),
            *(decode_lengths_kernel(D, m) for D in HEAD_DIMS for m in (False, True))]


KERNELS = [*_preps(), *FORWARD.values(), *BACKWARD.values(), *FP8_FORWARD.values(),  # `tkc build`: all
           *(k for D in HEAD_DIMS for k in decode_kernels(D)),
           *(decode_lengths_kernel(D, m) for D in HEAD_DIMS for m in (False, True))]


def _example(direction: str, D: int, causal: bool, layout: str, L: int, Lq: int | None = None) -> list:
    """One call's arguments on the GPU, as tkc.attention makes them, at the
    eager benchmark's shape (tkc/bench/eager.py: 16 heads, 16384 // L
    sequences of L; varlen: those packed). A backward's statistics and dQ
    accumulator come from the picked forward and attention_prep. Lq (a
    forward's): queries of L keys, a chunk of 4096 tokens (4096 // Lq
    sequences) over 32 heads (16 at D 256), as the eager benchmark's chunk
    rows (varlen: those sequences packed)."""
    import torch
    if Lq is not None:
        B, H = max(1, 4096 // Lq), 32 if D <= 128 else 16
        if layout == "varlen":
            q, k, v = (torch.randn(B * n, H * D, device="cuda", dtype=torch.bfloat16) for n in (Lq, L, L))
            cu_q, cu_k = (torch.arange(0, B * n + 1, n, device="cuda", dtype=torch.int32) for n in (Lq, L))
            return [q, k, v, torch.empty_like(q), torch.empty(H, 1, B * Lq, device="cuda"), cu_q, cu_k, Lq,
                    D ** -0.5]
        q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=torch.bfloat16) for n in (Lq, L, L))
        return [q, k, v, torch.empty_like(q), torch.empty(B, H, 1, Lq, device="cuda"), D ** -0.5]
    B, H, varlen = max(1, 16384 // L), 16, layout == "varlen"
    if direction == "fp8":   # tkc.attention_fp8's arguments: e4m3 q, k and V^T (keys in any order)
        q, k = (torch.randn(B, H, L, D, device="cuda").to(torch.float8_e4m3fn) for _ in range(2))
        vt = torch.randn(B, H, D, L, device="cuda").to(torch.float8_e4m3fn)
        ones = torch.ones(B, H, device="cuda")
        return [q, k, vt, torch.empty(B, H, L, D, device="cuda", dtype=torch.bfloat16),
                torch.empty(B, H, 1, L, device="cuda"), ones, ones, ones, D ** -0.5]
    shape = {"bhld": (B, H, L, D), "varlen": (B * L, H * D)}[layout]
    q, k, v, do = (torch.randn(shape, device="cuda").to(torch.bfloat16) for _ in range(4))
    o = torch.empty_like(q)
    lse = torch.empty((H, 1, B * L) if varlen else (B, H, 1, L), device="cuda")
    cu = torch.arange(0, B * L + 1, L, device="cuda", dtype=torch.int32)
    scale = D ** -0.5
    forward = [q, k, v, o, lse, *([cu, cu, L] if varlen else []), scale]
    if direction == "forward":
        return forward
    forward_kernel(D, causal, layout, L)(*forward)
    stats = torch.empty((H, 2, stats_columns(B * L, B)) if varlen else (B, H, 2, stats_columns(L)),
                        device="cuda")
    dq = torch.empty(shape, device="cuda")   # the f32 accumulator, zeroed by prep
    prep_kernel(D, layout)(o, do, lse, stats, dq, *([cu, L] if varlen else []))
    return [q, k, v, do, stats, dq, torch.empty_like(k), torch.empty_like(v),
            *([cu, cu, L] if varlen else []), scale]
