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
Shapes too small to win, or whose shards are not whole 128-row tiles, and
calls captured in a CUDA graph run NCCL (all_gather_into_tensor /
reduce_scatter_tensor) and tkc.matmul in sequence.

Both are torch.library ops (tkc::all_gather_matmul, tkc::matmul_reduce_scatter),
the group passed by its name as torch's symm_mem ops take it, so torch.compile
and fake tensors see them. They are differentiable, each the other's
backward: all_gather_matmul's dA_shard = reduce_scatter(dC @ b^T) is
matmul_reduce_scatter(dC, b^T), its db = A^T dC (A gathered again by NCCL
when return_A=False kept none); matmul_reduce_scatter's (G, da) =
all_gather_matmul(dOut, b^T), db = a^T G. A gradient of the gathered A
itself reaches a_shard by reduce_scatter (all_gather's adjoint).
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.collective_gemm import BK, BM, FLAGS, all_gather_gemm, gemm_reduce_scatter, rs_barrier
from ..runtime import driver
from ..runtime.callsite import caller
from ..runtime.peers import Peers
from .checks import check_device, check_tensor
from .eager import Op
from .gemm import matmul
from .symm import buffer, group_or_world, process_group

__all__ = ["all_gather_matmul", "matmul_reduce_scatter"]
BF16 = torch.bfloat16
# The fused kernels from 2 * 2048 * 4096^2 flops (69 GFLOP) on: there, on 2 H200s with the host
# ahead of the GPU, fused / NCCL + tkc.matmul all-gather 136 / 148 us, reduce-scatter 129 / 159;
# at 9 GFLOP they lose (69 / 55, 45 / 43); at 137 GFLOP 1.38x / 1.12x (12-01; BENCHMARKS.md,
# "Multi-GPU"). Called on an idle GPU, their host path (~200-300 us cold) moves that to ~550.
FUSED_FLOPS = 2 * 2048 * 4096 * 4096


@functools.lru_cache(maxsize=None)
def _rs(world: int):
    return gemm_reduce_scatter(world)


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


def _capturing() -> bool:
    """Whether the current stream is capturing a CUDA graph. The fused
    kernels' flags count calls (the epoch the stream writes before the
    launch, and the buffers' parity in the copies' addresses: in a graph,
    constants), which a replay would repeat: its flags already raised, it
    would read rows before they arrive. So a captured call takes the NCCL +
    tkc.matmul path, which a graph captures and replays."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def fused(M: int, N: int, K: int, world: int, rows: int) -> bool:
    """Whether the fused kernel runs: several ranks, whole 128-row tiles per
    rank (`rows` of them, a chunk's), enough work to hide the traffic."""
    return 2 <= world <= 8 and rows % BM == 0 and M // BM <= FLAGS and 2 * M * N * K >= FUSED_FLOPS


def all_gather_matmul(a_shard: Tensor, b: Tensor, group=None, *, return_A: bool = True):
    """(all_gather(a_shard) or None, all_gather(a_shard) @ b): module doc."""
    _check("all_gather_matmul", a_shard, b, "a_shard")
    a, c = _all_gather_matmul(a_shard, b, group_or_world("all_gather_matmul", group).group_name,
                              bool(return_A))
    return (a if return_A else None), c


def matmul_reduce_scatter(a: Tensor, b: Tensor, group=None) -> Tensor:
    """reduce_scatter(a @ b) over the group, rows scattered: module doc."""
    fn = "matmul_reduce_scatter"
    _check(fn, a, b, "a")
    group = group_or_world(fn, group)
    world = group.size()
    if a.shape[0] % world:
        raise TkcError(f"{fn}: a's rows (M = {a.shape[0]}) must split evenly over the {world} ranks", caller())
    return _matmul_reduce_scatter(a, b, group.group_name)


def _ag_impl(a_shard: Tensor, b: Tensor, group_name: str, return_A: bool) -> tuple[Tensor, Tensor]:
    """(A, A @ b), A = all_gather(a_shard); A empty when not return_A."""
    group = process_group(group_name)
    world, rank = group.size(), group.rank()
    (Ms, K), N = a_shard.shape, b.shape[1]
    M = world * Ms
    if not fused(M, N, K, world, Ms) or _capturing():
        a = _gather(a_shard, group)
        return (a if return_A else a.new_empty(0)), matmul(a, b)
    dev = a_shard.device
    ag = buffer(group, (2, M, K), BF16, dev, "tkc.all_gather_matmul.a")
    flags = buffer(group, (1, FLAGS), torch.int32, dev, f"tkc.all_gather_matmul.flags.{M}x{K}")
    epoch = flags.next_epoch()   # the same on every rank: each calls in the same order
    main, side = torch.cuda.current_stream(dev), _side_stream(dev)
    # The copies start after what this stream has queued: what made a_shard, and this rank's
    # previous call, whose kernel had every peer's previous pushes, which came after that
    # peer's call before (its kernel then done with the buffer this call's parity writes).
    side.wait_stream(main)
    gathered = ag.tensor[epoch % 2]
    gathered[rank * Ms:(rank + 1) * Ms].copy_(a_shard)   # my shard, for my own kernel
    c = torch.empty(M, N, device=dev, dtype=BF16)
    # the gathered A the caller keeps: the kernel stores it as it loads it (keep = 1; 2 H200s,
    # 12-01, against a clone after the kernel: 8192 rows in all 1.023 / 1.036 ms, 8192 a rank
    # 3.188 / 3.275); without return_A its stores are clipped (keep = 0), a_out one tile
    a = torch.empty(M, K, device=dev, dtype=BF16) if return_A else _unkept(dev)
    chunk = chunk_tiles(Ms // BM, Ms * K * a_shard.element_size())
    epoch_at = _epoch_word(dev)   # the kernel reads the epoch there: its launch values repeat
    driver.context(dev.index)     # (a thread torch never touched, autograd's, may have none current)
    driver.write_value(epoch_at.data_ptr(), epoch, main.cuda_stream)
    all_gather_gemm(ag.peers, b, c, a, flags.peers, epoch_at, chunk, int(return_A))
    push(a_shard, ag.peers, flags.peers, epoch, chunk, side.cuda_stream)   # (after the launch: its host
    main.wait_stream(side)   # calls do not hold the kernel up) a_shard's readers done before its next use
    return (a if return_A else c.new_empty(0)), c


CHUNK_BYTES = 4 << 20   # the smallest pushed chunk (a copy and a flag write of host time each)


def chunk_tiles(per: int, shard_bytes: int) -> int:
    """Row tiles a pushed chunk holds: a quarter of the shard (2 H200s, 4096 and 8192-row
    shards of 8192 columns: 4 chunks 0.854 / 3.175 ms, 1: 0.865 / 3.200, a chunk a tile:
    0.979 / 3.452), a half or all of it where a quarter is not whole tiles or under
    CHUNK_BYTES."""
    for parts in (4, 2):
        if per % parts == 0 and shard_bytes // parts >= CHUNK_BYTES:
            return per // parts
    return per


def push(shard: Tensor, ag: Peers, flags: Peers, epoch: int, chunk: int, stream: int) -> None:
    """This rank's shard [Ms, K] into every peer's gather buffer (ag [2, M, K],
    the half of epoch's parity) by the copy engines on `stream`, `chunk` row
    tiles at a time, each chunk followed by its flag := epoch in the peer's
    flags (flag i: the chunk of global row tiles i * chunk ...). The peers in
    the order they need the shard: rank - 1 computes rank's rows right after
    its own, rank - 2 after those of rank - 1, ..."""
    world, rank = ag.world, ag.rank
    Ms, K = shard.shape
    row = K * shard.element_size()
    rows, M = chunk * BM, Ms * world
    base = ((epoch % 2) * M + rank * Ms) * row
    first = rank * (Ms // BM) // chunk
    driver.context(shard.device.index)
    for d in range(1, world):
        p = (rank - d) % world
        for i, r0 in enumerate(range(0, Ms, rows)):
            driver.copy_async(ag.ptrs[p] + base + r0 * row, shard.data_ptr() + r0 * row,
                              min(rows, Ms - r0) * row, stream)
            driver.write_value(flags.ptrs[p] + 4 * (first + i), epoch, stream)


@functools.lru_cache(maxsize=None)
def _epoch_word(device: torch.device) -> Tensor:
    """The i32 all_gather_gemm reads its call's epoch from (written on the
    stream before each launch; one a device: the calls are stream-ordered)."""
    return torch.zeros(1, 1, 1, 1, device=device, dtype=torch.int32)


@functools.lru_cache(maxsize=None)
def _unkept(device: torch.device) -> Tensor:
    """all_gather_gemm's a_out when the gathered A is not kept: one A tile,
    which its clipped stores never write."""
    return torch.empty(BM, BK, device=device, dtype=BF16)


@functools.lru_cache(maxsize=None)
def _side_stream(device: torch.device):
    """The stream of a device's pushes (one: a call's pushes wait for the call before)."""
    return torch.cuda.Stream(device)


def _rs_impl(a: Tensor, b: Tensor, group_name: str) -> Tensor:
    """This rank's rows of the sum over ranks of a @ b."""
    group = process_group(group_name)
    world = group.size()
    (M, K), N = a.shape, b.shape[1]
    Ms = M // world
    if not fused(M, N, K, world, Ms) or _capturing():
        return _scatter(matmul(a, b), group)
    dev = a.device
    rs = buffer(group, (2, Ms, N), BF16, dev, "tkc.matmul_reduce_scatter.out")
    flags = buffer(group, (1, 16), torch.int32, dev, "tkc.matmul_reduce_scatter.barrier")
    epoch = rs.next_epoch()
    _rs(world)(a, b, rs.peers, epoch % 2)   # (the kernel reads the parity alone: two frames in turn)
    rs_barrier(flags.peers)   # every rank's adds into my buffer have landed
    mine = rs.tensor[epoch % 2]
    out = mine.clone()
    mine.zero_()   # for the call after next (a peer's next call adds into the other buffer)
    return out


def _gather(x: Tensor, group) -> Tensor:
    import torch.distributed as dist
    out = x.new_empty(group.size() * x.shape[0], *x.shape[1:])
    dist.all_gather_into_tensor(out, x.contiguous(), group=group)
    return out


def _scatter(x: Tensor, group) -> Tensor:
    """This rank's rows of the sum over ranks of x (reduce_scatter, rows)."""
    import torch.distributed as dist
    out = x.new_empty(x.shape[0] // group.size(), *x.shape[1:])
    dist.reduce_scatter_tensor(out, x.contiguous(), group=group)
    return out


def _ag_fake(a_shard, b, group_name, return_A):
    M = process_group(group_name).size() * a_shard.shape[0]
    return a_shard.new_empty((M, a_shard.shape[1]) if return_A else (0,)), a_shard.new_empty(M, b.shape[1])


def _ag_setup(ctx, inputs, output):
    a_shard, b, group_name, return_A = inputs
    ctx.group_name, ctx.kept = group_name, return_A
    ctx.save_for_backward(output[0] if return_A else a_shard, b)


def _ag_backward(ctx, grad_a, grad_c):
    """d a_shard = reduce_scatter(dC b^T [+ dA]); db = A^T dC."""
    a, b = ctx.saved_tensors
    group = process_group(ctx.group_name)
    da = db = None
    if grad_c is not None:
        if ctx.needs_input_grad[0]:
            da = _matmul_reduce_scatter(grad_c.contiguous(), b.t().contiguous(), ctx.group_name)
        if ctx.needs_input_grad[1]:
            full = a if ctx.kept else _gather(a, group)
            db = matmul(full.t(), grad_c.contiguous())
    if grad_a is not None and ctx.needs_input_grad[0]:
        mine = _scatter(grad_a, group)
        da = mine if da is None else da + mine
    return da, db, None, None


def _rs_fake(a, b, group_name):
    return a.new_empty(a.shape[0] // process_group(group_name).size(), b.shape[1])


def _rs_setup(ctx, inputs, output):
    a, b, group_name = inputs
    ctx.group_name = group_name
    ctx.save_for_backward(a, b)


def _rs_backward(ctx, grad):
    """(G, da) = all_gather_matmul(dOut, b^T); db = a^T G."""
    if grad is None:
        return None, None, None
    a, b = ctx.saved_tensors
    g, da = _all_gather_matmul(grad.contiguous(), b.t().contiguous(), ctx.group_name, True)
    db = matmul(a.t(), g) if ctx.needs_input_grad[1] else None
    return (da if ctx.needs_input_grad[0] else None), db, None


_all_gather_matmul = Op("tkc::all_gather_matmul", _ag_impl, _ag_fake, _ag_setup, _ag_backward)
_matmul_reduce_scatter = Op("tkc::matmul_reduce_scatter", _rs_impl, _rs_fake, _rs_setup, _rs_backward)
