"""Wide memory access: the "wide" rt layout and the "flat" rv kind move 16
bytes a lane (fragments.py). The lowering is simulated lane by lane
(lanesim: real gl loads and stores, shuffles), the PTX and SASS are read,
and tk-layout-selection's choice of the wide layout is checked."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, rv
from tkc.hopper import fragments
from tkc.hopper.lanes import lane_offset, runs, vec_runs
from tkc.ops import (add, div_row, exp, load, max, min, mul, mul_row, row_max, row_sum, rsqrt,
                     store, sub, sub_row, sum)

from lanesim import round_to, run_traced

pytest.importorskip("mlir")


# ---------------------------------------------------------------- the layouts

def test_wide_base_tile_is_a_bijection_of_16_byte_rows():
    """Every element of a 16x16 base tile is held once; a lane's 8 are one row's adjacent columns."""
    seen = set()
    for lane in range(32):
        coords = [fragments.base_coord("wide", k, lane) for k in range(8)]
        rows = {r for r, _ in coords}
        cols = [c for _, c in coords]
        assert len(rows) == 1 and cols == list(range(cols[0], cols[0] + 8)) and cols[0] % 8 == 0
        seen.update(coords)
    assert len(seen) == 256


def test_wide_coords_are_lane0_plus_lane_offset():
    for lane in range(32):
        dr, dc = lane_offset("wide", lane)
        for k in range(8):
            r0, c0 = fragments.base_coord("wide", k, 0)
            assert fragments.base_coord("wide", k, lane) == (r0 + dr, c0 + dc)


@pytest.mark.parametrize("length,chunk", [(1024, 8), (768, 8), (128, 4), (64, 2), (96, 1), (1600, 2)])
def test_flat_vector_is_a_bijection_in_chunks(length, chunk):
    assert fragments.flat_chunk(length) == chunk
    n = fragments.vec_elems(length, "flat")
    held = [[fragments.vec_coord(length, "flat", i, lane) for i in range(n)] for lane in range(32)]
    assert sorted(e for lane in held for e in lane) == list(range(length))
    for lane in range(32):  # each run of vec_runs is `chunk` adjacent elements at lane * chunk + e0
        for i, e0, m in vec_runs(rv(f32, length, "flat").view):
            assert m == chunk and held[lane][i:i + m] == list(range(lane * chunk + e0, lane * chunk + e0 + m))


def test_runs_are_adjacent_columns():
    for layout, n in (("row", 2), ("col", 1), ("wide", 8)):
        t = rt(f32, 32, 48, layout).view
        for lane in range(32):
            for i, _, _, m in runs(t):
                coords = [fragments.tile_coord(32, 48, layout, i + k, lane) for k in range(m)]
                assert m == n and coords == [(coords[0][0], coords[0][1] + k) for k in range(m)]


# ---------------------------------------------------------------- kernels, simulated

@tkc.kernel(warps=1, grid=lambda x, y: (4, 1))
def _wide_exp(x: gl(bf16, 1, 1, 64, 64), y: gl(bf16, 1, 1, 64, 64)):
    i = tkc.block_idx.x
    store(y, exp(load(rt(f32, 16, 64, "wide"), x, (0, 0, i, 0))), (0, 0, i, 0))


@tkc.kernel(warps=1, grid=lambda x, y: (2, 1))
def _auto_softmax(x: gl(f32, 1, 1, 64, 32), y: gl(bf16, 1, 1, 64, 32)):
    """Row tiles the layout selection makes wide: row reductions and broadcasts."""
    i = tkc.block_idx.x
    t = load(rt(f32, 32, 32), x, (0, 0, i, 0))
    e = exp(sub_row(t, row_max(t)))
    store(y, div_row(e, row_sum(e)), (0, 0, i, 0))


@tkc.kernel(warps=1, grid=lambda x, w, y: (4, 1))
def _layernorm_rows(x: gl(bf16, 1, 1, 4, 1024), w: gl(f32, 1, 1, 1, 1024), y: gl(bf16, 1, 1, 4, 1024)):
    """One row per block as a flat vector: sum to scalars, scalar rsqrt."""
    i = tkc.block_idx.x
    v = load(rv(f32, 1024, "flat"), x, (0, 0, i, 0))
    d = sub(v, sum(v) * (1.0 / 1024))
    r = rsqrt(sum(mul(d, d)) * (1.0 / 1024) + 1e-5)
    store(y, mul(mul(d, r), load(rv(f32, 1024, "flat"), w, (0, 0, 0, 0))), (0, 0, i, 0))


@tkc.kernel(warps=1, grid=lambda x, y: (1, 1))
def _vector_extremes(x: gl(f32, 1, 1, 1, 96), y: gl(f32, 1, 1, 1, 96)):
    v = load(rv(f32, 96, "flat"), x, (0, 0, 0, 0))
    store(y, add(mul(v, 0.0), max(v) - min(v)), (0, 0, 0, 0))


@tkc.kernel(warps=1, grid=lambda x, y: (1, 1))
def _col_vector_sum(x: gl(f32, 1, 1, 1, 32), y: gl(f32, 1, 1, 1, 32)):
    """Replicated kinds: a "col" vector's sum counts each element once."""
    v = load(rv(f32, 32, "col"), x, (0, 0, 0, 0))
    w = load(rv(f32, 32, "row"), x, (0, 0, 0, 0))
    store(y, add(mul(v, 0.0), sum(v) + 2 * sum(w)), (0, 0, 0, 0))


