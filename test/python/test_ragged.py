"""Ragged edges: tk.load {fill} and tk.store {clip} on a gl whose rows and
columns are not multiples of the tile. Simulated lane by lane (the clamped
addresses and the predicated stores), interpreted, and the launch rules
(requirements.divisible: only the access width on c) checked."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, rv, st
from tkc.diagnostics import TkcError
from tkc.ops import exp, load, store, sum

from lanesim import round_to, run_traced

pytest.importorskip("mlir")

M, N = 37, 72  # neither a multiple of the 16 x 64 tile; N a multiple of 8 (16-byte rows)


@tkc.kernel(warps=1, grid=lambda x, y: (6, 1))
def _tiles(x: gl(bf16, 1, 1, M, N), y: gl(bf16, 1, 1, M, N)):
    """3 x 2 tiles of 16 x 64 over 37 x 72: the last row and column of tiles are partial."""
    i, j = tkc.block_idx.x // 2, tkc.block_idx.x % 2
    t = load(rt(f32, 16, 64), x, (0, 0, i, j), fill=1.0)   # wide: 16-byte pieces
    store(y, exp(t), (0, 0, i, j), clip=True)


@tkc.kernel(warps=1, grid=lambda x, y, s: (3, 1))
def _fill_seen(x: gl(f32, 1, 1, M, 20), y: gl(f32, 1, 1, 48, 32), s: gl(f32, 1, 1, 3, 16)):
    """A col-layout tile (single-element accesses: any width) whose fill shows:
    the whole 16 x 32 tile is stored unclipped into a larger gl."""
    i = tkc.block_idx.x
    t = load(rt(f32, 16, 32, "col"), x, (0, 0, i, 0), fill=-2.0)
    store(y, t, (0, 0, i, 0))


@tkc.kernel(warps=1, grid=lambda x, y: (5, 1))
def _rows(x: gl(bf16, 1, 1, 5, 200), y: gl(f32, 1, 1, 5, 200)):
    """One row per block as a flat vector of 256 over 200 columns."""
    i = tkc.block_idx.x
    v = load(rv(f32, 256, "flat"), x, (0, 0, i, 0), fill=0.0)
    store(y, v - sum(v) / 200, (0, 0, i, 0), clip=True)


def _bf(a):
    return round_to(a, "bf16")


def _check_tiles(run):
    x = _bf(np.random.default_rng(0).standard_normal((M, N)))
    y = np.full((M, N), np.nan, np.float32)
    run(x, y)
    np.testing.assert_allclose(y, _bf(np.exp(x)), rtol=2 ** -7)


def test_ragged_tiles_simulated():
    _check_tiles(lambda x, y: run_traced(_tiles, [x, y], blocks=6))


def test_ragged_tiles_interpreted():
    _check_tiles(_tiles.interpret)


def test_fill_reads_outside_the_gl():
    x = np.random.default_rng(1).standard_normal((M, 20)).astype(np.float32)
    want = np.full((48, 32), -2.0, np.float32)
    want[:M, :20] = x
    for run in (lambda y, s: run_traced(_fill_seen, [x, y, s], blocks=3), lambda y, s: _fill_seen.interpret(x, y, s)):
        y, s = np.full((48, 32), np.nan, np.float32), np.zeros((3, 16), np.float32)
        run(y, s)
        np.testing.assert_array_equal(y, want)


def test_ragged_flat_vectors():
    x = _bf(np.random.default_rng(2).standard_normal((5, 200)))
    want = x - x.sum(1, keepdims=True) / 200
    for run in (lambda y: run_traced(_rows, [x, y], blocks=5), lambda y: _rows.interpret(x, y)):
        y = np.full((5, 200), np.nan, np.float32)
        run(y)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- launch rules

@tkc.kernel(warps=1, grid=lambda x, y: (tkc.cdiv(x.r, 16), tkc.cdiv(x.c, 64)))
def _any_m(x: gl(bf16, 1, 1, "M", "N"), y: gl(bf16, 1, 1, "M", "N")):
    i, j = tkc.block_idx.x, tkc.block_idx.y
    store(y, load(rt(f32, 16, 64), x, (0, 0, i, j), fill=0.0), (0, 0, i, j), clip=True)


def test_ragged_needs_only_the_access_width():
    """A runtime N: the row layout's bf16 pairs need N even, and layout
    selection does not widen the tile (16-byte accesses would need N % 8)."""
    from tkc.lowering.requirements import divisible
    from tkc.compiler import compile_to
    m = _any_m.trace()
    with m.context:
        assert '"wide"' not in compile_to(m, "tile")
        fn = [o for o in m.body.operations if o.operation.name == "func.func"][0]
        assert divisible(fn) == {0: [1, 1, 1, 2], 1: [1, 1, 1, 2]}
    x = np.zeros((37, 70), np.float32)
    _any_m.interpret(x, np.zeros_like(x))
    with pytest.raises(TkcError, match="multiple of 2"):
        _any_m.interpret(np.zeros((37, 71), np.float32), np.zeros((37, 71), np.float32))


def test_ragged_access_on_shared_memory_is_refused():
    def k(x: gl(f32, 1, 1, 16, 16)):
        s = st(f32, 16, 16)
        load(rt(f32, 16, 16), s, (0, 0), fill=0.0)
    with pytest.raises(TkcError, match="fill is for a gl"):
        tkc.kernel(k).trace()


def test_ragged_ptx_predicates_loads_and_stores():
    """Each ragged load is predicated, its registers preset to the fill (1.0 in
    bf16: 0x3f80 a half), with no select after it and no clamped address; each
    store is branched around."""
    from tkc.compiler import compile_to, ptxas
    m = _tiles.trace()
    with m.context:
        ptx = compile_to(m, "ptx")
    loads = [ln for ln in ptx.splitlines() if "ld.global.v4.b32" in ln]
    assert len(loads) == 4 and ptx.count("st.global.v4.b32") == 4
    assert all(re.search(r"@%p\d+ ld.global", ln) and ln.count("mov.b32") == 4
               and "0x3f803f80" in ln for ln in loads)
    assert "selp" not in ptx
    ptxas(ptx)  # assembles


def test_ragged_f32_load_presets_the_fill():
    """An f32 gl's ragged load: the preset is the fill's f32 bits (-2.0)."""
    from tkc.compiler import compile_to, ptxas
    m = _fill_seen.trace()
    with m.context:
        ptx = compile_to(m, "ptx")
    loads = [ln for ln in ptx.splitlines() if "ld.global" in ln and "@" in ln]
    assert loads and all("0fC0000000" in ln for ln in loads)
    ptxas(ptx)


# ---------------------------------------------------------------- element coordinates

T, D = 37, 64


@tkc.kernel(warps=1, grid=lambda x, w, y: (3, 1))
def _causal_conv(x: gl(bf16, 1, 1, T, D), w: gl(f32, 1, 1, 4, D), y: gl(f32, 1, 1, T, D)):
    """y[t] = sum_k w[k] * x[t - k]: loads shifted along time by k rows, the
    rows before 0 and after T reading 0."""
    from tkc.ops import mul_col, zero
    i = tkc.block_idx.x
    acc = zero(rt(f32, 16, 64))
    for k in range(4):
        xs = load(rt(f32, 16, 64), x, at=(0, 0, i * 16 - k, 0), fill=0.0)
        acc = acc + mul_col(xs, load(rv(f32, 64, "row"), w, (0, 0, k, 0)))
    store(y, acc, (0, 0, i, 0), clip=True)


def test_shifted_loads_of_a_causal_convolution():
    rng = np.random.default_rng(3)
    x, w = _bf(rng.standard_normal((T, D))), rng.standard_normal((4, D)).astype(np.float32)
    want = sum(w[k] * np.vstack([np.zeros((k, D), np.float32), x[:T - k]]) for k in range(4))
    for run in (lambda y: run_traced(_causal_conv, [x, w, y], blocks=3), lambda y: _causal_conv.interpret(x, w, y)):
        y = np.full((T, D), np.nan, np.float32)
        run(y)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@tkc.kernel(warps=1, grid=lambda x, y: (1, 1))
def _misaligned(x: gl(bf16, 1, 1, 16, 64), y: gl(bf16, 1, 1, 16, 64)):
    t = load(rt(bf16, 16, 32, "wide"), x, at=(0, 0, 0, 3), fill=0.0)
    store(y, t, (0, 0, 0, 0))


def test_element_columns_must_keep_accesses_aligned():
    with pytest.raises(TkcError, match="column 3 is not a multiple of 8"):
        _misaligned.interpret(np.zeros((16, 64), np.float32), np.zeros((16, 64), np.float32))


def test_element_coordinates_need_fill_or_clip():
    def k(x: gl(f32, 1, 1, 16, 16)):
        load(rt(f32, 16, 16), x, at=(0, 0, 1, 0))
    with pytest.raises(TkcError, match="give fill="):
        tkc.kernel(k).trace()
