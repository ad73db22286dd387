"""Ring (context-parallel) attention as a PyTorch call:

    o = tkc.ring_attention(q, k, v, group=None, causal=True, scale=None)

The sequence is split over the group's W ranks; each rank holds its part of
q, k and v ([B, H, L / W, D], k and v with Hkv heads: GQA as tkc.attention)
and gets its part of the output. K and V travel around the ring: at step s
rank r attends its queries to the keys of rank r - s while it sends the
ones it holds to rank r + 1 (NCCL point-to-point on a stream of its own), so
the transfer hides under the step's attention. Each step's partial output
and log-sum-exp merge into an f32 accumulator (the softmax of the union of
the key sets, as FlashAttention's blocks merge).

Causal attention over a ring of contiguous chunks would leave rank 0 one
step of work and rank W - 1 all W. So with causal=True the sequence is
dealt zigzag (ring-flash-attention's and Llama 3's context parallelism):
cut into 2W chunks, rank r holds chunks r and 2W - 1 - r, concatenated in
that order, for q, k and v alike, and its output comes back in the same
order. Every step then costs every rank the same: at step 0 its own chunks
(chunk r causal; chunk 2W-1-r against both, aligned at the end), from a
rank before it both its query chunks against that rank's first key chunk,
from a rank after it its second query chunk against both key chunks. No
chunk pair is masked in part but the diagonal ones, so each call is a plain
or causal tkc.attention. `zigzag(x, W)` and `unzigzag` move a whole sequence
to and from that order.

Forward only (no autograd yet); bf16 on CUDA, under torchrun with every rank
calling with the same shapes.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..runtime.callsite import caller
from .attn import attention
from .checks import check_device, check_tensor

__all__ = ["ring_attention", "zigzag", "unzigzag"]
BF16 = torch.bfloat16


def _dist():
    """torch.distributed (a CPU test puts an in-process ring here)."""
    import torch.distributed as dist
    return dist


def _attend(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float) -> tuple[Tensor, Tensor]:
    """(o, lse) of one step (tkc.attention; a CPU test puts a reference here)."""
    return attention(q, k, v, causal=causal, scale=scale, return_lse=True)


def zigzag(x: Tensor, world: int, dim: int = 2) -> list[Tensor]:
    """A whole sequence's per-rank parts in the causal ring's order: rank r
    gets chunks r and 2W - 1 - r of 2W along `dim`, concatenated."""
    chunks = x.chunk(2 * world, dim)
    return [torch.cat([chunks[r], chunks[2 * world - 1 - r]], dim) for r in range(world)]


def unzigzag(parts: list[Tensor], dim: int = 2) -> Tensor:
    """The whole sequence from the ranks' zigzag parts (zigzag's inverse)."""
    world = len(parts)
    halves = [p.chunk(2, dim) for p in parts]
    return torch.cat([halves[r][0] for r in range(world)] +
                     [halves[r][1] for r in reversed(range(world))], dim)


class _Acc:
    """An output and its log-sum-exp in f32, merged with each step's."""

    def __init__(self):
        self.o = self.lse = None

    def add(self, o: Tensor, lse: Tensor) -> None:
        o, lse = o.float(), lse.float()
        lse = torch.where(lse == math.inf, -math.inf, lse)   # a row with no key: nothing to add
        if self.o is None:
            self.o, self.lse = o, lse
            return
        new = torch.logaddexp(self.lse, lse)
        keep = torch.where(new == -math.inf, 0.0, torch.exp(self.lse - new)).unsqueeze(-1)
        take = torch.where(new == -math.inf, 0.0, torch.exp(lse - new)).unsqueeze(-1)
        self.o = self.o * keep + o * take
        self.lse = new


def ring_attention(q: Tensor, k: Tensor, v: Tensor, group=None, causal: bool = True,
                   scale: float | None = None) -> Tensor:
    """This rank's part of attention over the sequence split across the
    group (module doc: causal=True takes and gives the zigzag order)."""
    dist = _dist()
    fn = "ring_attention"
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(fn, name, t, 4, "[B, H, L, D]", (BF16,))
    check_device(fn, ("q", q), ("k", k), ("v", v))
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2:] != k.shape[2:]:
        raise TkcError(f"{fn}: q [B, Hq, L, D] and k, v [B, Hkv, L, D] of this rank's L, got shapes "
                       f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}", caller())
    group = group if group is not None else dist.group.WORLD
    world, rank = group.size(), group.rank()
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if world == 1:
        return _attend(q, k, v, causal, scale)[0]
    if causal and q.shape[2] % 2:
        raise TkcError(f"{fn}: causal ring attention holds two chunks a rank (zigzag): L = "
                       f"{q.shape[2]} must be even", caller())
    kv = torch.stack([k, v]).contiguous()
    nxt = torch.empty_like(kv)
    cuda = kv.device.type == "cuda"
    comm = _comm_stream(kv.device) if cuda else None
    peers = (dist.get_global_rank(group, (rank + 1) % world), dist.get_global_rank(group, (rank - 1) % world))
    c = q.shape[2] // 2
    qs = (q[:, :, :c].contiguous(), q[:, :, c:].contiguous()) if causal else (q,)
    accs = [_Acc() for _ in qs]
    for step in range(world):
        reqs = None
        if step + 1 < world:   # the next step's keys arrive while this step computes
            if cuda:
                comm.wait_stream(torch.cuda.current_stream(kv.device))
                with torch.cuda.stream(comm):
                    reqs = _exchange(dist, kv, nxt, peers, group)
            else:
                reqs = _exchange(dist, kv, nxt, peers, group)
        src = (rank - step) % world
        ks, vs = kv[0], kv[1]
        if not causal:
            accs[0].add(*_attend(q, ks, vs, False, scale))
        elif step == 0:      # my own chunks: r against r (causal), 2W-1-r against both
            accs[0].add(*_attend(qs[0], ks[:, :, :c], vs[:, :, :c], True, scale))
            accs[1].add(*_attend(qs[1], ks, vs, True, scale))
        elif src < rank:     # an earlier rank: its first chunk precedes both of mine
            k0, v0 = ks[:, :, :c], vs[:, :, :c]
            accs[0].add(*_attend(qs[0], k0, v0, False, scale))
            accs[1].add(*_attend(qs[1], k0, v0, False, scale))
        else:                # a later rank: both its chunks precede my second only
            accs[1].add(*_attend(qs[1], ks, vs, False, scale))
        if reqs is not None:
            for r in reqs:
                r.wait()
            if cuda:
                torch.cuda.current_stream(kv.device).wait_stream(comm)
                kv.record_stream(comm)
            kv, nxt = nxt, kv
    out = torch.cat([a.o for a in accs], 2) if causal else accs[0].o
    return out.to(q.dtype)


def _exchange(dist, send: Tensor, recv: Tensor, peers: tuple, group) -> list:
    """Send to the next rank and receive from the previous one (one batch,
    so that NCCL pairs them without deadlock)."""
    return dist.batch_isend_irecv([dist.P2POp(dist.isend, send, peers[0], group),
                                   dist.P2POp(dist.irecv, recv, peers[1], group)])


_streams: dict = {}


def _comm_stream(device) -> "torch.cuda.Stream":
    s = _streams.get(device)
    if s is None:
        s = _streams[device] = torch.cuda.Stream(device)
    return s
