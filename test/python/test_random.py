"""Random numbers: Philox4x32-10 against Random123's published answers, and
tk.rand lowered (simulated lane by lane, over every layout and vector kind)
and interpreted, both equal to tkc/philox.py's numbering of elements."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import f32, gl, i32, philox, rt, rv
from tkc.diagnostics import TkcError
from tkc.dialect.types import RT, RV
from tkc.ops import load, rand, store, where

from lanesim import bf16, run_kernel, run_traced

pytest.importorskip("mlir")

# Random123's kat_vectors for philox4x32_10: (counter, key, output)
KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
       ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
       ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


@pytest.mark.parametrize("counter,key,want", KAT)
def test_philox_known_answers(counter, key, want):
    assert tuple(int(w) for w in philox.philox4x32(counter, key)) == want


def test_uniform_numbers_elements_in_groups_of_four():
    e = np.arange(64)
    u = philox.uniform(7, 3, e)
    words = philox.philox4x32((e // 4, 0, 3, 0), (7, 0))
    want = np.array([int(words[i % 4][i]) >> 8 for i in e]) * 2.0 ** -24
    np.testing.assert_array_equal(u, want.astype(np.float32))
    assert ((u >= 0) & (u < 1)).all()


VIEWS = [RT("f32", 32, 48, "row"), RT("f32", 16, 32, "col"), RT("bf16", 32, 32, "wide"),
         RV("f32", 64, "col"), RV("f32", 64, "row"), RV("f32", 512, "flat"), RV("f32", 128, "flat")]


@pytest.mark.usefixtures("lane_major_io")
@pytest.mark.parametrize("v", VIEWS, ids=lambda v: v.text())
def test_rand_lowered_equals_the_reference(v):
    from mlir import ir
    from mlir.dialects import arith
    from tkc.dialect import ops
    seed, offset, base, stride = 0x1234567, 5, 4 * 1000003, 4 * 300

    def body():
        idx = [arith.constant(ir.IndexType.get(), n) for n in (seed, offset, base, stride)]
        return [ops.rand(v.mlir(), *idx)]
    out, = run_kernel([], [v], body, [])
    idx = np.indices(v.shape)
    e = base + (idx[0] * stride + idx[1] if isinstance(v, RT) else idx[0])
    want = philox.uniform(seed, offset, e)
    np.testing.assert_array_equal(out, bf16(want) if v.dtype == "bf16" else want)


N, D, P = 64, 64, 0.25


@tkc.kernel(warps=1, grid=lambda x, y, seed, offset: (4, 1))
def _dropout(x: gl(f32, 1, 1, N, D), y: gl(f32, 1, 1, N, D), seed: i32, offset: i32):
    """Dropout with the numbering of a [N, D] tensor: independent of the tiling."""
    i = tkc.block_idx.x
    t = load(rt(f32, 16, 64), x, (0, 0, i, 0))
    u = rand(rt(f32, 16, 64), seed, offset, i * 16 * D, D)
    store(y, where(u < P, 0.0, t * (1 / (1 - P))), (0, 0, i, 0))


def test_dropout_simulated_and_interpreted_agree_with_the_reference():
    x = np.random.default_rng(0).standard_normal((N, D)).astype(np.float32) + 3
    keep = philox.uniform(99, 1 << 20, np.arange(N * D).reshape(N, D)) >= P
    want = np.where(keep, x * np.float32(1 / (1 - P)), 0).astype(np.float32)
    for run in (lambda y: run_traced(_dropout, [x, y], blocks=4, scalars=(99, 1 << 20)),
                lambda y: _dropout.interpret(x, y, 99, 1 << 20)):
        y = np.full_like(x, np.nan)
        run(y)
        np.testing.assert_allclose(y, want, rtol=1e-6)
    assert abs(1 - keep.mean() - P) < 0.03


def test_numbers_are_uniform():
    """A chi-square over 32 bins of 2^18 numbers (deterministic: fixed seed)."""
    u = philox.uniform(2026, 0, np.arange(1 << 18))
    counts = np.bincount((u * 32).astype(int), minlength=32)
    chi2 = (((counts - len(u) / 32) ** 2) / (len(u) / 32)).sum()
    assert chi2 < 62  # p = 0.001 at 31 degrees of freedom


def test_unaligned_numbering_is_refused_by_the_interpreter():
    @tkc.kernel(warps=1)
    def k(y: gl(f32, 1, 1, 16, 16)):
        store(y, rand(rt(f32, 16, 16), 1, 0, 2, 16), (0, 0, 0, 0))
    with pytest.raises(TkcError, match="multiples of 4"):
        k.interpret(np.zeros((16, 16), np.float32))
