"""tkc.attention's decode path on the GPU (tkc/torchops/attn_decode.py: a KV
head's query rows packed into one tile, the keys split over the SMs, the
splits merged; one split: the usual forward on the packed rows) against a
float32 reference: decode steps of GQA, MQA and MHA at D 64, 128 and 256,
a few queries a head, causal at one query and at several, FlashAttention's layout, a KV
cache read as a slice of a longer buffer, more KV heads than SMs (one
split), gradients through it, and CUDA-graph capture; k_lengths (a KV
cache's filled part per batch) against masked references, in a captured
decode loop whose lengths grow between replays, and under torch.compile."""
import math

import pytest

from tkc.kernels.attention_tuned import decode_kernels, decode_lengths_kernel

pytestmark = pytest.mark.gpu
try:  # the kernels below must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None

KERNELS = [k for D in (64, 128, 256) for k in (*decode_kernels(D), decode_lengths_kernel(D))]


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
    (2, 32, 32, 1, 3000, 96),       # Phi-3's: MHA at D 96
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


@pytest.mark.parametrize("B,Hq,Hkv,Lq,Lk,D,blhd", [
    (1, 32, 8, 4, 8192, 128, False),    # four draft tokens a head (speculative decoding), GQA 4:1
    (1, 32, 8, 4, 8192, 128, True),     # ... in FlashAttention's layout (q packed from a copy)
    (2, 64, 8, 8, 4099, 64, False),     # eight a head at GQA 8:1: 64 rows, a whole tile
    (64, 32, 8, 4, 1030, 128, False),   # 512 KV heads: one split, still split and merged (the mask)
    (2, 16, 16, 3, 5000, 256, False),   # MHA at D 256
    (1, 32, 32, 4, 2049, 96, True),     # D 96, FlashAttention's layout
])
def test_causal_queries_packed_match_float32(B, Hq, Hkv, Lq, Lk, D, blhd):
    """Causal with several queries a head: bottom-right, query i sees keys
    j <= i + Lk - Lq, kept when a KV head's rows are packed into one tile."""
    import tkc
    q, k, v = qkv(B, Hq, Hkv, Lq, Lk, D, blhd=blhd)
    o, lse = tkc.attention(q, k, v, causal=True, return_lse=True)
    want, want_lse = reference(q, k, v, True)
    assert rel_err(o, want) < 1e-2 and o.stride() == q.stride()   # (in q's memory order)
    torch.testing.assert_close(lse, want_lse, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_gradients_through_the_decode_forward(causal):
    import tkc
    q, k, v = qkv(2, 16, 4, 3, 1500, 128, grad=True)
    o = tkc.attention(q, k, v, causal=causal)
    want = reference(q, k, v, causal)[0]
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


def masked(q, k, v, lens, causal=False):
    """float32 reference: batch b over its first lens[b] keys (none: 0)."""
    out = torch.zeros(q.shape, device=q.device)
    for b, n in enumerate(lens.tolist()):
        if n > 0:
            out[b:b + 1] = reference(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n], causal)[0]
    return out


@pytest.mark.parametrize("Hq,Hkv,Lq,D,causal", [(32, 8, 1, 128, False), (64, 8, 1, 64, False),
                                                (16, 16, 1, 256, False), (32, 8, 2, 128, False),
                                                (32, 8, 4, 128, True), (64, 8, 8, 64, True)])
def test_k_lengths_match_masked_float32(Hq, Hkv, Lq, D, causal):
    import tkc
    q, k, v = qkv(5, Hq, Hkv, Lq, 9000, D, cache=12000)   # a cache of 12000 rows, 9000 given
    lens = torch.tensor([9000, 0, 8, 4097, 20000], dtype=torch.int32, device="cuda")   # 20000: clamped
    o, lse = tkc.attention(q, k, v, causal=causal, k_lengths=lens, return_lse=True)
    assert rel_err(o, masked(q, k, v, lens.clamp(max=9000), causal)) < 1e-2
    assert (o[1] == 0).all() and torch.isposinf(lse[1]).all()


@pytest.mark.parametrize("Lq,causal", [(1, False), (4, True)])
def test_k_lengths_in_a_captured_decode_loop(Lq, causal):
    """One graph replayed as the cache fills: the step writes its Lq new
    tokens' keys and values at their positions and attends to the filled
    part (causal: draft token i sees the cache and tokens 0..i)."""
    import tkc
    B, Hq, Hkv, D, cap = 2, 32, 8, 128, 4096
    kc, vc = (torch.zeros(B, Hkv, cap, D, device="cuda", dtype=torch.bfloat16) for _ in "kv")
    kc[:, :, :100], vc[:, :, :100] = (torch.randn(B, Hkv, 100, D, device="cuda").bfloat16() for _ in "kv")
    lens = torch.tensor([100, 37], dtype=torch.int32, device="cuda")
    q = torch.randn(B, Hq, Lq, D, device="cuda", dtype=torch.bfloat16)
    tkc.attention(q, kc, vc, causal=causal, k_lengths=lens)   # loads the kernels and keeps the plan
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = tkc.attention(q, kc, vc, causal=causal, k_lengths=lens)
    for step in range(3):
        q.copy_(torch.randn_like(q))
        for b in range(B):
            n = int(lens[b])
            kc[b, :, n:n + Lq], vc[b, :, n:n + Lq] = (torch.randn(Hkv, Lq, D, device="cuda").bfloat16()
                                                      for _ in "kv")
        lens += Lq
        graph.replay()
        torch.cuda.synchronize()
        assert rel_err(out, masked(q, kc, vc, lens, causal)) < 1e-2, step


