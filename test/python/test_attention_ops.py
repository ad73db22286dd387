"""tkc.attention's PyTorch face on the CPU: the torch.library ops, their fake
(meta) implementations, autograd and torch.compile, with the tile-IR
interpreter standing in for the GPU launch (tensors go through numpy and
back). The layouts the op picks (SDPA's [B, H, L, D], FlashAttention's
[B, L, H, D] memory, packed varlen sequences) reach the kernels as views,
so this checks the op's views, strides and argument order too. The GPU
tests (test/gpu/test_attention_gpu.py) run the real kernels."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")

from helpers import attention_qkv, grads_match, interpreted as _interpreted  # noqa: E402
from tkc.diagnostics import TkcError  # noqa: E402
from tkc.torchops import plans  # noqa: E402
from tkc.torchops import attn as ops  # noqa: E402
from tkc.torchops import attn_decode as decode  # noqa: E402
from tkc.torchops.attn_decode import decode_kernels  # noqa: E402
from tkc.kernels.attention_tuned import backward_kernels, forward_kernel  # noqa: E402


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    plans.forget()  # each test's picks and stand-ins, not the last test's
    monkeypatch.setattr(ops, "forward_kernel", lambda *key: _interpreted(forward_kernel(*key)))
    monkeypatch.setattr(ops, "backward_kernels",
                        lambda *key: tuple(_interpreted(k) for k in backward_kernels(*key)))
    monkeypatch.setattr(decode, "decode_kernels", lambda D: tuple(_interpreted(k) for k in decode_kernels(D)))
    monkeypatch.setattr(decode, "sms", lambda device: 4)
    monkeypatch.setattr(decode, "resident", lambda kernel, device: 1)


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


def _rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("blhd", [False, True], ids=["bhld", "blhd"])
@pytest.mark.parametrize("causal,D", [(False, 64), (True, 64), (True, 128), (True, 256)])
def test_forward_and_gradients(blhd, causal, D):
    """Values and gradients against float64 autograd, GQA 2:1, ragged
    lengths, Lq != Lk; FlashAttention's memory layout needs no copy (the
    output keeps it)."""
    q, k, v = attention_qkv(1, 4, 2, 77, 130, D, blhd=blhd)
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


def test_strided_inputs_reach_the_kernels_as_they_are(monkeypatch):
    """q, k, v unbound from one packed [B, L, 3, H, D] projection (views 3
    heads' rows apart) go to the strided kernels as they are, values and
    gradients right, the output in q's memory order; a view the kernels
    cannot take (D's elements apart) is copied first."""
    launched = []

    def recording(*key):
        inner = _interpreted(forward_kernel(*key))
        run = inner.run
        inner.run = lambda *args: launched.append(args[:3]) or run(*args)
        return inner
    monkeypatch.setattr(ops, "forward_kernel", recording)
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(1, 100, 3, 2, 64, generator=g).bfloat16().requires_grad_()
    q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))     # [B, H, L, D], strides (., 64, 384, 1)
    o, _ = ops._fwd(q, k, v, True, 0.125)
    assert o.transpose(1, 2).is_contiguous()   # q's memory order: o.transpose(1, 2).reshape(B, L, -1) is a view
    assert [t.untyped_storage().data_ptr() for t in launched[0]] == [qkv.untyped_storage().data_ptr()] * 3
    assert [t.stride() for t in launched[0]] == [q.stride(), k.stride(), v.stride()]
    assert _rel(o, _reference(q, k, v, True, 0.125)) < 1e-2
    do = torch.randn_like(o)
    assert grads_match(o, _reference(q, k, v, True, 0.125), do, [qkv], 2e-2)
    apart = torch.randn(1, 2, 100, 64, 2, generator=g).bfloat16()[..., 0]   # D's elements 2 apart
    ops._fwd(apart, apart, apart, False, 0.125)
    assert all(t.is_contiguous() for t in launched[-1])


def test_the_tables_decide_what_the_op_launches(monkeypatch, tmp_path):
    """A pick is data: this machine's table saying FlashAttention-3's
    schedule (ping-pong + overlap) for D 64's causal forward in the bucket
    of 130 keys (128's) makes the op launch it there (the shipped tables:
    the zigzag one), with the same values."""
    import dataclasses

    from tkc.kernels import attention_tuned as tuned
    from tkc.kernels.attention_schedule import key_bucket
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    space = tuned.FORWARD[64, True, "bhld"]
    long = next(c for c in space.configs if c["pingpong"])
    picked = _launched_before_and_after(monkeypatch, space, (64, True, "bhld", key_bucket(130)), long, 77, 130)
    assert picked == ["attn_fwd_d64_causal_bhld_kv128_s2_zigzag_fma38_diag",
                      "attn_fwd_d64_causal_bhld_kv128_s2_overlap_pingpong_c3"]
    assert dataclasses.asdict(tuned.forward_space(64, True, "bhld")[1]) == long


def test_a_chunk_over_a_longer_cache_runs_its_query_row(monkeypatch, tmp_path):
    """77 queries over 300 keys (causal: the chunk's rows end at the cache's
    end) key the forward by both buckets (256 keys, 128 queries): a row for
    that key decides what the op launches; without one, 256 keys' pick
    runs, as it did before queries joined the key."""
    from tkc.kernels import attention_tuned as tuned
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    space = tuned.FORWARD[64, True, "bhld"]
    square = space.kernel(space.choose((64, True, "bhld", 256))).name
    other = next(c for c in space.configs if space.kernel(c).name != square)
    picked = _launched_before_and_after(monkeypatch, space, (64, True, "bhld", 256, 128), other, 77, 300)
    assert picked == [square, space.kernel(other).name]


