"""tkc.attention's decode path on the GPU (tkc/torchops/attn_decode.py: a KV
head's query rows packed into one tile, the keys split over the SMs, the
splits merged; one split: the usual forward on the packed rows) against a
float32 reference: decode steps of GQA, MQA and MHA at D 64, 128 and 256,
a few queries a head, causal at one query, FlashAttention's layout, a KV
cache read as a slice of a longer buffer, more KV heads than SMs (one
split), gradients through it, and CUDA-graph capture."""
import math

import pytest

from tkc.kernels.attention_tuned import decode_kernels

pytestmark = pytest.mark.gpu
try:  # the kernels below must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None

KERNELS = [k for D in (64, 128, 256) for k in decode_kernels(D)]


def reference(q, k, v, causal):
    q, k, v = (t.float() for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        lq, lk = s.shape[-2:]
        s = s.masked_fill(torch.arange(lk, device=q.device)[None, :] >
                          torch.arange(lq, device=q.device)[:, None] + (lk - lq), -math.inf)
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def qkv(B, Hq, Hkv, Lq, Lk, D, blhd=False, cache=None, grad=False):
    def make(H, L, n=None):
        t = torch.randn(B, n or L, H, D, device="cuda") if blhd else torch.randn(B, H, n or L, D, device="cuda")
        t = t.bfloat16()
        t = t.transpose(1, 2) if blhd else t
        return (t[:, :, :L] if n else t).requires_grad_(grad)
    return make(Hq, Lq), make(Hkv, Lk, cache), make(Hkv, Lk, cache)


def rel_err(x, ref):
    x, ref = x.detach().double(), ref.detach().double()
    return float((x - ref).norm() / ref.norm())


@pytest.mark.parametrize("B,Hq,Hkv,Lq,Lk,D", [
    (1, 32, 8, 1, 4096, 128),       # Llama-3-8B's decode step
    (1, 32, 8, 1, 32771, 128),      # a long, ragged cache
    (8, 64, 8, 1, 8192, 64),        # GQA 8:1 at D 64
    (2, 16, 16, 1, 5000, 256),      # MHA at D 256
    (3, 16, 1, 1, 2047, 128),       # MQA
    (4, 32, 8, 4, 8192, 128),       # four queries a head (speculative decoding): 16 rows a KV head
    (64, 32, 8, 1, 1030, 128),      # 512 KV heads: more than the SMs hold, one split
    (2, 8, 2, 1, 7, 64),            # fewer keys than a tile
])
def test_decode_step_matches_float32(B, Hq, Hkv, Lq, Lk, D):
    import tkc
    q, k, v = qkv(B, Hq, Hkv, Lq, Lk, D)
    o, lse = tkc.attention(q, k, v, return_lse=True)
    want, want_lse = reference(q, k, v, False)
    assert o.shape == q.shape and rel_err(o, want) < 1e-2
    torch.testing.assert_close(lse, want_lse, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("blhd,cache,causal", [(True, None, False), (False, 9000, True), (True, 9000, False)])
def test_layouts_a_cache_slice_and_causal_one_query(blhd, cache, causal):
    """FlashAttention's [B, L, H, D] memory, k and v the first Lk rows of a
    longer cache buffer (strided views, read as they are), and a causal
    mask, which at one query lets it see every key."""
    q, k, v = qkv(2, 32, 8, 1, 6000, 128, blhd=blhd, cache=cache)
    import tkc
    got = tkc.attention(q, k, v, causal=causal)
    assert rel_err(got, reference(q, k, v, causal)[0]) < 1e-2


def test_gradients_through_the_decode_forward():
    import tkc
    q, k, v = qkv(2, 16, 4, 3, 1500, 128, grad=True)
    o = tkc.attention(q, k, v)
    want = reference(q, k, v, False)[0]
    do = torch.randn_like(o)
    grads = torch.autograd.grad(o, (q, k, v), do)
    wants = torch.autograd.grad(want, (q, k, v), do.float())
    assert rel_err(o, want) < 1e-2
    for g, w in zip(grads, wants):
        assert rel_err(g, w) < 2e-2


def test_cuda_graph_capture_of_decode_steps():
    """A decode loop captured once and replayed with a new query."""
    import tkc
    q, k, v = qkv(1, 32, 8, 1, 4096, 128)
    tkc.attention(q, k, v)   # loads the kernels and keeps the plan
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = tkc.attention(q, k, v)
    q.copy_(torch.randn_like(q))
    graph.replay()
    torch.cuda.synchronize()
    assert rel_err(out, reference(q, k, v, False)[0]) < 1e-2