def test_k_lengths_under_torch_compile():
    import tkc
    q, k, v = qkv(2, 32, 8, 1, 2048, 128)
    lens = torch.tensor([2048, 1000], dtype=torch.int32, device="cuda")
    f = torch.compile(lambda q, k, v, n: tkc.attention(q, k, v, k_lengths=n) * 2, fullgraph=True)
    assert rel_err(f(q, k, v, lens), 2 * masked(q, k, v, lens)) < 1e-2


@pytest.mark.parametrize("B,Hq,Hkv,Lq,D,causal,blhd", [
    (1, 32, 8, 1, 128, False, False),   # transformers' DynamicCache: concatenated at each step
    (4, 16, 2, 4, 64, True, False),     # four causal draft tokens a step
    (2, 8, 8, 1, 256, False, True),     # a cache in FlashAttention's memory ([B, L, H, D])
])
def test_a_growing_cache_step_by_step(B, Hq, Hkv, Lq, D, causal, blhd):
    """Steps over a cache concatenated one step longer at each (new memory,
    new strides; the family's launches read them per call) from 100 to ~6000
    keys, across split counts: values and lse against float32."""
    import tkc
    q, k, v = qkv(B, Hq, Hkv, Lq, 6000, D, blhd=blhd)
    axis = 1 if blhd else 2   # the memory's L axis, along which the cache grows

    def grown(c, t, n):   # c's keys, then t's up to n: a new tensor in the memory order of t
        c, t = (x.transpose(1, 2) if blhd else x for x in (c, t))
        c = torch.cat([c, t.narrow(axis, c.shape[axis], n - c.shape[axis])], axis)
        return c.transpose(1, 2) if blhd else c
    kc, vc = k[:, :, :0], v[:, :, :0]
    for n in range(100, 6000, 59 * Lq):
        kc, vc = grown(kc, k, n), grown(vc, v, n)
        o, lse = tkc.attention(q, kc, vc, causal=causal, return_lse=True)
        want, want_lse = reference(q, kc, vc, causal)
        assert rel_err(o, want) < 1e-2, n
        torch.testing.assert_close(lse, want_lse, rtol=1e-4, atol=1e-4, msg=str(n))


def test_random_decode_calls_match_float32():
    """100 seeded random calls over the decode path's space (D, GQA ratio, a
    few queries, causal, k_lengths with empty, short and clamped lengths,
    FlashAttention's layout, a cache slice) against a float32 reference,
    outputs and lse (a lab sweep of 300 such calls found nothing, 2026-11-30)."""
    import random
    import tkc
    rng = random.Random(7)
    for _ in range(100):
        D, Hkv, G = rng.choice([64, 128, 256]), rng.choice([1, 2, 8]), rng.choice([1, 2, 4, 8])
        Lq = min(rng.choice([1, 1, 2, 3, 5, 8, 16]), 64 // G)
        B, Lk = rng.choice([1, 2, 5]), rng.choice([1, 17, 128, 1000, 4097, 20000])
        causal, blhd = rng.random() < 0.6, rng.random() < 0.3
        q, k, v = qkv(B, G * Hkv, Hkv, Lq, Lk, D, blhd=blhd, cache=Lk + rng.choice([0, 100]))
        lens = torch.tensor([rng.choice([0, 1, Lq, Lk // 2, Lk, Lk + 3]) for _ in range(B)], dtype=torch.int32,
                            device="cuda") if rng.random() < 0.4 else None
        o, lse = tkc.attention(q, k, v, causal=causal, k_lengths=lens, return_lse=True)
        want, want_lse = _masked_lse(q, k, v, causal, lens)
        case = dict(B=B, G=G, Hkv=Hkv, Lq=Lq, Lk=Lk, D=D, causal=causal, blhd=blhd, lens=lens)
        assert rel_err(o, want) < 1e-2 or want.abs().max() == 0 == o.abs().max(), case
        assert torch.equal(torch.isposinf(lse), torch.isposinf(want_lse)), case
        torch.testing.assert_close(lse.nan_to_num(posinf=0.0), want_lse.nan_to_num(posinf=0.0), rtol=1e-4,
                                   atol=1e-3, msg=str(case))


def _masked_lse(q, k, v, causal, lens):
    """float32 (o, lse): batch b over its first lens[b] keys (all without lens),
    causal bottom-right in them; a row with none: o = 0, lse = +inf."""
    q, k, v = (t.float() for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    lq, lk = s.shape[-2:]
    n = (torch.full((q.shape[0],), lk, device="cuda") if lens is None else lens.clamp(0, lk).long())[:, None, None, None]
    j = torch.arange(lk, device="cuda")
    keep = j < n
    if causal:
        keep = keep & (j <= torch.arange(lq, device="cuda")[:, None] + n - lq)
    s = s.masked_fill(~keep, -math.inf)
    m = s.amax(-1, keepdim=True).nan_to_num(neginf=0.0)
    p = (s - m).exp()
    l = p.sum(-1, keepdim=True)
    return p @ v / torch.where(l == 0, 1.0, l), torch.where(l[..., 0] == 0, math.inf, l[..., 0].log() + m[..., 0])


@pytest.mark.parametrize("Lq,Lk", [(300, 1000), (40, 4096)])
def test_sdpa_drop_in_top_left_causal_matches_sdpa(Lq, Lk):
    """tkc.nn.scaled_dot_product_attention with is_causal and more keys than
    queries (transformers' static-cache prompt): SDPA's top-left mask, query i
    seeing keys 0..i, computed by tkc.attention over the first Lq keys."""
    import torch.nn.functional as F
    import tkc.nn
    q, k, v = qkv(2, 16, 4, Lq, Lk, 128)
    got = tkc.nn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True, enable_gqa=True)
    assert rel_err(got, want) < 1e-2
