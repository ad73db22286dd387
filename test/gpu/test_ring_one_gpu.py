"""tkc.ring_attention's GPU path on one GPU: the ranks are threads of one
process (test/python/ring_threads.py stands in for NCCL's point-to-point),
each step's attention is the real tkc.attention with its log-sum-exp, on the
ring's own CUDA stream code; against tkc.attention over the whole sequence.
The torchrun twin on 2 GPUs: test/gpu/multi/run_peers.py."""
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import tkc  # noqa: E402
from tkc.torchops import ring  # noqa: E402
from tkc.torchops.ring import unzigzag, zigzag  # noqa: E402


@pytest.mark.parametrize("world,causal,H,Hkv,L", [(2, True, 8, 2, 4096), (3, True, 4, 4, 1536),
                                                  (2, False, 4, 4, 2048), (4, True, 4, 1, 2048)])
def test_ring_on_one_gpu_matches_attention(monkeypatch, world, causal, H, Hkv, L):
    from ring_threads import run_ranks
    g = torch.Generator(device="cuda").manual_seed(world)
    q = torch.randn(2, H, L, 128, device="cuda", generator=g).to(torch.bfloat16)
    k, v = (torch.randn(2, Hkv, L, 128, device="cuda", generator=g).to(torch.bfloat16) for _ in range(2))
    parts = [zigzag(x, world) if causal else [c.contiguous() for c in x.chunk(world, 2)] for x in (q, k, v)]
    outs = run_ranks(monkeypatch, world, lambda r, group: ring.ring_attention(
        parts[0][r], parts[1][r], parts[2][r], group=group, causal=causal))
    torch.cuda.synchronize()
    got = unzigzag(outs) if causal else torch.cat(outs, 2)
    want = tkc.attention(q, k, v, causal=causal)
    err = float((got.float() - want.float()).norm() / want.float().norm())
    assert err < 1e-2, err
