"""Ring (context-parallel) attention as a PyTorch call:

    o = tkc.ring_attention(q, k, v, group=None, causal=True, scale=None)

The sequence is split over the group's W ranks; each rank holds its part of
q, k and v ([B, H, L / W, D], k and v with Hkv heads: GQA as tkc.attention)
and gets its part of the output. K and V travel around the ring: at step s
rank r attends its queries to the keys of rank r - s while it sends the
ones it holds to rank r + 1 (NCCL point-to-point on a stream of its own), so
the transfer hides under the step's attention. Each step's partial output
and log-sum-exp merge with the earlier steps' (the softmax of the union of
the key sets, as FlashAttention's blocks merge: tkc/kernels/attention_merge.py,
one pass a merge), the last merge writing the op's output, earlier ones an
f32 accumulator.

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

A torch.library op (tkc::ring_attention, the group passed by its name),
differentiable in q, k and v (without gradients the forward alone runs).
The forward keeps the merged output and its lse; the backward is the ring
again (ring-flash-attention's): K and V travel with f32 accumulators of
their dK and dV. At step s rank r holds rank r - s's
K, V and what the ranks before it added to their gradients; it runs the
step's FlashAttention backward on the forward's chunk pairs and masks,
which with the final o and lse of its query rows is exact for that key
block, keeps dQ and adds dK, dV to the accumulators, which it passes on
(the next step's K/V travel under this step's compute, this step's dK/dV
under the next one's); after W steps they are back at their owner.
Zigzag's step 0 is one causal call over both own chunks (aligned at the
end, chunk r sees none of chunk 2W - 1 - r: the forward's two calls' pairs).

bf16 on CUDA, under torchrun with every rank calling with the same shapes.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.attention_merge import attention_merge
from ..runtime.callsite import caller
from .attn import _bwd_impl, attention
from .checks import check_device, check_flags, check_tensor, softmax_scale
from .eager import Op
from .plans import PlanCache, signature
from .symm import group_or_world
from .symm import process_group as _named   # a CPU test maps its in-process groups here

__all__ = ["ring_attention", "zigzag", "unzigzag"]
BF16 = torch.bfloat16


def _dist():
    """torch.distributed (a CPU test puts an in-process ring here)."""
    import torch.distributed as dist
    return dist


def _attend(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float) -> tuple[Tensor, Tensor]:
    """(o, lse) of one step (tkc.attention; a CPU test puts a reference here)."""
    return attention(q, k, v, causal=causal, scale=scale, return_lse=True)


def _attend_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                     causal: bool, scale: float) -> tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) of one step, k and v of Hkv heads, from the final o and
    lse of q's rows (tkc.attention's backward kernels; a CPU test puts a
    reference here)."""
    return _bwd_impl(do, q, k, v, o, lse, causal, scale)


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


class _Chunk:
    """One query chunk's output over the keys of the `parts` steps that
    reach it, merged as they come (tkc/kernels/attention_merge.py): the last
    merge writes the chunk's rows, from r0, of the op's output and lse;
    earlier ones an f32 accumulator (a chunk of one part is copied there)."""

    def __init__(self, out: Tensor, lse: Tensor, r0: int, parts: int):
        self.out, self.lse, self.r0, self.parts = out, lse, r0, parts
        self.o = self.l = None
        self.seen = 0

    def add(self, o: Tensor, lse: Tensor) -> None:
        self.seen += 1
        if self.seen == 1:
            if self.parts == 1:
                rows = slice(self.r0, self.r0 + o.shape[2])
                self.out[:, :, rows], self.lse[:, :, rows] = o, lse
            else:
                self.o, self.l = o, lse
        elif self.seen == self.parts:
            _merge(self.o, self.l, o, lse, self.out, self.lse, self.r0)
            self.o = self.l = None
        else:   # the accumulator, in place once it is f32 (the lse always: it is the first step's)
            acc = self.o if self.o.dtype == torch.float32 else torch.empty(
                self.o.shape, device=self.o.device, dtype=torch.float32)
            _merge(self.o, self.l, o, lse, acc, self.l, 0)
            self.o = acc


