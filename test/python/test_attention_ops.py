"""tkc.attention's PyTorch face on the CPU: the torch.library ops, their fake
(meta) implementations, autograd and torch.compile, with the tile-IR
interpreter standing in for the GPU launch (tensors go through numpy and
back). The layouts the op picks (SDPA's [B, H, L, D], FlashAttention's
[B, L, H, D] memory, packed varlen sequences) reach the kernels as views,
so this checks the op's views, strides and argument order too. The GPU
tests (test/gpu/test_attention_gpu.py) run the real kernels."""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")

from helpers import interpreted as _interpreted  # noqa: E402
from tkc.diagnostics import TkcError  # noqa: E402
from tkc.torchops import plans  # noqa: E402
from tkc.torchops import attn as ops  # noqa: E402
from tkc.kernels.attention_picks import backward_kernels, forward_kernel  # noqa: E402


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    plans.forget()  # each test's picks and stand-ins, not the last test's
    monkeypatch.setattr(ops, "forward_kernel", lambda *key: _interpreted(forward_kernel(*key)))
    monkeypatch.setattr(ops, "backward_kernels",
                        lambda *key: tuple(_interpreted(k) for k in backward_kernels(*key)))


def _reference(q, k, v, causal, scale):
    """float64 attention (GQA by repeating k, v; bottom-right causal; empty rows 0)."""
    q, k, v = (t.double() for t in (q, k, v))
    g = q.shape[-3] // k.shape[-3]
    k, v = k.repeat_interleave(g, -3), v.repeat_interleave(g, -3)
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        lq, lk = s.shape[-2:]
        keep = torch.arange(lk)[None, :] <= torch.arange(lq)[:, None] + (lk - lq)
        s = s.masked_fill(~keep, -math.inf)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ v


