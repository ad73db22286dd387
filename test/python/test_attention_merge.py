"""The attention merge kernel (tkc/kernels/attention_merge.py: ring
attention's step) in the interpreter against numpy: two attention outputs
over disjoint key sets merge into the output over their union, for every
accumulator/output dtype pair, ragged rows, an output row offset, rows with
no keys on one side or both, and in place."""
from __future__ import annotations

import numpy as np
import pytest

from tkc.diagnostics import TkcError
from tkc.kernels import reference
from tkc.kernels.attention_merge import attention_merge
from tkc.kernels.reference import round_bf16 as bf

from helpers import rng_of

pytest.importorskip("mlir")


def _halves(rng, B, H, R, D, empty=()):
    """(oa, la, ob, lb, whole): the outputs over two halves of 40 keys (the
    first causal, so its first rows see few) and over all of them; rows in
    `empty` (side, row) see no key on that side (lse +inf, o 0)."""
    q, k, v = (rng.standard_normal((B, H, n, D)) for n in (R, 40, 40))
    oa, la = reference.attention_lse(q, k[:, :, :17], v[:, :, :17], 0.2, causal=True)
    ob, lb = reference.attention_lse(q, k[:, :, 17:], v[:, :, 17:], 0.2)
    for side, row in empty:
        o, lse = (oa, la) if side == "a" else (ob, lb)
        o[:, :, row], lse[:, :, row] = 0.0, np.inf
    return oa, la, ob, lb


@pytest.mark.parametrize("acc,out", [("bf16", "bf16"), ("bf16", "f32"), ("f32", "f32"), ("f32", "bf16")])
@pytest.mark.parametrize("R,D,r0", [(21, 64, 7), (16, 32, 0), (5, 128, 30)])
def test_merge_is_attention_over_the_union(request, acc, out, R, D, r0):
    rng = rng_of(request)
    B, H, L = 2, 3, r0 + R + 4
    oa, la, ob, lb = _halves(rng, B, H, R, D, empty=[("a", 0), ("b", 1), ("a", 2), ("b", 2)])
    oa = bf(oa) if acc == "bf16" else oa.astype(np.float32)
    ob = bf(ob)
    o = np.full((B, H, L, D), np.nan, np.float32)
    lo = np.full((B, H, 1, L), np.nan, np.float32)
    attention_merge(D, acc, out).interpret(oa.astype(np.float32), la[:, :, None].astype(np.float32),
                                           ob.astype(np.float32), lb[:, :, None].astype(np.float32), o, lo, r0)
    want_o, want_l = reference.attention_merge(oa, la, ob, lb)
    rows = slice(r0, r0 + R)
    tol = 2 ** -8 if out == "bf16" else 1e-5
    np.testing.assert_allclose(o[:, :, rows], want_o, rtol=tol, atol=tol)
    np.testing.assert_allclose(lo[:, :, 0, rows], want_l, rtol=1e-5)
    assert np.isnan(o[:, :, :r0]).all() and np.isnan(o[:, :, r0 + R:]).all()   # no other row written
    assert np.isnan(lo[:, :, 0, :r0]).all() and np.isnan(lo[:, :, 0, r0 + R:]).all()
    assert (o[:, :, r0 + 2] == 0).all() and np.isposinf(lo[:, :, 0, r0 + 2]).all()   # no key on either side


def test_merge_equals_attention_over_all_keys(request):
    """Where both sides are plain attention over disjoint keys, the merge is
    attention over the keys together (the identity ring attention rests on)."""
    rng = rng_of(request)
    B, H, R, D = 1, 2, 9, 64
    q, k, v = (rng.standard_normal((B, H, n, D)) for n in (R, 30, 30))
    oa, la = reference.attention_lse(q, k[:, :, :11], v[:, :, :11], 0.125)
    ob, lb = reference.attention_lse(q, k[:, :, 11:], v[:, :, 11:], 0.125)
    want, want_l = reference.attention_lse(q, k, v, 0.125)
    o, lo = np.empty((B, H, R, D), np.float32), np.empty((B, H, 1, R), np.float32)
    attention_merge(D, "f32", "f32").interpret(oa.astype(np.float32), la[:, :, None].astype(np.float32),
                                               bf(ob).astype(np.float32), lb[:, :, None].astype(np.float32),
                                               o, lo, 0)
    np.testing.assert_allclose(o, want, atol=2 ** -8)
    np.testing.assert_allclose(lo[:, :, 0], want_l, rtol=1e-5)


def test_merge_in_place(request):
    """o may be oa and lo la (the ring's f32 accumulator)."""
    rng = rng_of(request)
    oa, la, ob, lb = _halves(rng, 1, 2, 33, 64)
    acc, lacc = oa.astype(np.float32), la[:, :, None].astype(np.float32)
    want_o, want_l = reference.attention_merge(acc, la, bf(ob), lb)
    attention_merge(64, "f32", "f32").interpret(acc, lacc, bf(ob).astype(np.float32),
                                                lb[:, :, None].astype(np.float32), acc, lacc, 0)
    np.testing.assert_allclose(acc, want_o, atol=1e-5)
    np.testing.assert_allclose(lacc[:, :, 0], want_l, rtol=1e-5)


@pytest.mark.parametrize("args,match", [((48,), "multiple of 32"), ((512,), "multiple of 32"),
                                        ((64, "f16"), "'bf16' or 'f32'")])
def test_merge_refuses_what_it_cannot_build(args, match):
    with pytest.raises(TkcError, match=match):
        attention_merge(*args)
