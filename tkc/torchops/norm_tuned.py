"""How tkc.layer_norm and tkc.rms_norm split a row over warps: tuned data
per GPU (tkc.autotune; tkc/tune/tables), one space per norm, direction
(fwd, bwd), D bucket (a power of two) and dropout, keyed by (kind, D bucket,
dropout).

A configuration is {"lane_values": v}: v None runs the library's rule
(tkc/kernels/layernorm.py: one warp a row up to SPLIT_AT, above it a row split
at LANE_VALUES values a lane, more where a row would take over ROW_WARPS
warps); a number splits the row over warps of v values a lane at any D
(row_split). The limits stay limits, not choices: above SPLIT_AT the
one-warp kernels spill; with dropout more than DROPOUT_LANE_VALUES a lane
spill (pruned, as are splits of more warps than a block has); the backward's one-warp and split kernels deal rows to
blocks differently, so their per-block dw / db partial sums differ and
tuning could not check one against the other: a backward at D <= SPLIT_AT
keeps one warp a row. A candidate is built and timed at the bucket's D
with a residual; a call of another D of the bucket (or without a residual)
takes its bucket's pick.

    lane_split(rms, kind, D, dropout)   (split_at, lane_values) of a call's kernel

`tkc tune --library --filter tkc.layer_norm` (or tkc.rms_norm) tunes the
spaces at their examples (N 16384 at D 1024 to 16384); `tkc build
tkc/torchops/norm_tuned.py` builds every candidate first (KERNELS: what
tuning offline needs). Imports are absolute so that `tkc build` can load the
file by its path.
"""
from __future__ import annotations

import functools
import itertools

from tkc.kernels import NORM_WIDTHS
from tkc.kernels.layernorm import LANE_CHOICES, lane_choices, layernorm_bwd, layernorm_fwd, split_args
from tkc.kernels.rmsnorm import rmsnorm_bwd, rmsnorm_fwd
from tkc.tune import autotune, bucket

__all__ = ["KERNELS", "SPACES", "SPACE_KEYS", "lane_split", "space", "space_name"]

EXAMPLE_WIDTHS = NORM_WIDTHS   # the D `tkc tune` tunes at (N 16384 rows): those the library prebuilds
WARPS = 4   # rows a block of the one-warp kernels (norm_plans builds them so)
BUILDERS = {(False, "fwd"): layernorm_fwd, (False, "bwd"): layernorm_bwd,
            (True, "fwd"): rmsnorm_fwd, (True, "bwd"): rmsnorm_bwd}


def space_name(rms: bool, kind: str, D: int, dropout: bool, residual: bool = True) -> str:
    return (f"tkc.{'rms_norm' if rms else 'layer_norm'}.{kind}.d{D}{'.dropout' if dropout else ''}"
            f"{'' if residual else '.nores'}")


def _pruned(kind: str, D: int, dropout: bool):
    valid = lane_choices(kind, D, dropout)   # the limits (layernorm.py): the rest is pruned
    return lambda config: config["lane_values"] not in valid


@functools.lru_cache(maxsize=None)
def space(rms: bool, kind: str, D: int, dropout: bool, residual: bool = True):
    """The space of D bucket D (made at import for the examples' widths, at
    a call for others). With a residual and without are spaces of their own:
    at 8192 x 8192 the forward without one ran 76 µs at 64 values a lane and
    101 at 32, where with one 32 was as fast (H200)."""
    build = BUILDERS[rms, kind]
    return autotune(
        space={"lane_values": list(LANE_CHOICES)}, prune=_pruned(kind, D, dropout),
        key=lambda *args: (kind, bucket(int(args[0].shape[-1])), dropout),
        name=space_name(rms, kind, D, dropout, residual),
        examples=lambda: [functools.partial(_example, rms, kind, D, dropout, residual)],
    )(lambda lane_values: build(D, dropout, WARPS, residual, **split_args(lane_values)))


SPACE_KEYS = list(itertools.product((False, True), ("fwd", "bwd"), EXAMPLE_WIDTHS, (False, True),
                                    (True, False)))
SPACES = [space(*args) for args in SPACE_KEYS]
KERNELS = SPACES   # `tkc build` of this file: every candidate


def lane_split(rms: bool, kind: str, D: int, dropout: bool, residual: bool = True) -> dict:
    """The split arguments (split_at, lane_values; none: the library's rule)
    of the kernel a call of row length D runs: its bucket's pick."""
    key = (kind, bucket(D), dropout)
    return split_args(space(rms, kind, bucket(D), dropout, residual).choose(key)["lane_values"])


def _example(rms: bool, kind: str, D: int, dropout: bool, residual: bool, N: int = 16384) -> list:
    """One call's kernel arguments on the GPU, as norm_plans makes them
    (tkc/kernels/layernorm.py's order): N rows of D; the backward's partial sums one
    row a block of the default's grid (as many as the SMs hold of it), which every
    candidate runs (one that fits fewer blocks an SM runs a second wave)."""
    import torch

    from tkc.torchops.plans import resident, sms
    bf = lambda: torch.randn(N, D, device="cuda").to(torch.bfloat16)  # noqa: E731
    row = lambda: torch.randn(1, D, device="cuda").to(torch.bfloat16)  # noqa: E731
    stat = lambda: torch.rand(1, N, device="cuda") + 0.5  # noqa: E731
    p = 0.1 if dropout else 0.0
    philox = torch.tensor([[1, 0]], device="cuda", dtype=torch.int32)   # (seed, offset), as norm_plans draws
    mean = [] if rms else [stat()]
    res = [bf()] if residual else []   # forward: the residual in, h out; backward: dh_next
    if kind == "fwd":
        return [bf(), *res, row(), *([] if rms else [row()]), bf(), *([bf()] if residual else []),
                *mean, stat(), philox, p, 1e-5]
    dev = torch.device("cuda")   # the default's grid (norm_plans: the blocks the SMs hold)
    blocks = sms(dev) * resident(BUILDERS[rms, kind](D, dropout, WARPS, residual), dev)
    parts = [torch.empty(blocks, D, device="cuda") for _ in range(1 if rms else 2)]
    dres = [bf()] if residual and dropout else []
    return [bf(), *res, bf(), row(), *mean, stat(), bf(), *dres, *parts, philox, p]