def _qkv(B, Hq, Hkv, Lq, Lk, D, blhd=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    def make(H, L):
        t = torch.randn(B, L, H, D, generator=g) if blhd else torch.randn(B, H, L, D, generator=g)
        t = t.bfloat16()
        return (t.transpose(1, 2) if blhd else t).requires_grad_()
    return make(Hq, Lq), make(Hkv, Lk), make(Hkv, Lk)


def _rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("blhd", [False, True], ids=["bhld", "blhd"])
@pytest.mark.parametrize("causal,D", [(False, 64), (True, 64), (True, 128), (True, 256)])
def test_forward_and_gradients(blhd, causal, D):
    """Values and gradients against float64 autograd, GQA 2:1, ragged
    lengths, Lq != Lk; FlashAttention's memory layout needs no copy (the
    output keeps it)."""
    q, k, v = _qkv(1, 4, 2, 77, 130, D, blhd=blhd)
    scale = 0.125
    o, lse = ops._fwd(q, k, v, causal, scale)
    assert o.shape == q.shape and lse.shape == (1, 4, 77)
    assert o.transpose(1, 2).is_contiguous() == blhd
    ref = _reference(q, k, v, causal, scale)
    assert _rel(o, ref) < 1e-2
    do = torch.randn_like(o)
    o.backward(do)
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    ref.backward(do.double())
    for g, t in zip(grads, (q, k, v)):
        assert g.shape == t.shape and _rel(g, t.grad) < 2e-2


def test_long_sequences_get_the_ping_pong_forward(monkeypatch):
    """From LONG_KEYS keys on, the op launches FlashAttention-3's schedule
    (ping-pong + overlap): same values."""
    monkeypatch.setattr(sys.modules["tkc.kernels.attention_picks"], "LONG_KEYS", {64: 130, 128: 130})
    picked = []
    monkeypatch.setattr(ops, "forward_kernel",
                        lambda *key: picked.append(forward_kernel(*key)) or _interpreted(picked[-1]))
    for Lk in (129, 130):
        q, k, v = _qkv(1, 4, 2, 77, Lk, 64, blhd=False)
        o, _ = ops._fwd(q, k, v, True, 0.125)
        assert _rel(o, _reference(q, k, v, True, 0.125)) < 1e-2
    assert ["pingpong" in k.name for k in picked] == [False, True]


def test_head_dim_256_takes_the_long_forward_earlier_without_the_mask():
    """D = 256: the long forward from LONG_KEYS[256] keys without the mask,
    from CAUSAL_LONG_KEYS[256] with it (the causal long forward is the
    slower one at 1k)."""
    from tkc.kernels.attention_picks import CAUSAL_LONG_KEYS, LONG_KEYS
    assert LONG_KEYS[256] < CAUSAL_LONG_KEYS[256]
    for layout in ("bhld", "blhd", "varlen"):
        picked = lambda causal, keys: "pingpong" in forward_kernel(256, causal, layout, keys).name  # noqa: E731
        assert [picked(False, n) for n in (LONG_KEYS[256] - 1, LONG_KEYS[256])] == [False, True]
        assert [picked(True, n) for n in (LONG_KEYS[256], CAUSAL_LONG_KEYS[256] - 1,
                                          CAUSAL_LONG_KEYS[256])] == [False, False, True]


def test_short_causal_sequences_get_the_paired_forward():
    """Causal varlen below PAIRED_CAUSAL_KEYS keys: one consumer warpgroup a
    block, two blocks an SM; from LONG_KEYS on the long forward; without the
    mask the short one. bhld and blhd never: their zigzag forwards run up to
    the long forward's keys (ZIGZAG_CAUSAL_KEYS); at D = 256 never."""
    from tkc.kernels.attention_picks import LONG_KEYS, PAIRED_CAUSAL_KEYS, ZIGZAG_CAUSAL_KEYS
    for D, tile in ((64, "kv128"), (128, "kv64")):
        picked = lambda D, causal, keys: forward_kernel(D, causal, "varlen", keys).name  # noqa: E731
        n = PAIRED_CAUSAL_KEYS[D]
        assert picked(D, True, 130).endswith(f"{tile}_s2_c1_b2")
        assert picked(D, True, n - 1).endswith("_c1_b2")
        assert "pingpong" in picked(D, True, max(n, LONG_KEYS[D]))
        assert not picked(D, False, 130).endswith("_b2") and not picked(D, False, n - 1).endswith("_b2")
        assert ZIGZAG_CAUSAL_KEYS[D] >= PAIRED_CAUSAL_KEYS[D]
        for layout in ("bhld", "blhd"):
            for keys in (130, n - 1, n, 2 * n):
                assert not forward_kernel(D, True, layout, keys).name.endswith("_b2")
    assert not forward_kernel(256, True, "bhld", 130).name.endswith("_b2")


def test_causal_forwards_are_zigzag_below_zigzag_causal_keys():
    """Causal (bhld, blhd) below ZIGZAG_CAUSAL_KEYS: the short forward (at
    D = 64 two consumer warpgroups, 3/8 of the exponentials on the FMA pipe
    and the diagonal's mask alone) and at D = 128 from LONG_KEYS the long
    one with the diagonal's mask alone, persistent in zigzag order; from
    there on the long one a block a work item; at D = 256 never."""
    from tkc.kernels.attention_picks import LONG_KEYS, ZIGZAG_CAUSAL_KEYS
    for layout in ("bhld", "blhd"):
        picked = lambda D, keys: forward_kernel(D, True, layout, keys).name  # noqa: E731
        n = ZIGZAG_CAUSAL_KEYS[128]
        assert picked(128, 130).endswith("kv128_zigzag")
        assert picked(128, LONG_KEYS[128]).endswith("pingpong_zigzag_diag")
        assert picked(128, n - 1).endswith("pingpong_zigzag_diag") and picked(128, n).endswith("pingpong")
        n = ZIGZAG_CAUSAL_KEYS[64]
        short = "kv128_s2_zigzag_fma38_diag"
        assert picked(64, 130).endswith(short) and picked(64, n - 1).endswith(short)
        assert picked(64, n).endswith("pingpong_c3") and picked(64, LONG_KEYS[64]).endswith("pingpong_c3")
    assert "zigzag" not in forward_kernel(256, True, "bhld", 130).name


def test_exponentials_on_the_fma_pipe_where_measured_faster():
    """ZIGZAG_EX2_FMA of the softmax's exponentials on the FMA pipe in D =
    64's zigzag causal forward, nowhere else (the backwards: none since
    stats_acc)."""
    from tkc.kernels.attention_picks import ZIGZAG_EX2_FMA, attention_kernels
    assert ZIGZAG_EX2_FMA == {64: 0.375}
    with_share = {k.name for D in (64, 128, 256) for causal in (False, True)
                  for layout in ("bhld", "blhd", "varlen") for k in attention_kernels(D, causal, layout)
                  if "_fma" in k.name}
    assert with_share == {"attn_fwd_d64_causal_bhld_kv128_s2_zigzag_fma38_diag",
                          "attn_fwd_d64_causal_blhd_kv128_s2_zigzag_fma38_diag"}


def test_forwards_without_a_mask_are_persistent():
    """Without the mask: the short forward persistent at D = 64 and 128, the
    long one at D = 128 (PERSISTENT); with it, at D = 256 and for varlen, a
    block a work item."""
    from tkc.kernels.attention_picks import LONG_KEYS
    picked = lambda D, causal, keys: forward_kernel(D, causal, "bhld", keys).name  # noqa: E731
    assert picked(64, False, 130).endswith("_c3_persistent")
    assert picked(128, False, 130).endswith("kv128_persistent")
    assert picked(128, False, LONG_KEYS[128]).endswith("pingpong_persistent")
    assert not picked(64, False, LONG_KEYS[64]).endswith("_persistent")
    assert not any(picked(D, True, 130).endswith("_persistent") for D in (64, 128, 256))
    assert not picked(256, False, 130).endswith("_persistent")
    assert not forward_kernel(64, False, "varlen", 130).name.endswith("_persistent")


def test_backwards_are_a_block_an_item_with_their_schedule():
    """Every backward at D <= 128 is a block a work item (no persistent
    twin: "Warp ids" in attention_bwd) with its schedule (BWD_SCHEDULE):
    the overlap, the statistics as the wgmmas' accumulator starts, outside
    varlen two dS^T tiles, and dK and dV by TMA stores except for varlen and
    DKV_REGISTERS (D 64 without the mask, from 2048 keys on); every one has
    warp-uniform warp ids and dQ's TMA adds issued by a store warp. At
    D = 256 dQ goes by atomic adds, four columns a lane (dq_packed)."""
    from tkc.compiler import compile_to
    from tkc.kernels.attention_picks import DKV_REGISTERS
    assert DKV_REGISTERS == {(64, False): 2048}
    picked = lambda D, causal, layout, keys=2048: backward_kernels(D, causal, layout, keys)[1]  # noqa: E731
    for D in (64, 128):
        for layout in ("bhld", "blhd", "varlen"):
            for causal in (False, True):
                kern = picked(D, causal, layout)
                assert "zigzag" not in kern.name and "persistent" not in kern.name
                tail = "_overlap" if layout == "varlen" else "_overlap_ds2"
                if layout != "varlen" and (D, causal) in DKV_REGISTERS:
                    tail += "_dkvreg"                   # (dkv_tma's default is in no name)
                assert kern.name.endswith(tail + "_sacc")
                assert kern.uniform_ids == "warp"
                # below DKV_REGISTERS' keys: the TMA stores everywhere but varlen
                short = picked(D, causal, layout, 2047)
                assert short.name == (kern.name.replace("_dkvreg", "") if layout != "varlen" else kern.name)
        module = picked(D, False, "varlen").trace()
        compile_to(module, "tile")
        assert 'role = "stores"' in str(module)
    assert picked(256, True, "bhld").name == "attn_bwd_d256_causal_bhld_dqatomic_dqpk"   # packed adds
    assert backward_kernels(64, True, "bhld", 1024)[0].name == "attn_prep_d64_bhld"


def test_opcheck():
    """torch.library.opcheck: schema, fake tensors, autograd registration and
    AOT dispatch of the forward op agree with its real implementation."""
    q, k, v = _qkv(1, 2, 1, 64, 96, 64)
    torch.library.opcheck(ops._fwd.custom_op, (q, k, v, True, 0.125))


def test_compiles_without_graph_breaks():
    """A model that calls the op traces as one graph (fullgraph=True), and its
    backward runs through the compiled graph."""
    q, k, v = _qkv(1, 2, 2, 64, 64, 64, seed=3)
    w = torch.randn(64, 64, requires_grad=True)

    def model(q, k, v):
        o, _ = ops._fwd(q, k, v, True, 0.125)
        return (o.float() @ w).square().mean()

    loss = torch.compile(model, backend="aot_eager", fullgraph=True)(q, k, v)
    loss.backward()
    assert all(t.grad is not None and t.grad.isfinite().all() for t in (q, k, v, w))


def test_varlen_forward_and_gradients():
    lengths_q, lengths_k = [30, 1, 100], [50, 20, 99]
    cu_q = torch.tensor([0, *np.cumsum(lengths_q)], dtype=torch.int32)
    cu_k = torch.tensor([0, *np.cumsum(lengths_k)], dtype=torch.int32)
    g = torch.Generator().manual_seed(5)
    q = torch.randn(int(cu_q[-1]), 4, 64, generator=g).bfloat16().requires_grad_()
    k, v = (torch.randn(int(cu_k[-1]), 2, 64, generator=g).bfloat16().requires_grad_()
            for _ in range(2))
    o, lse = ops._vfwd(q, k, v, cu_q, cu_k, 100, 99, True, 0.125)
    do = torch.randn_like(o)
    o.backward(do)
    for b in range(3):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        qb, kb, vb = (t.detach()[s].transpose(0, 1).requires_grad_() for t, s in ((q, sq), (k, sk), (v, sk)))
        ref = _reference(qb, kb, vb, True, 0.125)
        assert _rel(o[sq].transpose(0, 1), ref) < 1e-2
        ref.backward(do[sq].transpose(0, 1).double())
        for t, s, r in ((q, sq, qb), (k, sk, kb), (v, sk, vb)):
            assert _rel(t.grad[s].transpose(0, 1), r.grad) < 2e-2


def _refused(fn, args, match):
    with pytest.raises(TkcError, match=match) as e:
        fn(*args)
    assert "test_attention_ops.py" in str(e.value)  # the caller's line


def test_bad_inputs_are_refused_at_the_callers_line():
    q, k, v = (t.detach() for t in _qkv(1, 4, 2, 64, 64, 64))
    z = lambda *shape: torch.zeros(shape, dtype=torch.bfloat16)  # noqa: E731
    _refused(ops.attention, (q.float(), k, v), "q must be bf16")
    _refused(ops.attention, (q[0], k, v), r"q must be \[B, H, L, D\]")
    _refused(ops.attention, (z(1, 3, 64, 64), k, v), r"query heads \(3\) must be a multiple of the "
                                                     r"key/value heads \(2\)")
    _refused(ops.attention, (q, z(1, 2, 64, 128), z(1, 2, 64, 128)), "one head dim, got 64, 128")
    _refused(ops.attention, (z(1, 2, 8, 96),) * 3, r"head dim 96 is not supported")
    _refused(ops.attention, (q, k, v[:, :, :32]), "k and v must have one shape")
    _refused(ops.attention, (q, k, v), "q must be on a CUDA device, got cpu")  # CPU tensors


def test_bad_offsets_are_refused():
    q, k = torch.zeros(10, 2, 64, dtype=torch.bfloat16), torch.zeros(12, 2, 64, dtype=torch.bfloat16)
    cu = lambda *c: torch.tensor(c, dtype=torch.int32)  # noqa: E731
    good = cu(0, 4, 10), cu(0, 6, 12)
    fn = ops.attention_varlen
    _refused(fn, (q, k, k, cu(0, 4, 9), good[1], 6, 6), r"must rise from 0 to 10 .* got \[0, 4, 9\]")
    _refused(fn, (q, k, k, cu(0, 7, 4, 10), good[1], 9, 9), r"must rise from 0 to 10")
    _refused(fn, (q, k, k, good[0], good[1], 5, 6), r"6 rows is longer than the max_seqlen given "
                                                     r"for cu_seqlens_q \(5\)")
    _refused(fn, (q, k, k, good[0].long(), good[1], 6, 6), "must be an int32 tensor")
    _refused(fn, (q, k, k, good[0], cu(0, 2, 6, 12), 6, 6), "must describe one batch")
    _refused(fn, (q, k, k, *good, 6, 6), "q must be on a CUDA device, got cpu")  # CPU tensors
