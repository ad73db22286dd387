"""tkc.ring_attention's ring on the CPU: W ranks pass K and V around while a
reference attention (float64, natural-log lse, causal aligned at the end as
tkc.attention's) stands in for the GPU kernel; the merged outputs must equal
attention over the whole sequence, causal in the zigzag order and plain in
contiguous parts, GQA included. The backward likewise (FlashAttention's
backward from the final o and lse, in float64, for the kernels): the ranks'
gradients, through torch autograd, must equal autograd's through the
reference over the whole sequence. The ranks are threads over an
in-process point-to-point ring, and once W processes over gloo
(torch.distributed's own batch_isend_irecv; there also torch.compile of the
custom op). The GPU twins: one GPU with
ranks as threads (test/gpu/test_ring_one_gpu.py, forward and backward),
torchrun when two GPUs are lent (test/gpu/multi/run_peers.py, forward)."""
from __future__ import annotations

import math
import threading

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from tkc.kernels.attention_merge import attention_merge  # noqa: E402
from tkc.torchops import checks, ring  # noqa: E402
from tkc.torchops.ring import unzigzag, zigzag  # noqa: E402
import gloo_ranks  # noqa: E402
from ring_threads import run_ranks  # noqa: E402


def _scores(q, k, v, causal, scale):
    """(k, v) repeated over each KV head's query heads (GQA) and the float64
    scores q k^T * scale, causal: query i sees key j <= i + Lk - Lq."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        Lq, Lk = q.shape[2], k.shape[2]
        keep = torch.arange(Lk)[None, :] <= torch.arange(Lq)[:, None] + Lk - Lq
        s = s.masked_fill(~keep, -math.inf)
    return k, v, s


def reference(q, k, v, causal, scale):
    """(o, lse): attention in float64 (_scores)."""
    q, k, v = q.double(), k.double(), v.double()
    k, v, s = _scores(q, k, v, causal, scale)
    lse = torch.logsumexp(s, -1)
    return torch.softmax(s, -1) @ v, torch.where(lse == -math.inf, math.inf, lse)


def _attend(q, k, v, causal, scale):
    return tuple(x.float() for x in reference(q, k, v, causal, scale))


def _attend_backward(do, q, k, v, o, lse, causal, scale):
    """FlashAttention's backward of one key block in float64: P from the
    final lse, delta = rowsum(dO * O) of the final O; dK, dV summed over
    each KV head's group of query heads."""
    do, q, k, v, o, lse = (x.double() for x in (do, q, k, v, o, lse))
    hkv, rep = k.shape[1], q.shape[1] // k.shape[1]
    k, v, s = _scores(q, k, v, causal, scale)
    p = torch.exp(s - lse.unsqueeze(-1))
    ds = p * (do @ v.transpose(-1, -2) - (do * o).sum(-1, keepdim=True))
    fold = lambda t: t.unflatten(1, (hkv, rep)).sum(2).float()  # noqa: E731
    return (ds @ k * scale).float(), fold(ds.transpose(-1, -2) @ q * scale), fold(p.transpose(-1, -2) @ do)


_MLIR = threading.Lock()


def _merge_interpreted(oa, la, ob, lb, o, lo, r0):
    """ring._merge on the CPU: the merge kernel itself, in the interpreter."""
    names = ring._DTYPE_NAMES
    arrays = [t.float().numpy().copy() for t in (oa, la.unsqueeze(2), ob, lb.unsqueeze(2), o, lo.unsqueeze(2))]
    with _MLIR:   # the ranks' threads share one MLIR context, which is not thread-safe
        attention_merge(oa.shape[-1], names[oa.dtype], names[o.dtype]).interpret(*arrays, r0)
    o.copy_(torch.from_numpy(arrays[4]))
    lo.copy_(torch.from_numpy(arrays[5])[:, :, 0])


def _cpu(monkeypatch):
    """The ring on CPU tensors: reference attention, the merge kernel interpreted."""
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")
    monkeypatch.setattr(ring, "_attend", _attend)
    monkeypatch.setattr(ring, "_merge", _merge_interpreted)


def _parts(x, world, causal):
    return zigzag(x, world) if causal else list(x.chunk(world, 2))


def _inputs(world, hkv):
    g = torch.Generator().manual_seed(world)
    B, H, L, D = 2, 4, 24 * world, 32   # (the merge kernel: D a multiple of 32)
    q = torch.randn(B, H, L, D, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(B, hkv, L, D, generator=g).to(torch.bfloat16) for _ in range(2))
    return q, k, v


