"""Plans: what an op call depends on only through its arguments' layouts.

An op's first call with a given argument signature (shapes, strides,
dtypes, device, alignment, flags) picks its kernels, checks every launch
argument and prepares the launches (tkc/runtime/launch.py, prepared); the
plan it returns allocates the outputs and launches on the data pointers of
later calls with that signature. So a repeated call costs a key, a dict
lookup, the allocations and the launches: no views, no argument checks.
"""
from __future__ import annotations

import functools
from typing import Callable

import torch
from torch import Tensor

from ..runtime.driver import multiprocessors

__all__ = ["At", "Later", "PlanCache", "forget", "scratch", "signature", "sms", "stream_buffers"]

_caches: list = []  # every op's, for forget()


def signature(*ts: Tensor | None) -> tuple:
    """Per tensor what a plan may depend on: shape, strides, dtype, device
    and its data pointer's offset from 16-byte alignment (TMA's unit); None
    for an absent (optional) tensor."""
    return tuple(None if t is None else (t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16)
                 for t in ts)


class PlanCache:
    """key -> plan, where `build(*args)` makes the plan of a key's first call
    (or, without a build, what `keep` put there: the ops' plain calls)."""

    LIMIT = 256  # plans kept per op (all forgotten when full: a shape sweep must not grow it)

    def __init__(self, build: Callable | None = None):
        self.build = build
        self.plans: dict = {}
        _caches.append(self)

    def __call__(self, key, *args):
        plan = self.plans.get(key)
        if plan is None:
            if len(self.plans) >= self.LIMIT:
                self.plans.clear()
            plan = self.plans[key] = self.build(*args)
        return plan

    def get(self, key):
        """The plan kept under key, or None (always for key None)."""
        return self.plans.get(key)

    def keep(self, key, plan) -> None:
        if len(self.plans) >= self.LIMIT:
            self.plans.clear()
        self.plans[key] = plan


def forget() -> None:
    """Drop every op's plans and the process's picks: the next calls pick
    kernels anew (after a change of the picks, e.g. in tests)."""
    from ..tune.space import forget_picks
    for cache in _caches:
        cache.plans.clear()
    forget_picks()


class Later:
    """The backward plan of one kept forward run (Op.fast, which hands the run
    to the backward formula as ctx.run): made by the run's first backward and
    taken by later ones whose gradient has the layout it was made for. The
    gradient's shape, dtype and device are the forward output's (autograd
    checks them) and the backward's other arguments are the forward's, whose
    layouts the run's key fixes: its strides and 16-byte alignment are what
    is left to check. (One attribute, (strides, plan), replaced whole: threads
    running backwards at once see one pair or the other.)"""
    __slots__ = ("kept",)

    def __init__(self):
        self.kept = (None, None)

    def get(self, grad: Tensor):
        """The plan for this gradient, or None."""
        stride, plan = self.kept
        if grad.data_ptr() & 15 or grad.stride() != stride:
            return None
        return plan

    def keep(self, grad: Tensor, plan) -> None:
        if not grad.data_ptr() & 15:
            self.kept = (grad.stride(), plan)


class At:
    """What a prepared launch reads of a tensor argument, its data pointer
    (tkc/runtime/launch.py, prepared), for memory at a byte offset into a
    tensor: a plane of a stacked one, without making the view per call."""
    __slots__ = ("tensor", "offset")

    def __init__(self, tensor: Tensor, offset: int):
        self.tensor, self.offset = tensor, offset

    def data_ptr(self) -> int:
        return self.tensor.data_ptr() + self.offset


_scratch: dict = {}  # (device, slot) -> f32 tensor


def scratch(device: torch.device, numel: int, slot: str) -> Tensor:
    """An f32 buffer of at least numel elements for a kernel output nobody
    reads (an inference call's softmax or norm statistics): one per device
    and slot, grown when too small, so such calls allocate nothing for it.
    Calls on several streams may write it at once; nothing reads it."""
    buf = _scratch.get((device, slot))
    if buf is None or buf.numel() < numel:
        buf = _scratch[device, slot] = torch.empty(max(numel, 1 << 16), device=device,
                                                   dtype=torch.float32)
    return buf


_streams: dict = {}   # (device, raw stream) -> [f32 buffer, i32 zeros]


def stream_buffers(device: torch.device, numel: int, counters: int) -> tuple[Tensor, Tensor]:
    """(an f32 buffer of at least numel elements, an i32 one of at least
    `counters` zeros) for a kernel that writes the first and reads it back,
    and zeroes again the counters it raises (the split-KV forward merging
    its splits: the last block of a tile to count itself merges). One pair
    per device and stream, so an eager call allocates nothing for them: the
    launches on a stream run in turn (a kernel starts its work after the one
    before it ends: runtime/launch.py), those on two streams may not. Not
    for a call under CUDA-graph capture (the caller checks: kept buffers
    made there would be the graph's memory, and its replays may run beside
    the stream's later calls)."""
    key = (device, torch._C._cuda_getCurrentRawStream(device.index or 0) if device.type == "cuda" else 0)
    bufs = _streams.get(key)
    if bufs is None:
        bufs = _streams[key] = [torch.empty(0, device=device), torch.empty(0, device=device, dtype=torch.int32)]
    if bufs[0].numel() < numel:
        bufs[0] = torch.empty(max(numel, 1 << 16), device=device, dtype=torch.float32)
    if bufs[1].numel() < counters:
        bufs[1] = torch.zeros(max(counters, 1024), device=device, dtype=torch.int32)
    return bufs[0], bufs[1]


@functools.lru_cache(maxsize=None)
def sms(device: torch.device) -> int:
    """The device's SM count, which plans size grids and tiles by."""
    return multiprocessors(device.index or 0)


def resident(kernel, device: torch.device) -> int:
    """Blocks of kernel one SM of device holds at once (Kernel.resident_blocks:
    the driver's occupancy calculator), which a kernel that loops over its
    work takes sms(device) times to fill the GPU."""
    return kernel.resident_blocks(device.index or 0)
