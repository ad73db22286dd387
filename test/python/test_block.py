"""Block reductions (block_sum/max/min, block_row_*/block_col_*) in the
interpreter, against numpy: the warps' values combined in warp order, the
same bits in every warp; inside loops, in a pipelined loop's consumers, as a
barrier for the race detector; and their errors at the author's line."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, rv, st, sv, tma
from tkc.compiler import compile_to
from tkc.diagnostics import TkcError
from tkc.ops import (add_col, block_col_max, block_col_sum, block_max, block_min, block_row_max,
                     block_row_sum, block_sum, col_sum, load, mul_col, mul_row, rsqrt, store, sub_row, sum,
                     zero)

W = 4


@pytest.fixture
def rng():
    return np.random.default_rng(3)


def in_order(parts, fn=np.add):
    """The warps' values combined in warp order, in float32: ((x0 + x1) + x2) + ..."""
    acc = parts[0]
    for p in parts[1:]:
        acc = fn(acc, p, dtype=np.float32)
    return acc


# ---------------------------------------------------------------- elementwise over warps

@tkc.kernel(warps=W, grid=lambda x, o, c, r, s: (1,))
def tiles(x: gl(f32, 1, 1, 16 * W, 64), o: gl(f32, 1, 3, 16 * W, 64), c: gl(f32, 1, 3, W, 64),
          r: gl(f32, 1, 1, W, 64), s: gl(f32, 1, 3, 1, 16 * W)):
    """Each warp's 16 x 64 tile of x: its block sum / max / min (a tile, a
    "row" and a flat vector, a scalar), written by every warp."""
    w = tkc.warpid()
    t = load(rt(f32, 16, 64), x, (0, 0, w, 0))
    for i, op in enumerate((block_sum, block_max, block_min)):
        store(o, op(t), (0, i, w, 0))
        store(c, op(col_sum(t)), (0, i, w, 0))
        store(s, op(sum(load(rv(f32, 64, "flat"), x, (0, 0, w, 0)))), at=(0, i, 0, w), clip=True)
    v = load(rv(f32, 64, "flat"), x, (0, 0, 16 * W - 1 - w, 0))
    store(r, block_sum(v), (0, 0, w, 0))


def test_tiles_vectors_scalars(rng):
    x = rng.standard_normal((1, 1, 16 * W, 64), dtype=np.float32)
    x[0, 0, 5, 7] = np.nan                       # maxnum / minnum: a NaN loses to a number
    o, c = np.zeros((1, 3, 16 * W, 64), np.float32), np.zeros((1, 3, W, 64), np.float32)
    r, s = np.zeros((1, 1, W, 64), np.float32), np.zeros((1, 3, 1, 16 * W), np.float32)
    tiles.interpret(x, o, c, r, s)
    pieces = list(x[0, 0].reshape(W, 16, 64))
    for i, fn in enumerate((np.add, np.fmax, np.fmin)):
        want = in_order(pieces, fn)
        for w in range(W):  # every warp: the same bits
            np.testing.assert_array_equal(o[0, i, 16 * w:16 * w + 16], want)
        cols = [p.sum(0, dtype=np.float32) for p in pieces]      # op(col_sum(t))
        np.testing.assert_allclose(c[0, i], np.broadcast_to(in_order(cols, fn), (W, 64)), rtol=1e-6)
        scalars = [x[0, 0, w].sum(dtype=np.float32) for w in range(W)]
        np.testing.assert_allclose(s[0, i, 0, :W], in_order(scalars, fn), rtol=1e-6)
    assert not np.isnan(o[0, 1]).any()
    np.testing.assert_array_equal(r[0, 0], np.broadcast_to(in_order(list(x[0, 0, ::-1][:W])), (W, 64)))


# ---------------------------------------------------------------- row and column forms