def _check(parts, q, k, v, causal):
    got = unzigzag(parts) if causal else torch.cat(parts, 2)
    want = reference(q, k, v, causal, 1 / math.sqrt(q.shape[-1]))[0]
    assert (got.double() - want).abs().max() < 2e-2
    assert (got.double() - want).norm() / want.norm() < 5e-3


@pytest.mark.parametrize("world,causal,hkv", [(2, True, 4), (3, True, 2), (2, False, 4), (4, True, 1),
                                              (3, False, 1), (8, True, 2), (8, False, 4)])
def test_ring_equals_attention_over_the_whole_sequence(monkeypatch, world, causal, hkv):
    _cpu(monkeypatch)
    q, k, v = _inputs(world, hkv)
    ins = [_parts(x, world, causal) for x in (q, k, v)]
    out = run_ranks(monkeypatch, world, lambda r, group: ring.ring_attention(
        ins[0][r], ins[1][r], ins[2][r], group=group, causal=causal).float())
    _check(out, q, k, v, causal)


def _whole_grads(q, k, v, do, causal):
    """(o, dq, dk, dv) of the reference over the whole sequence, by torch autograd (float64)."""
    ins = [x.double().requires_grad_() for x in (q, k, v)]
    o = reference(*ins, causal, 1 / math.sqrt(q.shape[-1]))[0]
    return (o, *torch.autograd.grad(o, ins, do.double()))


def _ring_grads(q, k, v, do, group, causal):
    """This rank's (o, dq, dk, dv) through ring_attention and torch autograd."""
    ins = [x.requires_grad_() for x in (q, k, v)]
    o = ring.ring_attention(*ins, group=group, causal=causal)
    return (o, *torch.autograd.grad(o, ins, do))


def _check_grads(per_rank, q, k, v, do, causal):
    join = unzigzag if causal else (lambda parts: torch.cat(parts, 2))
    for i, want in enumerate(_whole_grads(q, k, v, do, causal)):
        got = join([r[i] for r in per_rank]).double()
        assert got.shape == want.shape
        assert (got - want).norm() / want.norm() < 5e-3, (i, float((got - want).norm() / want.norm()))


@pytest.mark.parametrize("world,causal,hkv", [(2, True, 4), (3, True, 2), (4, True, 1), (2, False, 2),
                                              (3, False, 4), (4, False, 1), (8, True, 1), (8, False, 2)])
def test_ring_gradients_equal_attention_over_the_whole_sequence(monkeypatch, world, causal, hkv):
    _cpu(monkeypatch)
    monkeypatch.setattr(ring, "_attend_backward", _attend_backward)
    q, k, v = _inputs(world, hkv)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    ins = [_parts(x, world, causal) for x in (q, k, v, do)]
    per_rank = run_ranks(monkeypatch, world, lambda r, group: _ring_grads(
        *(x[r].clone() for x in ins[:3]), ins[3][r], group, causal))
    _check_grads(per_rank, q, k, v, do, causal)


def _worker(rank, world, q, k, v, do):
    checks.DEVICE_TYPE = "cpu"
    ring._attend, ring._attend_backward, ring._merge = _attend, _attend_backward, _merge_interpreted
    with torch.no_grad():
        plain = ring.ring_attention(*(zigzag(x, world)[rank] for x in (q, k, v)))
    o, *grads = _ring_grads(*(zigzag(x, world)[rank] for x in (q, k, v, do)), dist.group.WORLD, True)
    assert torch.equal(o, plain)   # the autograd path's forward is the plain one
    compiled = torch.compile(ring.ring_attention, backend="aot_eager")(*(zigzag(x, world)[rank] for x in (q, k, v)))
    assert torch.equal(compiled, plain)   # the custom op through its fake impl
    return [t.detach() for t in (o, *grads)]


@pytest.mark.parametrize("world", [2, 4, 8])
def test_ring_over_torch_distributed(tmp_path, world):
    """The same ring through torch.distributed itself (gloo, 2, 4 and 8
    processes): the real batch_isend_irecv pairing and peer numbering,
    forward and backward (whose K/V and dK/dV passes are in flight together)."""
    q, k, v = _inputs(world, 2)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    per_rank = gloo_ranks.run(_worker, world, tmp_path, q, k, v, do)
    _check([r[0] for r in per_rank], q, k, v, True)
    _check_grads(per_rank, q, k, v, do, True)


def test_zigzag_round_trips():
    x = torch.arange(2 * 3 * 12).view(2, 3, 12)
    parts = zigzag(x, 3)
    assert [p[0, 0].tolist() for p in parts] == [[0, 1, 10, 11], [2, 3, 8, 9], [4, 5, 6, 7]]
    assert torch.equal(unzigzag(parts), x)
