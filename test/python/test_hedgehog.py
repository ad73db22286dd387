"""Hedgehog attention on the CPU (tkc/kernels/hedgehog.py): the kernel through
the interpreter after the block passes (the staged producer/consumer form,
its races and deadlocks checked) against numpy's float64 reference on ragged
lengths, with random maps, alpha and beta per head; the torch op with the
interpreter standing in for the GPU (and torch.library.opcheck); what the
compiled kernel is made of; refusals at the caller's line."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import Launch

from tkc.kernels import reference
from tkc.kernels.hedgehog import hedgehog
from tkc.kernels.reference import round_bf16

pytest.importorskip("mlir")

SCALE = 128 ** -0.5


def rel_err(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def _inputs(B, H, L, seed, qk=1.0, maps=1.0):
    """q, k, v [B, H, L, 128], maps [H, 128, 64] (bf16 values), alpha in [0, 3)
    and beta in [0.1, 1) per head (f32), as ThunderKittens' generator draws
    them; qk and maps scale q, k and the maps (1: softmax features near one-hot,
    the clamp at work; 0.1: smooth)."""
    rng = np.random.default_rng(seed)
    q, k = (round_bf16(rng.standard_normal((B, H, L, 128)) * qk) for _ in range(2))
    v = round_bf16(rng.standard_normal((B, H, L, 128)))
    qmap, kmap = (round_bf16(rng.standard_normal((H, 128, 64)) * maps) for _ in range(2))
    alpha = rng.uniform(0.0, 3.0, H).astype(np.float32)
    beta = rng.uniform(0.1, 1.0, H).astype(np.float32)
    return q, k, v, qmap, kmap, alpha, beta


def _interpret(q, k, v, qmap, kmap, alpha, beta, scale=SCALE):
    o = np.full(v.shape, np.nan, np.float32)
    hedgehog().interpret(q, k, v, qmap[None], kmap[None], alpha[None, None, None],
                         beta[None, None, None], o, np.float32(scale))
    return o


@pytest.mark.parametrize("L,qk,maps", [
    (64, 1.0, 1.0), (100, 0.3, 0.1), (130, 1.0, 0.1), (200, 0.3, 1.0), (257, 1.0, 1.0),
])
def test_hedgehog(L, qk, maps):
    args = _inputs(2, 2, L, seed=L, qk=qk, maps=maps)
    o = _interpret(*args)
    assert not np.isnan(o).any()
    assert rel_err(o, reference.hedgehog(*args, SCALE)) < 1e-2  # bf16 P, phi and state


def test_both_parts_count():
    """At L = 257 the linear part (alpha) and the window (beta) each change the
    output far beyond the kernel's error, so neither can be dropped or lagged
    by a chunk unnoticed; alpha = 0 is sliding-window softmax alone."""
    q, k, v, qmap, kmap, alpha, beta = _inputs(1, 2, 257, seed=7, qk=0.3, maps=0.1)
    o = _interpret(q, k, v, qmap, kmap, alpha, beta)
    ref = reference.hedgehog(q, k, v, qmap, kmap, alpha, beta, SCALE)
    err = rel_err(o, ref)
    assert err < 5e-3
    assert rel_err(reference.hedgehog(q, k, v, qmap, kmap, 0 * alpha, beta, SCALE), ref) > 20 * err
    assert rel_err(reference.hedgehog(q, k, v, qmap, kmap, alpha, 0 * beta, SCALE), ref) > 20 * err
    zero = np.zeros_like(alpha)
    o = _interpret(q, k, v, qmap, kmap, zero, beta)
    assert rel_err(o, reference.hedgehog(q, k, v, qmap, kmap, zero, beta, SCALE)) < 5e-3


def test_linear_only():
    """beta = 0: only the linear part, which the first two chunks lack (their
    rows are 0 / (0 + 1e-6) = 0); a different scale is passed through."""
    q, k, v, qmap, kmap, alpha, _ = _inputs(1, 2, 200, seed=3, maps=0.1)
    beta = np.zeros(2, np.float32)
    o = _interpret(q, k, v, qmap, kmap, alpha, beta, scale=0.05)
    assert np.all(o[:, :, :128] == 0)
    ref = reference.hedgehog(q, k, v, qmap, kmap, alpha, beta, 0.05)
    assert rel_err(o, ref) < 1e-2


def test_refusals():
    from tkc.diagnostics import TkcError
    q, k, v, qmap, kmap, alpha, beta = _inputs(1, 2, 64, seed=0)
    with pytest.raises(TkcError, match=r"'qmap' .*must be 64, found 32"):
        _interpret(q, k, v, np.ascontiguousarray(qmap[..., :32]), kmap, alpha, beta)
    with pytest.raises(TkcError, match=r"'alpha' is 1, .*named 'H'"):   # one head count
        _interpret(q, k, v, qmap, kmap, alpha[:1].copy(), beta)


def test_compiled():
    """HGMMA from shared and registers, TMA loads, the mbarrier ring and the
    setmaxnreg split; no wgmma serialised by ptxas, spills within the declared
    allowance."""
    from tkc import sass
    from tkc.kernels.hedgehog import SPILLS
    if sass.cuobjdump() is None:
        pytest.skip("no cuobjdump")
    art = hedgehog().build()
    ops = sass.opcodes(sass.disassemble(art.cubin))
    assert ops.get("HGMMA", 0) > 0 and ops.get("UTMALDG", 0) > 0
    assert "mbarrier" in art.ptx and "setmaxnreg" in art.ptx
    res = art.manifest["resources"]
    assert not res["wgmma_serialized"]
    assert res["spill_stores"] <= SPILLS


# ---------------------------------------------------------------- the torch op

torch = pytest.importorskip("torch")


def _interpreted(*args):
    """The kernel's launch, as the op makes it, run by the interpreter."""
    *tensors, o, scale = args
    out = np.full(tuple(o.shape), np.nan, np.float32)
    hedgehog().interpret(*(t.detach().float().contiguous().numpy() for t in tensors), out,
                         np.float32(scale))
    with torch.no_grad():
        o.copy_(torch.from_numpy(out))