def _launched_before_and_after(monkeypatch, space, key, config, lq, lk) -> list:
    """The forwards the op launches (interpreted, checked against the
    reference) for causal D 64 attention of lq queries over lk keys, before
    and after this machine's table gives key the configuration."""
    from tkc.tune import tables
    picked = []
    monkeypatch.setattr(ops, "forward_kernel",
                        lambda *key: picked.append(forward_kernel(*key)) or _interpreted(picked[-1]))
    q, k, v = attention_qkv(1, 4, 2, lq, lk, 64)
    for record in (False, True):
        if record:
            tables.record(space.name, key, {"config": config})
        space.forget()
        plans.forget()
        o, _ = ops._fwd(q, k, v, True, 0.125)
        assert _rel(o, _reference(q, k, v, True, 0.125)) < 1e-2
    space.forget()
    return [k.name for k in picked]


def test_backwards_have_warp_uniform_ids_and_a_store_warp():
    """Every backward a table may pick has warp-uniform warp ids; at D <= 128
    dQ's TMA adds are issued by a store warp (varlen's too)."""
    from tkc.compiler import compile_to
    from tkc.kernels import attention_tuned as tuned
    for (D, causal, layout), space in tuned.BACKWARD.items():
        assert all(k.uniform_ids == "warp" for k in space.kernels())
    for D in (64, 128):
        module = backward_kernels(D, False, "varlen", 2048)[1].trace()
        compile_to(module, "tile")
        assert 'role = "stores"' in str(module)
    assert backward_kernels(64, True, "bhld", 1024)[0].name == "attn_prep_d64_bhld"


def test_opcheck():
    """torch.library.opcheck: schema, fake tensors, autograd registration and
    AOT dispatch of the forward op agree with its real implementation."""
    q, k, v = attention_qkv(1, 2, 1, 64, 96, 64)
    torch.library.opcheck(ops._fwd.custom_op, (q, k, v, True, 0.125))


def test_compiles_without_graph_breaks():
    """A model that calls the op traces as one graph (fullgraph=True), and its
    backward runs through the compiled graph."""
    q, k, v = attention_qkv(1, 2, 2, 64, 64, 64, seed=3)
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


def test_varlen_takes_a_packed_projection_as_it_is(monkeypatch):
    """q, k, v split from one packed [T, 3H, D] projection (a token's H*D
    elements adjacent, its rows 3H*D apart) reach the varlen kernels as
    views of the projection's storage, forward and backward; values and
    gradients as from contiguous copies."""
    launched = []

    def recording(kernels):
        def wrap(k):
            run = k.run
            k.run = lambda *args: launched.append(args) or run(*args)
            return k
        return kernels if not isinstance(kernels, tuple) else tuple(wrap(k) for k in kernels)
    monkeypatch.setattr(ops, "forward_kernel",
                        lambda *key: recording((_interpreted(forward_kernel(*key)),))[0])
    monkeypatch.setattr(ops, "backward_kernels",
                        lambda *key: recording(tuple(_interpreted(k) for k in backward_kernels(*key))))
    cu = torch.tensor([0, 30, 31, 131], dtype=torch.int32)
    g = torch.Generator().manual_seed(8)
    qkv = torch.randn(131, 6, 64, generator=g).bfloat16().requires_grad_()
    q, k, v = qkv.split(2, 1)
    o, _ = ops._vfwd(q, k, v, cu, cu, 100, 100, True, 0.125)
    o.backward(do := torch.randn_like(o))
    base = qkv.untyped_storage().data_ptr()
    fwd_args, bwd_args = launched[0], launched[-1]
    assert [t.untyped_storage().data_ptr() for t in fwd_args[:3]] == [base] * 3
    assert [t.untyped_storage().data_ptr() for t in bwd_args[:3]] == [base] * 3
    grad = qkv.grad.clone()
    c = qkv.detach().clone().requires_grad_()
    o2, _ = ops._vfwd(*(t.contiguous() for t in c.split(2, 1)), cu, cu, 100, 100, True, 0.125)
    o2.backward(do)
    assert _rel(o, o2) == 0 and _rel(grad, c.grad) == 0


def _refused(fn, args, match):
    with pytest.raises(TkcError, match=match) as e:
        fn(*args)
    assert "test_attention_ops.py" in str(e.value)  # the caller's line


def test_bad_inputs_are_refused_at_the_callers_line():
    q, k, v = (t.detach() for t in attention_qkv(1, 4, 2, 64, 64, 64))
    z = lambda *shape: torch.zeros(shape, dtype=torch.bfloat16)  # noqa: E731
    _refused(ops.attention, (q.float(), k, v), "q must be bf16")
    _refused(ops.attention, (q[0], k, v), r"q must be \[B, H, L, D\]")
    _refused(ops.attention, (z(1, 3, 64, 64), k, v), r"query heads \(3\) must be a multiple of the "
                                                     r"key/value heads \(2\)")
    _refused(ops.attention, (q, z(1, 2, 64, 128), z(1, 2, 64, 128)), "one head dim, got 64, 128")
    _refused(ops.attention, (z(1, 2, 8, 80),) * 3, r"head dim 80 is not supported")
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
