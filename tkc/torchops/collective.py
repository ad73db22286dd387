"""GEMMs fused with a tensor-parallel layer's collective, as PyTorch calls:

    ag, c = tkc.all_gather_matmul(a_shard, b, group)    # column-parallel
    out = tkc.matmul_reduce_scatter(a, b, group)        # row-parallel

all_gather_matmul: a_shard [M / world, K] on every rank, b [K, N] (this
rank's columns): c [M, N] = all_gather(a_shard) @ b, and the gathered A
(None with return_A=False), as torch.ops.symm_mem.fused_all_gather_matmul
with gather_dim 0 and one B. matmul_reduce_scatter: a [M, K] (this rank's K
columns), b [K, N]: out [M / world, N] = this rank's rows of the sum over
ranks of a @ b, as torch.ops.symm_mem.fused_matmul_reduce_scatter with
reduce_op "sum" and scatter_dim 0. bf16, 2-D, K and N multiples of 8; run
under torchrun with NVLink multicast off (symm.py); every rank calls with
the same shapes in the same order.

Each is one persistent launch (tkc/kernels/collective_gemm.py) in which the
NVLink traffic overlaps the GEMM; the reduce-scatter adds a one-block
barrier launch after it and copies its result out of the symmetric buffer.
Shapes too small to win, or whose shards are not whole 128-row tiles, run
NCCL (all_gather_into_tensor / reduce_scatter_tensor) and tkc.matmul in
sequence. Forward only; not a torch.library op yet (no torch.compile).
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.collective_gemm import BM, FLAGS, all_gather_gemm, gemm_reduce_scatter, rs_barrier
from ..runtime.callsite import caller
from .checks import check_device, check_tensor
from .gemm import matmul
from .symm import buffer

__all__ = ["all_gather_matmul", "matmul_reduce_scatter"]
BF16 = torch.bfloat16
FUSED_FLOPS = 2 * 2048 ** 3   # below it the launch and flag latency outweigh the overlap (untuned)


@functools.lru_cache(maxsize=None)
def _ag(world: int):
    return all_gather_gemm(world)


@functools.lru_cache(maxsize=None)
def _rs(world: int):
    return gemm_reduce_scatter(world)


def _group(group):
    import torch.distributed as dist
    return group if group is not None else dist.group.WORLD


def _check(fn: str, a: Tensor, b: Tensor, a_name: str) -> None:
    check_tensor(fn, a_name, a, 2, "[rows, K]", (BF16,))
    check_tensor(fn, "b", b, 2, "[K, N]", (BF16,))
    if a.shape[1] != b.shape[0]:
        raise TkcError(f"{fn}: b must be [K, N] with {a_name}'s K = {a.shape[1]}, got shape "
                       f"{tuple(b.shape)}", caller())
    if a.shape[1] % 8 or b.shape[1] % 8:
        raise TkcError(f"{fn}: K = {a.shape[1]} and N = {b.shape[1]} must be multiples of 8 (TMA moves "
                       "rows of 16 bytes)", caller())
    if not (a.is_contiguous() and b.is_contiguous()):
        raise TkcError(f"{fn}: {a_name} and b must be contiguous", caller())
    check_device(fn, (a_name, a), ("b", b))


def fused(M: int, N: int, K: int, world: int, rows: int) -> bool:
    """Whether the fused kernel runs: several ranks, whole 128-row tiles per
    rank (`rows` of them, a chunk's), enough work to hide the traffic."""
    return 2 <= world <= 8 and rows % BM == 0 and M // BM <= FLAGS and 2 * M * N * K >= FUSED_FLOPS


def all_gather_matmul(a_shard: Tensor, b: Tensor, group=None, *, return_A: bool = True):
    """(all_gather(a_shard) or None, all_gather(a_shard) @ b): module doc."""
    import torch.distributed as dist
    fn = "all_gather_matmul"
    _check(fn, a_shard, b, "a_shard")
    group = _group(group)
    world, rank = group.size(), group.rank()
    (Ms, K), N = a_shard.shape, b.shape[1]
    M = world * Ms
    if not fused(M, N, K, world, Ms):
        a = a_shard.new_empty(M, K)
        dist.all_gather_into_tensor(a, a_shard, group=group)
        return (a if return_A else None), matmul(a, b)
    dev = a_shard.device
    ag = buffer(group, (2, M, K), BF16, dev, "tkc.all_gather_matmul.a")
    flags = buffer(group, (1, FLAGS), torch.int32, dev, f"tkc.all_gather_matmul.flags.{M}x{K}")
    epoch = flags.next_epoch()   # the same on every rank: each calls in the same order
    a = ag.tensor[epoch % 2]
    a[rank * Ms:(rank + 1) * Ms].copy_(a_shard)   # my chunk; the kernel pushes it to the peers
    c = torch.empty(M, N, device=dev, dtype=BF16)
    _ag(world)(ag.peers, b, c, flags.peers, epoch)
    return (a.clone() if return_A else None), c


def matmul_reduce_scatter(a: Tensor, b: Tensor, group=None) -> Tensor:
    """reduce_scatter(a @ b) over the group, rows scattered: module doc."""
    import torch.distributed as dist
    fn = "matmul_reduce_scatter"
    _check(fn, a, b, "a")
    group = _group(group)
    world = group.size()
    (M, K), N = a.shape, b.shape[1]
    if M % world:
        raise TkcError(f"{fn}: a's rows (M = {M}) must split evenly over the {world} ranks", caller())
    Ms = M // world
    if not fused(M, N, K, world, Ms):
        out = a.new_empty(Ms, N)
        dist.reduce_scatter_tensor(out, matmul(a, b), group=group)
        return out
    dev = a.device
    rs = buffer(group, (2, Ms, N), BF16, dev, "tkc.matmul_reduce_scatter.out")
    flags = buffer(group, (1, 16), torch.int32, dev, "tkc.matmul_reduce_scatter.barrier")
    epoch = rs.next_epoch()
    _rs(world)(a, b, rs.peers, epoch)
    rs_barrier(flags.peers)   # every rank's adds into my buffer have landed
    mine = rs.tensor[epoch % 2]
    out = mine.clone()
    mine.zero_()   # for the call after next (a peer's next call adds into the other buffer)
    return out