@pytest.fixture
def ops(monkeypatch):
    from tkc.torchops import linear_attn as linear_ops
    monkeypatch.setattr(linear_ops, "_hedgehog_kernel", lambda: Launch(_interpreted))
    return linear_ops


def _torch_inputs(L, seed=5):
    """CPU tensors: q, k, v, qmap, kmap in bf16, alpha and beta in f32."""
    return tuple(torch.from_numpy(x).to(torch.bfloat16 if x.ndim > 1 else torch.float32)
                 for x in _inputs(1, 2, L, seed, maps=0.1))


def test_op(ops):
    """The custom op (its views, argument order) and its fake implementation
    (torch.library.opcheck), on CPU tensors."""
    args = _torch_inputs(150)
    o = ops._hedgehog(*args, 0.1)
    assert o.dtype == torch.bfloat16 and o.shape == args[2].shape
    ref = reference.hedgehog(*(t.float().numpy() for t in args), 0.1)
    assert rel_err(o.float().numpy(), ref) < 1e-2
    torch.library.opcheck(ops._hedgehog.custom_op, (*args, 0.1), test_utils=("test_schema", "test_faketensor"))


def test_op_errors(ops):
    import tkc
    from tkc.diagnostics import TkcError
    args = dict(zip(("q", "k", "v", "qmap", "kmap", "alpha", "beta"), _torch_inputs(64)))
    q, v = args["q"], args["v"]
    for bad, message in [
        (dict(q=q.float()), "q must be bf16"),
        (dict(q=q[..., :64], k=q[..., :64]), "the head dim 64 is not supported"),
        (dict(v=v[..., :64]), "the value dim 64 is not supported"),
        (dict(qmap=args["qmap"][:, :, :32]), r"qmap must be a bfloat16 tensor \[2, 128, 64\], got "
                                             r"torch.bfloat16 \(2, 128, 32\)"),
        (dict(kmap=args["kmap"].float()), "kmap must be a bfloat16 tensor"),
        (dict(alpha=args["alpha"][:1]), r"alpha must be a float32 tensor \[2\]"),
        (dict(beta=args["beta"].bfloat16()), r"beta must be a float32 tensor \[2\], got "
                                             r"torch.bfloat16"),
        ({}, "q must be on a CUDA device"),
    ]:
        with pytest.raises(TkcError, match=r"test_hedgehog.py:\d+: error: hedgehog: " + message):
            tkc.hedgehog(**{**args, **bad})
