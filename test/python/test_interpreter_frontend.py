"""Kernels traced from the Python DSL and interpreted: numbers, and errors
located at the author's line in this file."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, rv, st
from tkc.diagnostics import TkcError
from tkc.ops import (exp, group_load, load, row_max, row_sum, store, sub_row, div_row)

from atomic_kernels import atomic_after_two
from helpers import marker_line, ref_bf16


@tkc.kernel(warps=2, grid=lambda x, o: (x.r // 32,))
def softmax_rows(x: gl(f32, 1, 1, "N", 64), o: gl(f32, 1, 1, "N", 64)):
    """Each block stages 32 rows in shared memory; each warp softmaxes 16 of them."""
    blk, w = tkc.block_idx.x, tkc.warpid()
    s = st(f32, 32, 64)
    group_load(s, x, (0, 0, blk, 0), warps=2)
    tkc.sync()
    t = load(rt(bf16, 16, 64), s, (w, 0))
    m = row_max(rv(f32, 16), t)
    e = exp(sub_row(t, m))
    total = row_sum(rv(f32, 16), e)
    store(o, div_row(e, total), (0, 0, blk * 2 + w, 0))


def test_traced_softmax_matches_numpy():
    x = np.random.default_rng(4).standard_normal((96, 64)).astype(np.float32)
    o = np.full_like(x, np.nan)
    softmax_rows.interpret(x, o)
    t = ref_bf16(x)  # loaded into a bf16 tile; every bf16 result rounds again
    e = ref_bf16(np.exp(ref_bf16(t - t.max(axis=1, keepdims=True))))
    want = ref_bf16(e / e.astype(np.float64).sum(axis=1, keepdims=True).astype(np.float32))
    np.testing.assert_allclose(o, want, rtol=1e-2)
    np.testing.assert_allclose(o.sum(axis=1), 1.0, rtol=2e-2)


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@tkc.kernel(warps=2)
def half_sync(o: gl(f32, 1, 1, 16, 16)):
    with tkc.if_(tkc.warpid() == 0):
        tkc.sync()  # only warp 0 gets here


def test_deadlock_names_the_author_line():
    with pytest.raises(TkcError, match="deadlock at sync") as info:
        half_sync.interpret(np.zeros((16, 16), np.float32))
    assert info.value.where.startswith(f"{__file__}:{line_of(half_sync.fn, 'tkc.sync()')}:")


@tkc.kernel()
def past_the_end(o: gl(f32, 1, 1, 32, 16)):
    store(o, tkc.ops.zero(rt(f32, 16, 16)), (0, 0, 2, 0))


def test_out_of_bounds_store_names_the_author_line():
    with pytest.raises(TkcError, match=r"\(0, 0, 2, 0\).*out of bounds of shape \(1, 1, 32, 16\)") as info:
        past_the_end.interpret(np.zeros((32, 16), np.float32))
    assert info.value.where.startswith(f"{__file__}:{line_of(past_the_end.fn, 'store(o')}:")


def test_dims_with_one_name_must_agree():
    """x and o share the row count "N": an o with more rows would be left partly unwritten."""
    x = np.zeros((32, 64), np.float32)
    with pytest.raises(TkcError) as info:
        softmax_rows.interpret(x, np.zeros((64, 64), np.float32))  # @dims-call
    assert info.value.message == ("kernel 'softmax_rows': dim r of argument 1 'o' is 64, but dim r "
                                  "of argument 0 'x' is 32: both are named 'N' and must have one size")
    assert info.value.where == f"{__file__}:{marker_line(__file__, 'dims-call')}"  # the call, as a launch is located
    assert info.value.where.startswith(f"{__file__}:")


def test_malformed_dim_names_is_a_located_error_without_tk_verify():
    """The interpreter runs unverified IR: a bad tk.dim_names is still a TkcError."""
    from mlir import ir
    from tkc.interpreter import run
    m = softmax_rows.trace()
    f = next(o.operation for o in m.body.operations)
    with m.context:
        f.attributes["tk.dim_names"] = ir.ArrayAttr.get([])
    x = np.zeros((32, 64), np.float32)
    with pytest.raises(TkcError, match="tk.dim_names must be an array of 2 arrays") as info:
        run(m, [x, x.copy()])
    assert info.value.where.startswith(f"{__file__}:")


@tkc.kernel(warps=2)
def picks(x: gl(f32, 1, 1, 32, 48), cols: gl(f32, 1, 1, 2, 32), rows: gl(f32, 1, 1, 2, 48),
          at: tkc.f32):
    """Warp w picks column 5 + 20 w and row 3 + 24 w (run-time indices) of x."""
    w = tkc.warpid()
    t = load(rt(f32, 32, 48), x, (0, 0, 0, 0))
    store(cols, t[:, w * 20 + 5], (0, 0, w, 0))
    store(rows, t[w * 24 + 3 + tkc.block_idx.x, :], (0, 0, w, 0))


def test_picks_read_one_column_or_row():
    x = np.random.default_rng(0).standard_normal((1, 1, 32, 48)).astype(np.float32)
    cols, rows = np.zeros((1, 1, 2, 32), np.float32), np.zeros((1, 1, 2, 48), np.float32)
    picks.interpret(x, cols, rows, 0.0)
    np.testing.assert_array_equal(cols[0, 0], x[0, 0][:, [5, 25]].T)
    np.testing.assert_array_equal(rows[0, 0], x[0, 0][[3, 27]])


def test_pick_outside_at_run_time():
    @tkc.kernel(warps=1)
    def far(x: gl(f32, 1, 1, 16, 16), o: gl(f32, 1, 1, 1, 16)):
        store(o, load(rt(f32, 16, 16), x, (0, 0, 0, 0))[tkc.warpid() + 16, :], (0, 0, 0, 0))
    with pytest.raises(TkcError, match="col_pick: index 16 is outside the tile's 16 rows"):
        far.interpret(np.zeros((1, 1, 16, 16), np.float32), np.zeros((1, 1, 1, 16), np.float32))


def test_roll_is_numpys():
    """roll along rows and columns, negative and past-the-end shifts, in the
    interpreter: the diagonals q * roll(q, -d, 1) of q's outer product."""
    from tkc.ops import roll

    @tkc.kernel(warps=2)
    def rolled(x: gl(f32, 1, 1, 32, 32), o: gl(f32, 1, 4, 32, 32)):
        t = load(rt(f32, 16, 32), x, (0, 0, tkc.warpid(), 0))
        store(o, roll(t, -3, 1), (0, 0, tkc.warpid(), 0))
        store(o, t * roll(t, 37, 1), (0, 1, tkc.warpid(), 0))
        whole = load(rt(f32, 32, 32), x, (0, 0, 0, 0))
        store(o, roll(whole, 5, 0), (0, 2, 0, 0))
        store(o, roll(whole, -17, 0), (0, 3, 0, 0))
    x = np.random.default_rng(1).standard_normal((1, 1, 32, 32)).astype(np.float32)
    o = np.zeros((1, 4, 32, 32), np.float32)
    rolled.interpret(x, o)
    a = x[0, 0]
    np.testing.assert_array_equal(o[0, 0], np.roll(a, -3, 1))
    np.testing.assert_array_equal(o[0, 1], a * np.roll(a, 5, 1))
    np.testing.assert_array_equal(o[0, 2], np.roll(a, 5, 0))
    np.testing.assert_array_equal(o[0, 3], np.roll(a, -17, 0))


