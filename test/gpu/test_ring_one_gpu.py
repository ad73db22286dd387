"""tkc.ring_attention's GPU path on one GPU: the ranks are threads of one
process (test/python/ring_threads.py stands in for NCCL's point-to-point),
each step's attention is the real tkc.attention with its log-sum-exp, on the
ring's own CUDA stream code; against tkc.attention over the whole sequence,
the backward (each step's tkc.attention backward kernels, dK and dV
travelling with K and V) against tkc.attention's gradients.
The torchrun twin on 2 GPUs: test/gpu/multi/run_peers.py (forward only)."""
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import tkc  # noqa: E402
from tkc.kernels import reference  # noqa: E402
from tkc.torchops import ring  # noqa: E402
from tkc.torchops.ring import unzigzag, zigzag  # noqa: E402


# (8 ranks: the most a host's NVLink holds, as the 8-GPU run would have them)
CASES = [(2, True, 8, 2, 4096), (3, True, 4, 4, 1536), (2, False, 4, 4, 2048), (4, True, 4, 1, 2048),
         (8, True, 4, 2, 4096), (8, False, 2, 2, 2048)]


def _inputs(world, causal, H, Hkv, L):
    """q, k, v, dO over the whole sequence, and each one's per-rank parts."""
    g = torch.Generator(device="cuda").manual_seed(world)
    q, do = (torch.randn(2, H, L, 128, device="cuda", generator=g).to(torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(2, Hkv, L, 128, device="cuda", generator=g).to(torch.bfloat16) for _ in range(2))
    parts = [zigzag(x, world) if causal else [c.contiguous() for c in x.chunk(world, 2)]
             for x in (q, k, v, do)]
    return (q, k, v, do), parts


@pytest.mark.parametrize("world,causal,H,Hkv,L", CASES)
def test_ring_on_one_gpu_matches_attention(monkeypatch, world, causal, H, Hkv, L):
    from ring_threads import run_ranks
    (q, k, v, _), parts = _inputs(world, causal, H, Hkv, L)
    outs = run_ranks(monkeypatch, world, lambda r, group: ring.ring_attention(
        parts[0][r], parts[1][r], parts[2][r], group=group, causal=causal))
    torch.cuda.synchronize()
    got = unzigzag(outs) if causal else torch.cat(outs, 2)
    want = tkc.attention(q, k, v, causal=causal)
    err = float((got.float() - want.float()).norm() / want.float().norm())
    assert err < 1e-2, err


@pytest.mark.parametrize("world,causal,H,Hkv,L", CASES)
def test_ring_backward_on_one_gpu_matches_attention(monkeypatch, world, causal, H, Hkv, L):
    """Each rank-thread runs the autograd Function's two halves itself
    (ring._forward, ring._backward): autograd runs a CUDA backward on one
    worker thread per device, where the ranks' backwards, each waiting for
    the others' sends, would deadlock (the CPU test drives autograd)."""
    from ring_threads import run_ranks
    (q, k, v, do), parts = _inputs(world, causal, H, Hkv, L)
    scale = 1 / 128 ** 0.5

    def rank(r, group):
        q_, k_, v_, do_ = (p[r] for p in parts)
        out, lse = ring._forward(q_, k_, v_, group, causal, scale)
        return (out, *ring._backward(do_, q_, k_, v_, out, lse, group, causal, scale))
    per_rank = run_ranks(monkeypatch, world, rank)
    torch.cuda.synchronize()
    ins = [t.clone().requires_grad_() for t in (q, k, v)]
    want = tkc.attention(*ins, causal=causal)
    want.backward(do)
    join = unzigzag if causal else (lambda ps: torch.cat(ps, 2))
    for i, (name, ref) in enumerate(zip(("o", "dq", "dk", "dv"), (want.detach(), *(t.grad for t in ins)))):
        got = join([r[i] for r in per_rank]).float()
        assert got.shape == ref.shape and not got.isnan().any(), name
        err = float((got - ref.float()).norm() / ref.float().norm())
        assert err < 2e-2, (name, err)


@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("acc,out", [("bf16", "bf16"), ("bf16", "f32"), ("f32", "f32"), ("f32", "bf16")])
def test_merge_kernel_matches_torch(D, acc, out):
    """The merge kernel (ring._merge) on the GPU: ragged rows written at an
    offset, a row with no keys on one side, one with none on either."""
    g = torch.Generator(device="cuda").manual_seed(D)
    B, H, R, r0 = 2, 3, 1000, 24
    dt = {"bf16": torch.bfloat16, "f32": torch.float32}
    oa = torch.randn(B, H, R, D, device="cuda", generator=g).to(dt[acc])
    ob = torch.randn(B, H, R, D, device="cuda", generator=g).to(torch.bfloat16)
    la, lb = (torch.randn(B, H, R, device="cuda", generator=g) * 4 for _ in range(2))
    la[:, :, 5] = lb[:, :, 6] = la[:, :, 7] = lb[:, :, 7] = float("inf")
    o = torch.full((B, H, R + 40, D), float("nan"), device="cuda", dtype=dt[out])
    lo = torch.full((B, H, R + 40), float("nan"), device="cuda")
    ring._merge(oa, la, ob, lb, o, lo, r0)
    want, want_l = (torch.from_numpy(x).float().cuda() for x in reference.attention_merge(
        *(t.float().cpu().numpy() for t in (oa, la, ob, lb))))
    rows = slice(r0, r0 + R)
    torch.testing.assert_close(o[:, :, rows].float(), want, atol=2e-2 if out == "bf16" else 1e-5, rtol=1e-2)
    torch.testing.assert_close(lo[:, :, rows], want_l, atol=1e-5, rtol=1e-5)
    assert o[:, :, :r0].isnan().all() and o[:, :, r0 + R:].isnan().all()
    assert (o[:, :, r0 + 7] == 0).all() and lo[:, :, r0 + 7].isposinf().all()
