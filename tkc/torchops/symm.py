"""Symmetric buffers for tkc's multi-GPU kernels (docs/multi-gpu.md), from
PyTorch's symmetric memory: `torch.distributed._symmetric_memory.empty`
then `rendezvous` over the group; allocated once per (group, shape, dtype,
device), zeroed, and cached with the launch argument (runtime.peers.Peers:
the local tensor, every rank's pointer to it, this rank) and a call counter
(the epoch the kernels' flags count).

NVLink multicast stays off (it can take a shared host's GPUs out of
service): `no_multicast()` sets the three variables in os.environ, and
`buffer` refuses to allocate unless they are set, so a process that forgot
them fails before torch's symmetric memory or NCCL could use NVLS.
"""
from __future__ import annotations

import os

import torch

from ..diagnostics import TkcError
from ..runtime.callsite import caller
from ..runtime.peers import Peers

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}


def no_multicast() -> None:
    """Set the variables that keep NCCL, PyTorch's symmetric memory and
    NVSHMEM off NVLink multicast: call before torch initialises distributed."""
    os.environ.update(NO_MULTICAST)


def check_no_multicast() -> None:
    wrong = [k for k, v in NO_MULTICAST.items() if os.environ.get(k) != v]
    if wrong:
        raise TkcError("tkc's multi-GPU ops need NVLink multicast off: set "
                       + " ".join(f"{k}={NO_MULTICAST[k]}" for k in wrong)
                       + " before torch initialises distributed (tkc.torchops.symm.no_multicast())",
                       caller())


def group_or_world(fn: str, group):
    """`group`, or torch.distributed's default one; without either, a located
    error saying what to do (it was an AttributeError of None)."""
    if group is not None:
        return group
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        raise TkcError(f"{fn}: no process group: torch.distributed is not initialised "
                       f"(torch.distributed.init_process_group, or run under torchrun) and no "
                       f"group= was given", caller())
    return dist.group.WORLD


def process_group(group_name: str):
    """The process group of a name: tkc's torch.library ops take their group
    by name (torch's symm_mem ops' convention), and resolve it here."""
    from torch.distributed.distributed_c10d import _resolve_process_group
    return _resolve_process_group(group_name)


class Symmetric:
    """One cached symmetric buffer: `peers` (the launch argument), `tensor`
    (this rank's), `calls` (how many calls used it: the kernels' epoch)."""
    __slots__ = ("tensor", "peers", "calls", "handle")

    def __init__(self, tensor, handle):
        self.tensor, self.handle, self.calls = tensor, handle, 0
        # the pointers of the tensor in every rank's allocation (the handle
        # gives the allocations' bases; the tensor may start past it)
        offset = tensor.data_ptr() - int(handle.buffer_ptrs[handle.rank])
        self.peers = Peers(tensor, [int(p) + offset for p in handle.buffer_ptrs], handle.rank)

    def next_epoch(self) -> int:
        self.calls += 1
        return self.calls


_CACHE: dict = {}


def buffer(group, shape: tuple, dtype, device, name: str) -> Symmetric:
    """The symmetric buffer `name` of this shape and dtype on `group`: made
    (zeroed, every rank waiting for every other's zeroing) on first use,
    then the same one. Every rank must ask for it in the same order (the
    rendezvous is collective)."""
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem
    key = (name, group.group_name, tuple(shape), dtype, torch.device(device))
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    check_no_multicast()
    t = symm_mem.empty(*shape, dtype=dtype, device=device)
    t.zero_()
    handle = symm_mem.rendezvous(t, group.group_name)
    torch.cuda.synchronize(device)
    dist.barrier(group=group)   # no peer writes into it before its owner zeroed it
    made = _CACHE[key] = Symmetric(t, handle)
    return made