@tkc.kernel(warps=W, grid=lambda x, rs, rm, cs, cm: (1,))
def along(x: gl(f32, 1, 1, 16 * W, 64 * W), rs: gl(f32, 1, 1, W, 16), rm: gl(f32, 1, 1, W, 16),
          cs: gl(f32, 1, 1, W, 64), cm: gl(f32, 1, 1, W, 64)):
    """Rows split over the warps' columns (row forms), columns over their
    rows (column forms)."""
    w = tkc.warpid()
    piece = load(rt(f32, 16, 64), x, (0, 0, 0, w))      # rows 0..15, columns 64w..
    store(rs, block_row_sum(piece), (0, 0, w, 0))
    store(rm, block_row_max(piece), (0, 0, w, 0))
    strip = load(rt(f32, 16, 64), x, (0, 0, w, 0))      # rows 16w.., columns 0..63
    store(cs, block_col_sum(strip), (0, 0, w, 0))
    out = zero(rv(f32, 64, "row"))
    block_col_max(out, strip)                          # in place
    store(cm, out, (0, 0, w, 0))


def test_row_and_column_forms(rng):
    x = rng.standard_normal((1, 1, 16 * W, 64 * W), dtype=np.float32)
    rs, rm = np.zeros((1, 1, W, 16), np.float32), np.zeros((1, 1, W, 16), np.float32)
    cs, cm = np.zeros((1, 1, W, 64), np.float32), np.zeros((1, 1, W, 64), np.float32)
    along.interpret(x, rs, rm, cs, cm)
    rows, cols = x[0, 0, :16], x[0, 0, :, :64]
    for w in range(W):
        np.testing.assert_allclose(rs[0, 0, w], rows.sum(1), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(rm[0, 0, w], rows.max(1))
        np.testing.assert_allclose(cs[0, 0, w], cols.sum(0), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(cm[0, 0, w], cols.max(0))


# ---------------------------------------------------------------- LayerNorm of long rows

D = 1024          # a row: W warps of 256 columns
EPS = 1e-5


@tkc.kernel(warps=W, grid=lambda x, w, b, y: (x.r // 16,))
def layernorm_rows(x: gl(f32, 1, 1, "N", D), w: gl(f32, 1, 1, 1, D), b: gl(f32, 1, 1, 1, D),
                   y: gl(f32, 1, 1, "N", D)):
    """16 rows a block, each split over the warps (warp i: columns 256i..):
    the row statistics are block row sums."""
    i, rows = tkc.warpid(), tkc.block_idx.x
    t = load(rt(f32, 16, D // W), x, (0, 0, rows, i))
    d = sub_row(t, block_row_sum(t) * (1.0 / D))
    r = rsqrt(block_row_sum(d * d) * (1.0 / D) + EPS)
    out = mul_col(mul_row(d, r), load(rv(f32, D // W, "row"), w, (0, 0, 0, i)))
    store(y, add_col(out, load(rv(f32, D // W, "row"), b, (0, 0, 0, i))), (0, 0, rows, i))


def test_layernorm_split_rows(rng):
    n = 32
    x = rng.standard_normal((1, 1, n, D), dtype=np.float32) * 3 + 1
    w = rng.standard_normal((1, 1, 1, D), dtype=np.float32)
    b = rng.standard_normal((1, 1, 1, D), dtype=np.float32)
    y = np.zeros_like(x)
    layernorm_rows.interpret(x, w, b, y)
    h = x[0, 0].astype(np.float64)
    ref = (h - h.mean(1, keepdims=True)) / np.sqrt(h.var(1, keepdims=True) + EPS) * w[0, 0] + b[0, 0]
    np.testing.assert_allclose(y[0, 0], ref, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- loops, pipelines, barriers

@tkc.kernel(warps=W, grid=lambda x, o: (1,))
def running(x: gl(f32, 1, 1, None, 64), o: gl(f32, 1, 1, 1, 64)):
    """A block_max per iteration of a run-time loop (its scratch reused)."""
    m = load(rv(f32, 64, "flat"), x, (0, 0, tkc.warpid(), 0))
    for k in tkc.range(1, x.r // W):
        m = block_max(m + load(rv(f32, 64, "flat"), x, (0, 0, k * W + tkc.warpid(), 0)))
    with tkc.if_(tkc.warpid() == 0):
        store(o, m, (0, 0, 0, 0))


def test_in_a_loop(rng):
    x = rng.standard_normal((1, 1, 3 * W, 64), dtype=np.float32)
    o = np.zeros((1, 1, 1, 64), np.float32)
    running.interpret(x, o)
    m = x[0, 0, :W]
    for k in range(1, 3):
        m = np.broadcast_to(in_order(list(m + x[0, 0, k * W:k * W + W]), np.fmax), (W, 64))
    np.testing.assert_array_equal(o[0, 0, 0], m[0])


@tkc.kernel(warps=W, grid=lambda x, o: (1,))
def pipelined(x: gl(f32, 1, 1, None, 64), o: gl(f32, 1, 1, 1, 64)):
    """Column sums of a tall x, 64 rows an iteration through a TMA pipeline:
    the consumers' block sums meet on their own barrier, not the block's."""
    x_s = st(f32, 64, 64)
    acc = zero(rv(f32, 64, "row"))
    for k in tkc.range(x.r // 64, stages=2):
        tma.load(x_s, x, (0, 0, k, 0))
        acc = acc + block_col_sum(load(rt(f32, 16, 64), x_s, (tkc.warpid(), 0)))
    with tkc.if_(tkc.warpid() == 0):
        store(o, acc, (0, 0, 0, 0))


def test_in_a_pipelined_loop(rng):
    module = pipelined.trace()
    compile_to(module, "tile")
    text = str(module)
    assert '"tk.block_sum"' in text and "id = 1 : i64" in text.split('"tk.block_sum"')[1].split("\n")[0]
    x = rng.standard_normal((1, 1, 256, 64), dtype=np.float32)
    o = np.zeros((1, 1, 1, 64), np.float32)
    pipelined.interpret(x, o)
    np.testing.assert_allclose(o[0, 0, 0], x[0, 0].sum(0), rtol=1e-4, atol=1e-4)


@tkc.kernel(warps=2, grid=lambda x, o: (1,))
def ordered(x: gl(f32, 1, 1, 16, 64), o: gl(f32, 1, 1, 16, 64)):
    """A block reduction orders shared memory as tkc.sync() does: warp 0's
    write before it, warp 1's read after it."""
    s = st(f32, 16, 64)
    with tkc.if_(tkc.warpid() == 0):
        store(s, load(rt(f32, 16, 64), x, (0, 0, 0, 0)), (0, 0))
    block_sum(1.0)
    with tkc.if_(tkc.warpid() == 1):
        store(o, load(rt(f32, 16, 64), s, (0, 0)), (0, 0, 0, 0))


def test_orders_like_a_sync(rng):
    x = rng.standard_normal((1, 1, 16, 64), dtype=np.float32)
    o = np.zeros_like(x)
    ordered.interpret(x, o)       # no race reported
    np.testing.assert_array_equal(o, x)


# ---------------------------------------------------------------- errors

def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def _fails(fn, marker: str, message: str, arrays, interpret=False):
    k = tkc.kernel(warps=W, grid=lambda *a: (1,))(fn)
    with pytest.raises(TkcError) as e:
        k.interpret(*arrays) if interpret else k.trace()
    assert message in e.value.message, e.value.message
    assert f":{_line(fn, marker)}:" in e.value.where, (e.value.where, marker)


def test_errors():
    def bf(x: gl(f32, 1, 1, 64, 64)):
        block_sum(load(rt(bf16, 16, 64), x, (0, 0, 0, 0)))   # <- bf16
    _fails(bf, "<- bf16", "block_sum reduces f32 tiles and vectors, got rt<bf16, 16, 64", [])

    def col(x: gl(f32, 1, 1, 64, 64)):
        block_col_sum(load(rt(f32, 16, 64, "col"), x, (0, 0, 0, 0)))   # <- col
    _fails(col, "<- col", "block_col_sum: the source tile must be in row layout", [])

    def shared(x: gl(f32, 1, 1, 64, 64)):
        block_max(sv(f32, 64))   # <- shared
    _fails(shared, "<- shared", "block_max: operand must be a register tile or vector", [])

    def some(x: gl(f32, 1, 1, 64, 64)):
        with tkc.if_(tkc.warpid() == 0):
            block_sum(1.0)   # <- some
    x = np.zeros((1, 1, 64, 64), np.float32)
    _fails(some, "<- some", "deadlock at sync", [x], interpret=True)