def _merge_plan(oa: Tensor, la: Tensor, ob: Tensor, lb: Tensor, o: Tensor, lo: Tensor):
    kernel = attention_merge(oa.shape[-1], _DTYPE_NAMES[oa.dtype], _DTYPE_NAMES[o.dtype])
    rows = lambda t: t.unsqueeze(2)  # noqa: E731  (an lse [B, H, L] as the gl [B, H, 1, L])
    return kernel.prepare(oa, rows(la), ob, rows(lb), o, rows(lo), 0)  # (later calls: lse as it is)


_merges = PlanCache(_merge_plan)
_DTYPE_NAMES = {BF16: "bf16", torch.float32: "f32"}


def _merge(oa: Tensor, la: Tensor, ob: Tensor, lb: Tensor, o: Tensor, lo: Tensor, r0: int) -> None:
    """(o, lo) rows r0.. = the merge of (oa, la) and (ob, lb) (module doc of
    attention_merge; a CPU test runs the kernel in the interpreter here)."""
    _merges(signature(oa, la, ob, lb, o, lo), oa, la, ob, lb, o, lo)(oa, la, ob, lb, o, lo, r0)


def ring_attention(q: Tensor, k: Tensor, v: Tensor, group=None, causal: bool = True,
                   scale: float | None = None) -> Tensor:
    """This rank's part of attention over the sequence split across the
    group (module doc: causal=True takes and gives the zigzag order),
    differentiable in q, k and v."""
    fn = "ring_attention"
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(fn, name, t, 4, "[B, H, L, D]", (BF16,))
    check_device(fn, ("q", q), ("k", k), ("v", v))
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2:] != k.shape[2:]:
        raise TkcError(f"{fn}: q [B, Hq, L, D] and k, v [B, Hkv, L, D] of this rank's L, got shapes "
                       f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}", caller())
    check_flags(fn, causal=causal)
    group = group_or_world(fn, group)
    scale = softmax_scale(fn, scale, q.shape[-1])
    if group.size() == 1:
        return _attend(q, k, v, causal, scale)[0]
    if causal and q.shape[2] % 2:
        raise TkcError(f"{fn}: causal ring attention holds two chunks a rank (zigzag): L = "
                       f"{q.shape[2]} must be even", caller())
    return _ring(q, k, v, group.group_name, bool(causal), float(scale))[0]


def _impl(q: Tensor, k: Tensor, v: Tensor, group_name: str, causal: bool, scale: float) -> tuple[Tensor, Tensor]:
    return _forward(q, k, v, _named(group_name), causal, scale)


def _fake(q, k, v, group_name, causal, scale):
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)


def _setup(ctx, inputs, output):
    """The backward keeps q, k, v, the merged output and its lse."""
    q, k, v, group_name, causal, scale = inputs
    ctx.save_for_backward(q, k, v, *output)
    ctx.args = (group_name, causal, scale)


def _ring_backward(ctx, do, dlse):
    """The ring again (_backward); lse is the backward's, not differentiated."""
    if do is None:
        return None, None, None, None, None, None
    group_name, causal, scale = ctx.args
    return (*_backward(do, *ctx.saved_tensors, _named(group_name), causal, scale), None, None, None)


def _forward(q: Tensor, k: Tensor, v: Tensor, group, causal: bool, scale: float) -> tuple[Tensor, Tensor]:
    """(this rank's output, its rows' log-sum-exp f32 [B, Hq, L]) over W > 1 ranks."""
    world, rank = group.size(), group.rank()
    kv = torch.stack([k, v]).contiguous()
    nxt = torch.empty_like(kv)
    link = _Link(_dist(), group, kv.device)
    out = torch.empty(q.shape, device=q.device, dtype=q.dtype)
    lse = torch.empty(q.shape[:3], device=q.device, dtype=torch.float32)
    c = q.shape[2] // 2
    qs = (q[:, :, :c].contiguous(), q[:, :, c:].contiguous()) if causal else (q,)
    # zigzag: the first chunk's keys come at step 0 and from each earlier rank, the second's every step
    accs = [_Chunk(out, lse, 0, rank + 1), _Chunk(out, lse, c, world)] if causal else \
        [_Chunk(out, lse, 0, world)]
    for step in range(world):
        # the next step's keys arrive while this step computes
        posted = link.post(kv, nxt) if step + 1 < world else None
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
        if posted is not None:
            link.wait(posted)
            kv, nxt = nxt, kv
    return out, lse