def _bf(x):
    return round_to(x, "bf16")


def test_wide_tile_round_trip_simulated():
    rng = np.random.default_rng(0)
    x = _bf(rng.standard_normal((64, 64)))
    y = np.full_like(x, np.nan)
    run_traced(_wide_exp, [x, y], blocks=4)
    np.testing.assert_allclose(y, _bf(np.exp(x)), rtol=2 ** -7)


def test_layout_selection_widens_a_softmax_and_it_is_exact():
    assert '"wide"' in _compiled_tile_ir(_auto_softmax)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    y = np.full_like(x, np.nan)
    run_traced(_auto_softmax, [x, y], blocks=2)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, _bf(e / e.sum(1, keepdims=True)), rtol=2 ** -7, atol=1e-6)


def test_flat_vector_layernorm_simulated():
    rng = np.random.default_rng(2)
    x, w = _bf(rng.standard_normal((4, 1024))), rng.standard_normal((1, 1024)).astype(np.float32)
    y = np.full_like(x, np.nan)
    run_traced(_layernorm_rows, [x, w, y], blocks=4)
    m = x.mean(1, keepdims=True)
    ref = (x - m) / np.sqrt(((x - m) ** 2).mean(1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(y, ref, rtol=2 ** -7, atol=1e-2)


def test_vector_reductions_simulated():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 96)).astype(np.float32)
    y = np.full_like(x, np.nan)
    run_traced(_vector_extremes, [x, y])
    np.testing.assert_allclose(y, np.full_like(x, x.max() - x.min()), rtol=1e-6)
    x = rng.standard_normal((1, 32)).astype(np.float32)
    y = np.full_like(x, np.nan)
    run_traced(_col_vector_sum, [x, y])
    np.testing.assert_allclose(y, np.full_like(x, 3 * x.sum()), rtol=1e-5)


def test_interpreter_agrees():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    y = np.full_like(x, np.nan)
    _auto_softmax.interpret(x, y)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, _bf(e / e.sum(1, keepdims=True)), rtol=2 ** -7, atol=1e-6)


# ---------------------------------------------------------------- PTX and SASS

def _compiled_tile_ir(kernel) -> str:
    from tkc.compiler import compile_to
    module = kernel.trace()
    with module.context:
        return compile_to(module, "tile")


def _ptx(kernel) -> str:
    from tkc.compiler import compile_to
    module = kernel.trace()
    with module.context:
        return compile_to(module, "ptx")


def _global_accesses(ptx: str) -> dict:
    out = {}
    for line in ptx.splitlines():
        word = line.strip().split(maxsplit=1)[0] if line.strip() else ""
        if word.startswith(("ld.global", "st.global")):
            out[word] = out.get(word, 0) + 1
    return out


@pytest.mark.parametrize("kernel,loads,stores", [
    (_wide_exp, 4, 4),            # 16x64 bf16: one 16-byte access per base tile
    (_auto_softmax, 8, 4),        # 32x32 f32 in, bf16 out: two per f32 base tile
    (_layernorm_rows, 4 + 8, 4),  # x: 1024 bf16 = 4 chunks of 8; w: f32 = 8 of 4
])
def test_global_accesses_are_128_bit(kernel, loads, stores):
    acc = _global_accesses(_ptx(kernel))
    assert acc == {"ld.global.v4.b32": loads, "st.global.v4.b32": stores}, acc


def test_sass_has_128_bit_global_accesses(tmp_path, monkeypatch):
    from tkc.sass import cuobjdump, disassemble, opcodes
    if cuobjdump() is None:
        pytest.skip("cuobjdump not available (pip install nvidia-cuda-cuobjdump)")
    from tkc.compiler import ptxas
    sass = disassemble(ptxas(_ptx(_layernorm_rows))[0])
    ldg = [ln for ln in sass.splitlines() if "LDG.E" in ln]
    stg = [ln for ln in sass.splitlines() if "STG.E" in ln]
    assert ldg and all("LDG.E.128" in ln for ln in ldg), ldg
    assert stg and all("STG.E.128" in ln for ln in stg), stg
