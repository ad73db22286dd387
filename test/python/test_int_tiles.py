"""Integer tiles (docs/dsl.md, "Integer tiles"): i32 register tiles and
vectors interpreted against numpy (arithmetic wrapping modulo 2^32,
conversions, comparisons, reductions, ragged loads), one-element stores of
index values and int64 loads, the runtime's argument checks for i64 gls, and
the located errors for what integers do not do. The lowering is checked by
test/lit/lowering/int-tiles.mlir and on the GPU by test/gpu/test_int_gpu.py."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, i32, i64, rt, st
from tkc.diagnostics import TkcError
from tkc.ops import (abs, col_max, col_sum, copy, div, exp, fill, iota, load, max, min, mma_AB,
                     neg_infty, pos_infty, relu, row_max, row_sum, store, sum, where, zero)
from helpers import marker_line, refused_at  # noqa: E402
from int_kernels import argmax, tile_map

pytest.importorskip("mlir")


def wrap32(x):
    """Python/numpy integers to int32, keeping the low 32 bits (the GPU's i32)."""
    return ((np.asarray(x, np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)


@tkc.kernel(warps=1)
def _ops(a: gl(i32, 1, 1, 32, 32), b: gl(i32, 1, 1, 32, 32), f: gl(f32, 1, 1, 32, 32),
         out: gl(i32, 1, 11, 32, 32), outf: gl(f32, 1, 2, 32, 32), red: gl(i32, 1, 4, 1, 32),
         n: gl(i32, 1, 1, 1, 16)):
    x, y = load(rt(i32, 32, 32), a, (0, 0, 0, 0)), load(rt(i32, 32, 32), b, (0, 0, 0, 0))
    k = tkc.warpid() + 3                         # an index value as a scalar operand
    store(out, x + y, (0, 0, 0, 0))
    store(out, 5 - x * k, (0, 1, 0, 0))
    store(out, x * y, (0, 2, 0, 0))
    store(out, max(x, y), (0, 3, 0, 0))
    store(out, min(2, x), (0, 4, 0, 0))
    store(out, abs(x) - relu(y), (0, 5, 0, 0))
    store(out, where((x <= y) & ~(y == 0), iota(rt(i32, 32, 32), 1, start=k), -x), (0, 6, 0, 0))
    store(out, load(rt(f32, 32, 32), f, (0, 0, 0, 0)).to(i32), (0, 7, 0, 0))
    store(out, fill(rt(i32, 32, 32), k * 1000), (0, 8, 0, 0))
    store(out, max(neg_infty(rt(i32, 32, 32)), min(pos_infty(rt(i32, 32, 32)), x)), (0, 9, 0, 0))
    store(out, copy(rt(i32, 32, 32), x.to(f32) * 0.5), (0, 10, 0, 0))
    store(outf, x.to(bf16).to(f32), (0, 0, 0, 0))
    store(outf, where(x > y, 1.0, -1.0), (0, 1, 0, 0))
    store(red, row_sum(x), (0, 0, 0, 0))
    store(red, row_max(x), (0, 1, 0, 0))
    store(red, col_sum(y), (0, 2, 0, 0))
    store(red, col_max(y), (0, 3, 0, 0))
    store(n, sum(row_sum(x)), at=(0, 0, 0, 0), clip=True)
    store(n, min(col_max(y)), at=(0, 0, 0, 1), clip=True)
    store(n, k * 2 ** 31 + 7, at=(0, 0, 0, 2), clip=True)     # an index keeps its low 32 bits


def _ops_inputs(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-2 ** 31, 2 ** 31, (1, 1, 32, 32)).astype(np.int32)
    b = rng.integers(-2 ** 31, 2 ** 31, (1, 1, 32, 32)).astype(np.int32)
    a[0, 0, :8] = rng.integers(-4, 5, (8, 32))          # small values: ties and zeros
    b[0, 0, :8] = rng.integers(-4, 5, (8, 32))
    a[0, 0, 8, 0] = -2 ** 31                            # abs(-2^31) wraps to itself
    f = (rng.standard_normal((1, 1, 32, 32)) * 1e3).astype(np.float32)
    f[0, 0, 0, :6] = [3e9, -3e9, np.nan, -2.5, 2.5, np.inf]
    return a, b, f


def test_i32_tiles_interpret_as_numpy():
    a, b, f = _ops_inputs()
    out = np.full((1, 11, 32, 32), 99, np.int32)
    outf = np.full((1, 2, 32, 32), np.nan, np.float32)
    red, n = np.zeros((1, 4, 1, 32), np.int32), np.zeros((1, 1, 1, 16), np.int32)
    _ops.interpret(a, b, f, out, outf, red, n)
    x, y, k = a[0, 0].astype(np.int64), b[0, 0].astype(np.int64), 3
    cols = np.broadcast_to(np.arange(32), (32, 32))
    trunc = np.clip(np.nan_to_num(np.trunc(f[0, 0].astype(np.float64)), nan=0.0), -2 ** 31, 2 ** 31 - 1)
    want = [x + y, 5 - x * k, x * y, np.maximum(x, y), np.minimum(x, 2), np.abs(x) - np.maximum(y, 0),
            np.where((x <= y) & (y != 0), cols + k, -x), trunc, np.full((32, 32), 3000), x,
            np.trunc((x.astype(np.float32) * np.float32(0.5)).astype(np.float64))]
    for i, w in enumerate(want):
        np.testing.assert_array_equal(out[0, i], wrap32(w), err_msg=str(i))
    assert trunc[0, :6].tolist() == [2 ** 31 - 1, -2 ** 31, 0, -2, 2, 2 ** 31 - 1]  # saturated, NaN -> 0
    as_f32 = a[0, 0].astype(np.float32)                 # round to nearest, then bf16 (through f32)
    bf = (as_f32.view(np.uint32) + 0x7FFF + ((as_f32.view(np.uint32) >> 16) & 1)) & 0xFFFF0000
    np.testing.assert_array_equal(outf[0, 0], bf.view(np.float32))
    np.testing.assert_array_equal(outf[0, 1], np.where(x > y, 1.0, -1.0))
    np.testing.assert_array_equal(red[0, 0, 0], wrap32(x.sum(1)))
    np.testing.assert_array_equal(red[0, 1, 0], wrap32(x.max(1)))
    np.testing.assert_array_equal(red[0, 2, 0], wrap32(y.sum(0)))
    np.testing.assert_array_equal(red[0, 3, 0], wrap32(y.max(0)))
    assert n[0, 0, 0, :3].tolist() == wrap32([x.sum(), y.max(0).min(), k * 2 ** 31 + 7]).tolist()


def test_argmax_writes_i32_indices():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 1, 70, 128)).astype(np.float32)
    x[0, 0, 3, [5, 70]] = 9.0                           # a tie across tiles: the first column wins
    x[0, 0, 4, [100, 101]] = 9.0                        # a tie inside one
    idx = np.full((1, 1, 1, 70), -7, np.int32)
    argmax.interpret(x, idx)
    np.testing.assert_array_equal(idx[0, 0, 0], np.argmax(x[0, 0], axis=1))


def test_tile_map_and_int64_elements():
    rng = np.random.default_rng(2)
    m = rng.integers(0, 8, (1, 1, 40, 150)).astype(np.int32)
    m[0, 0, 16:32, 64:128] = 0                                  # an empty tile
    TR, TC = 3, 3
    counts, work = np.full((1, 1, TR, TC), -9, np.int32), np.full((1, 1, TR, TC), -9, np.int32)
    hist = np.full((1, 1, TR * TC, 8), -9, np.int32)
    big = np.array([[[[2 ** 40 + 3, -2 ** 50, 5, 7]]]], np.int64)   # one past the grid's 3 columns
    echo = np.zeros((1, 1, 1, 4), np.int64)
    tile_map.interpret(m, counts, work, hist, big, echo)
    padded = np.full((TR * 16, TC * 64), -1)
    padded[:40, :150] = m[0, 0]
    tiles = padded.reshape(TR, 16, TC, 64).transpose(0, 2, 1, 3).reshape(TR, TC, -1)
    nz = (tiles > 0).sum(-1)
    np.testing.assert_array_equal(counts[0, 0], nz)
    np.testing.assert_array_equal(work[0, 0], np.where(nz > 0, np.arange(9).reshape(3, 3), -1))
    np.testing.assert_array_equal(hist[0, 0], np.stack([(tiles == k).sum(-1).reshape(-1) for k in range(8)], 1))
    np.testing.assert_array_equal(echo[0, 0, 0], [big[0, 0, 0, i] * 2 - 1 for i in range(3)] + [0])


@tkc.kernel(warps=1)
def _ragged(x: gl(i32, 1, 1, "R", "C"), y: gl(i32, 1, 1, "R", "C")):
    store(y, load(rt(i32, 32, 32), x, at=(0, 0, -3, 4), fill=-2 ** 31) + 1, at=(0, 0, -3, 4), clip=True)


def test_ragged_i32_loads_fill_exactly():
    x = np.arange(20 * 12, dtype=np.int32).reshape(1, 1, 20, 12)
    y = np.zeros_like(x)
    _ragged.interpret(x, y)
    np.testing.assert_array_equal(y[0, 0, :, 4:], x[0, 0, :, 4:] + 1)
    assert not y[0, 0, :, :4].any()


def test_i64_gls_take_int64_tensors_and_i32_gls_refuse_them():
    from tkc.runtime import Artifact
    from tkc.runtime.args import Signature
    manifest = {"version": 1, "kernel": "k", "target": "sm_90a", "warps": 1, "block": [32, 1, 1],
                "grid": ["1", "1", "1"], "shared_bytes": 0,
                "params": [{"name": "a", "kind": "gl", "dtype": "i64", "dims": [1, 1, 1, None]},
                           {"name": "b", "kind": "gl", "dtype": "i32", "dims": [1, 1, 1, None]}]}
    sig = Signature(Artifact(b"cubin", manifest).manifest)
    good = [np.zeros(8, np.int64), np.zeros(8, np.int32)]
    assert sig.bind(good, host_ok=True).env["a.c"] == 8
    with pytest.raises(TkcError, match="argument 1 'b' .*expected dtype i32, found i64"):
        sig.bind([np.zeros(8, np.int64), np.zeros(8, np.int64)], host_ok=True)
    with pytest.raises(TkcError, match="argument 0 'a' .*expected dtype i64, found i32"):
        sig.bind([np.zeros(8, np.int32), np.zeros(8, np.int32)], host_ok=True)


# ---------------------------------------------------------------- what integers do not do

def _line(marker: str) -> int:
    return marker_line(__file__, marker)


def _fails(kernel, marker: str, *words):
    refused_at(kernel.trace, __file__, marker, *words)


G32, GF = gl(i32, 1, 1, 16, 16), gl(f32, 1, 1, 16, 16)


def _k(body):
    """A one-warp kernel over an i32 gl `a` and an f32 gl `g`, running body(a, g)."""
    def k(a: G32, g: GF):
        body(a, g)
    k.__name__ = body.__name__
    return tkc.kernel(warps=1)(k)


def _t(a):
    return load(rt(i32, 16, 16), a, (0, 0, 0, 0))


ERRORS = [  # (body, its marker, words of the message); the body's line is the one located
    (lambda a, g: exp(_t(a)), "exp", ("exp computes on float tiles", ".to(tkc.f32)")),  # @exp
    (lambda a, g: div(_t(a), 2), "div", ("div computes on float tiles",)),  # @div
    (lambda a, g: _t(a) / 2, "truediv", ("div computes on float tiles",)),  # @truediv
    (lambda a, g: _t(a) * 0.5, "float", ("must be an int or an index value beside an i32 tile",)),  # @float
    (lambda a, g: mma_AB(_t(a), _t(a), zero(rt(f32, 16, 16))), "mma", ("bf16 or both f16",)),  # @mma
    (lambda a, g: st(i32, 16, 16), "st", ("an i32 tile lives in registers",)),  # @st
    (lambda a, g: load(rt(i32, 16, 16), g, (0, 0, 0, 0)), "load_f32", ("to and from an i32 gl",)),  # @load_f32
    (lambda a, g: load(rt(f32, 16, 16), a, (0, 0, 0, 0)), "load_i32", ("by i32 tiles",)),  # @load_i32
    (lambda a, g: load(rt(i32, 16, 16), a, at=(0, 0, 1, 0), fill=0.5), "fill", ("an integer",)),  # @fill
    (lambda a, g: store(a, _t(a), (0, 0, 0, 0), add=True), "add", ("adds into an f32 gl",)),  # @add
    (lambda a, g: where(_t(a) < load(rt(f32, 16, 16), g, (0, 0, 0, 0)), 1.0, 0.0), "mixed",  # @mixed
     ("compares with an i32 tile or an int",)),
    (lambda a, g: store(a, load(f32, g, at=(0, 0, 0, 0), fill=0.0), at=(0, 0, 0, 0), clip=True),  # @store_f32
     "store_f32", ("is an index value or an int", ".to(tkc.i32)")),
    (lambda a, g: load(i64, a, at=(0, 0, 0, 0), fill=0), "load_i64", ("is read as tkc.i32",)),  # @load_i64
    (lambda a, g: fill(rt(i32, 16, 16), 2 ** 31), "range", ("does not fit an i32",)),  # @range
    (lambda a, g: relu(_t(a)) - 1 / _t(a), "rdiv", ("div computes on float tiles",)),  # @rdiv
]


@pytest.mark.parametrize("body, marker, words", ERRORS, ids=[e[1] for e in ERRORS])
def test_what_integers_do_not_do_is_a_located_error(body, marker, words):
    body.__name__ = f"k_{marker}"
    _fails(_k(body), marker, *words)


@pytest.mark.parametrize("dtype", [i32, i64])
def test_element_stores_of_index_values(dtype):
    @tkc.kernel(warps=2)
    def k(a: gl(dtype, 1, 1, 1, 16)):
        with tkc.if_(tkc.warpid() == 1):
            store(a, tkc.warpid() * -5 + 2 ** 33, at=(0, 0, 0, 3), clip=True)
        store(a, 2 ** 31 - 1, at=(0, 0, 0, 20), clip=True)      # outside: not written
    a = np.zeros((1, 1, 1, 16), np.int32 if dtype == i32 else np.int64)
    k.interpret(a)
    want = 2 ** 33 - 5
    assert a[0, 0, 0].tolist() == [0, 0, 0, int(wrap32(want)) if dtype == i32 else want] + [0] * 12