def _backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, group,
              causal: bool, scale: float) -> tuple[Tensor, Tensor, Tensor]:
    """dq, dk, dv of this rank's parts: the forward's ring again, K and V
    travelling with f32 accumulators of their dK and dV. At step s the rank
    holds rank r - s's K, V and the sum of the gradients the ranks before
    it added; it adds its queries' share (the final o and lse make each
    step's FlashAttention backward exact for its key block) and passes them
    on, so that after W steps they are home. Its own dq stays, in f32."""
    world, rank = group.size(), group.rank()
    kv = torch.stack([k, v]).contiguous()
    nxt = torch.empty_like(kv)
    dkv = torch.zeros(kv.shape, device=kv.device, dtype=torch.float32)
    dnxt = torch.empty_like(dkv)
    link = _Link(_dist(), group, kv.device)
    q, do = q.contiguous(), do.contiguous()
    dq = torch.zeros(q.shape, device=q.device, dtype=torch.float32)
    c = q.shape[2] // 2
    if causal:   # the second query chunk's rows, for the later ranks' steps
        q1, do1, out1, lse1 = (t[:, :, c:].contiguous() for t in (q, do, out, lse))
    whole, first, second = slice(None), slice(None, c), slice(c, None)
    dposted = None
    for step in range(world):
        posted = link.post(kv, nxt) if step + 1 < world else None
        src = (rank - step) % world
        ks, vs = kv[0], kv[1]
        # the forward's chunk pairs and masks; at step 0 of the zigzag one
        # causal call over both chunks is its two (chunk r sees none of 2W-1-r)
        if not causal or step == 0:
            rows, keys = whole, whole
            grads = _attend_backward(do, q, ks, vs, out, lse, causal, scale)
        elif src < rank:     # both query chunks against its first key chunk
            rows, keys = whole, first
            grads = _attend_backward(do, q, ks[:, :, first], vs[:, :, first], out, lse, False, scale)
        else:                # my second query chunk against both its chunks
            rows, keys = second, whole
            grads = _attend_backward(do1, q1, ks, vs, out1, lse1, False, scale)
        dq[:, :, rows] += grads[0]
        if dposted is not None:   # src's accumulators, from the rank before
            link.wait(dposted)
            dkv, dnxt = dnxt, dkv
        dkv[0][:, :, keys] += grads[1]
        dkv[1][:, :, keys] += grads[2]
        dposted = link.post(dkv, dnxt)
        if posted is not None:
            link.wait(posted)
            kv, nxt = nxt, kv
    link.wait(dposted)   # the last pass brings this rank's own dK, dV home
    return dq.to(q.dtype), dnxt[0].to(k.dtype), dnxt[1].to(v.dtype)


class _Link:
    """Exchanges with the ring's neighbours (send to r + 1, receive from
    r - 1). On CUDA each is posted on the comm stream after what the compute
    stream has queued (so it sends finished data) and the compute stream
    waits for it before reading what came. One peer pair's exchanges match
    in the order they are posted (NCCL, gloo and the CPU test's ring alike),
    so the backward's K/V and dK/dV passes may be in flight together."""

    def __init__(self, dist, group, device):
        world, rank = group.size(), group.rank()
        self.dist, self.group = dist, group
        self.peers = (dist.get_global_rank(group, (rank + 1) % world),
                      dist.get_global_rank(group, (rank - 1) % world))
        self.comm = _comm_stream(device) if device.type == "cuda" else None

    def post(self, send: Tensor, recv: Tensor) -> tuple:
        if self.comm is None:
            return send, recv, _exchange(self.dist, send, recv, self.peers, self.group)
        self.comm.wait_stream(torch.cuda.current_stream(send.device))
        with torch.cuda.stream(self.comm):
            return send, recv, _exchange(self.dist, send, recv, self.peers, self.group)

    def wait(self, posted: tuple) -> None:
        send, recv, reqs = posted
        for r in reqs:
            r.wait()
        if self.comm is not None:
            torch.cuda.current_stream(send.device).wait_stream(self.comm)
            send.record_stream(self.comm)
            recv.record_stream(self.comm)


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


_ring = Op("tkc::ring_attention", _impl, _fake, _setup, _ring_backward)