@tkc.kernel(warps=2, grid=lambda x, out, count: (x.r // 32, 1, 1))
def last_block_doubles(x: tkc.gl(tkc.f32, 1, 1, "R", 16), out: tkc.gl(tkc.f32, 1, 1, 32, 16),
                       count: tkc.gl(tkc.i32, 1, 1, 1, "N")):
    """Each block adds its 32 rows into out (a warp 16, atomically); the
    block that counts itself last (tkc.ops.atomic_add) doubles out."""
    from tkc.ops import atomic_add, load, store
    b, w = tkc.block_idx.x, tkc.warpid()
    store(out, load(tkc.rt(tkc.f32, 16, 16), x, (0, 0, 2 * b + w, 0)), (0, 0, w, 0), add=True)
    done = atomic_add(count, 1, at=(0, 0, 0, 2), after=out)
    with tkc.if_(done == x.r // 32 - 1):
        store(out, load(tkc.rt(tkc.f32, 16, 16), out, (0, 0, w, 0)) * 2.0, (0, 0, w, 0))


def test_atomic_add_finds_the_last_block():
    """Five blocks, each counted once; the last
    sees every block's adds. An element outside the counter is an error."""
    x = np.random.default_rng(0).standard_normal((5 * 32, 16)).astype(np.float32)
    out, count = np.zeros((32, 16), np.float32), np.zeros(3, np.int32)
    last_block_doubles.interpret(x, out, count)
    assert count.tolist() == [0, 0, 5]
    np.testing.assert_allclose(out, 2 * x.reshape(5, 32, 16).sum(0), rtol=1e-5, atol=1e-5)
    with pytest.raises(TkcError, match=r"tk.atomic_add: element \(0, 0, 0, 2\) is out of bounds"):
        last_block_doubles.interpret(x, out, np.zeros(2, np.int32))


WRITES = True   # last_block_by_hand's wait (the test sets it)


@tkc.kernel(warps=1, grid=lambda x, out, count: (x.r // 16, 1, 1))
def last_block_by_hand(x: tkc.gl(tkc.f32, 1, 1, "R", 16), out: tkc.gl(tkc.f32, 1, 1, 16, 16),
                       count: tkc.gl(tkc.i32, 1, 1, 1, 1)):
    """last_block_doubles with a hand-written TMA reduce-add (no pass orders
    it): the warp waits for its writes before counting itself."""
    from tkc import tma
    from tkc.ops import atomic_add, load, store
    s = tkc.st(tkc.f32, 16, 16)
    store(s, load(tkc.rt(tkc.f32, 16, 16), x, (0, 0, tkc.block_idx.x, 0)), (0, 0))
    tma.fence_async()
    tma.store_add_async(out, s, (0, 0, 0, 0))
    tma.store_async_wait(0, writes=WRITES)
    with tkc.if_(atomic_add(count, 1, at=(0, 0, 0, 0), after=out) == x.r // 16 - 1):
        store(out, load(tkc.rt(tkc.f32, 16, 16), out, (0, 0, 0, 0)) * 2.0, (0, 0, 0, 0))


@pytest.mark.parametrize("writes", [True, False])
def test_atomic_add_after_hand_written_tma_stores(monkeypatch, writes):
    """store_async_wait(writes=True) completes the reduce-add before the
    count; waiting only for its read is reported at the atomic."""
    monkeypatch.setitem(globals(), "WRITES", writes)
    x = np.random.default_rng(1).standard_normal((3 * 16, 16)).astype(np.float32)
    out, count = np.zeros((16, 16), np.float32), np.zeros(1, np.int32)
    if not writes:
        with pytest.raises(TkcError, match="may not have completed: that warp needs tk.tma_store_wait"):
            last_block_by_hand.interpret(x, out, count)
        return
    last_block_by_hand.interpret(x, out, count)
    np.testing.assert_allclose(out, 2 * x.reshape(3, 16, 16).sum(0), rtol=1e-5, atol=1e-5)


def test_atomic_add_after_outputs_of_two_types():
    x = np.random.default_rng(3).integers(-8, 8, (3 * 32, 16)).astype(np.float32)
    o1, o2 = np.zeros((32, 16), np.float32), np.zeros((3 * 32, 16), np.float32)
    count, y = np.zeros((1, 1), np.int32), np.zeros((32, 16), np.float32)
    atomic_after_two.interpret(x, o1, o2, count, y)
    assert count[0, 0] == 3
    np.testing.assert_array_equal(y, 2 * x.reshape(3, 32, 16).sum(0))
    assert "after = array<i64: 1, 2>" in atomic_after_two.tile_ir()
