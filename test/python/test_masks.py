"""Masks: tk.iota and tk.where, lowered and simulated lane by lane over every
layout and vector kind, interpreted, and written from the frontend
(comparisons, & | ~, where)."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import f32, gl, rt, rv
from tkc.diagnostics import TkcError
from tkc.dialect import ops
from tkc.dialect.types import RT, RV
from tkc.ops import ge, iota, load, ne, store, where

from lanesim import bf16, run_kernel

pytest.importorskip("mlir")

VIEWS = [RT("f32", 32, 48, "row"), RT("f32", 32, 48, "col"), RT("bf16", 32, 48, "wide"),
         RV("f32", 64, "col"), RV("f32", 64, "row"), RV("f32", 256, "flat"), RV("bf16", 96, "flat")]
CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
       "eq": np.equal, "ne": np.not_equal}


def _axes(v):
    return (0, 1) if isinstance(v, RT) else (0,)


@pytest.mark.usefixtures("lane_major_io")
@pytest.mark.parametrize("v", VIEWS, ids=lambda v: v.text())
def test_iota_gives_each_element_its_index(v):
    for axis in _axes(v):
        out, = run_kernel([], [v], lambda: [ops.iota(v.mlir(), axis)], [])
        np.testing.assert_array_equal(out, np.indices(v.shape)[axis].astype(np.float32))


@pytest.mark.usefixtures("lane_major_io")
@pytest.mark.parametrize("cmp", list(CMP))
@pytest.mark.parametrize("v", [VIEWS[0], VIEWS[2], VIEWS[5]], ids=lambda v: v.text())
def test_where_tiles_and_scalars(v, cmp):
    rng = np.random.default_rng(0)
    a = np.round(rng.standard_normal(v.shape) * 2).astype(np.float32)  # ties for eq/le/ge
    x = bf16(rng.standard_normal(v.shape)) if v.dtype == "bf16" else rng.standard_normal(v.shape).astype(np.float32)
    out, = run_kernel([v, v], [v], lambda ta, tx, s0, s1: [ops.where(cmp, ta, s0, tx, s1, v.mlir())],
                      [a, x], scalars=(0.0, -7.0))
    np.testing.assert_array_equal(out, np.where(CMP[cmp](a, 0), x, np.float32(-7)))


def test_where_lowers_to_setp_and_selp():
    from lanesim import build, to_ptx
    v = RT("f32", 16, 16, "row")
    ptx = to_ptx(build([v, v], [v], lambda a, b: [ops.where("lt", a, b, a, b, v.mlir())]))
    assert ptx.count("setp.lt.f32") == 8 and ptx.count("selp.f32") == 8, ptx


# ---------------------------------------------------------------- interpreter and frontend

@tkc.kernel(warps=1, grid=lambda x, y: (2, 1))
def _causal(x: gl(f32, 1, 1, 32, 32), y: gl(f32, 1, 1, 32, 32)):
    """A causal mask with a block offset (index * 16 converts to f32), and-ed
    with a value test, or-ed, and negated."""
    i = tkc.block_idx.x
    t = load(rt(f32, 16, 32), x, (0, 0, i, 0))
    r, c = iota(rt(f32, 16, 32), 0) + i * 16, iota(rt(f32, 16, 32), 1)
    keep = ((r >= c) & (t > 0.0)) | ~ne(c, 31.0)
    store(y, where(keep, t, -1.0), (0, 0, i, 0))


def _causal_ref(x):
    r, c = np.indices(x.shape)
    return np.where(((r >= c) & (x > 0)) | (c == 31), x, np.float32(-1))


def test_frontend_masks_interpreted_and_simulated():
    from lanesim import run_traced
    x = np.random.default_rng(1).standard_normal((32, 32)).astype(np.float32)
    for run in (lambda y: _causal.interpret(x, y), lambda y: run_traced(_causal, [x, y], blocks=2)):
        y = np.full_like(x, np.nan)
        run(y)
        np.testing.assert_array_equal(y, _causal_ref(x))


@tkc.kernel(warps=1, grid=lambda x, y: (1, 1))
def _two_scalars(x: gl(f32, 1, 1, 16, 16), y: gl(f32, 1, 1, 16, 16)):
    store(y, where(ge(load(rt(f32, 16, 16), x, (0, 0, 0, 0)), 0.5), 1.0, 0.0), (0, 0, 0, 0))


def test_where_of_two_scalars_takes_the_compared_shape():
    x = np.linspace(0, 1, 256, dtype=np.float32).reshape(16, 16)
    y = np.full_like(x, np.nan)
    _two_scalars.interpret(x, y)
    np.testing.assert_array_equal(y, (x >= 0.5).astype(np.float32))


@tkc.kernel(warps=1, grid=lambda x, y: (1, 1))
def _equality(x: gl(f32, 1, 1, 16, 16), y: gl(f32, 1, 1, 16, 16)):
    """== and != on tiles: with a number, with another tile (issue 41: `t == 1.0`
    once evaluated to a Python False and where took its else branch)."""
    t = load(rt(f32, 16, 16), x, (0, 0, 0, 0))
    c = iota(rt(f32, 16, 16), 1)
    store(y, where((t == 1.0) | ((t != 0.0) & (t == c)), 5.0, -5.0), (0, 0, 0, 0))


def test_equality_of_tiles_gives_masks():
    x = np.zeros((16, 16), np.float32)
    x[0, :4] = 1.0                      # == 1.0
    x[1, 3] = 3.0                       # == its column, and != 0
    x[2, 0] = 0.0                       # == its column but == 0
    y = np.full_like(x, np.nan)
    _equality.interpret(x, y)
    c = np.indices(x.shape)[1]
    np.testing.assert_array_equal(y, np.where((x == 1) | ((x != 0) & (x == c)), 5.0, -5.0))
    assert (y == 5).sum() == 5


def _trace_error(body) -> str:
    k = tkc.kernel(body)
    with pytest.raises(TkcError) as info:
        k.trace()
    return info.value.message


def test_mask_mistakes_are_located_errors():
    def truth(x: gl(f32, 1, 1, 16, 16)):
        t = load(rt(f32, 16, 16), x, (0, 0, 0, 0))
        with tkc.if_(t < 0.0):
            pass
    assert "use where(mask, x, y)" in _trace_error(truth)

    def not_a_mask(x: gl(f32, 1, 1, 16, 16)):
        t = load(rt(f32, 16, 16), x, (0, 0, 0, 0))
        where(t, t, 0.0)
    assert "first argument is a mask" in _trace_error(not_a_mask)

    def shapes(x: gl(f32, 1, 1, 16, 32)):
        a = load(rt(f32, 16, 32), x, (0, 0, 0, 0))
        where(a < 0.0, load(rt(f32, 16, 16), x, (0, 0, 0, 0)), 0.0)
    assert "does not match" in _trace_error(shapes)

    def axis(x: gl(f32, 1, 1, 1, 64)):
        iota(rv(f32, 64), 1)
    assert "axis must be 0" in _trace_error(axis)


@tkc.kernel(warps=1, grid=lambda x, y: (1, 1))
def _scalar_compare(x: gl(f32, 1, 1, 1, 16), y: gl(f32, 1, 1, 16, 16)):
    """f32 scalars compared (issue 41: 'AttributeError: ogt', this MLIR spelling
    the predicates OGT ...): every predicate, each picking a row to fill."""
    a, b = load(f32, x, at=(0, 0, 0, 0), fill=0.0), load(f32, x, at=(0, 0, 0, 1), fill=0.0)
    for row, cond in enumerate((a > b, a >= b, a < b, a <= b, a == b, a != b)):
        with tkc.if_(cond):
            store(y, tkc.ops.fill(rt(f32, 16, 16), float(row + 1)), (0, 0, 0, 0))


@pytest.mark.parametrize("a,b", [(2.0, 1.0), (1.0, 2.0), (1.5, 1.5)])
def test_scalar_comparisons(a, b):
    x = np.zeros((1, 16), np.float32)
    x[0, :2] = a, b
    y = np.zeros((16, 16), np.float32)
    _scalar_compare.interpret(x, y)
    truth = [a > b, a >= b, a < b, a <= b, a == b, a != b]
    assert y[0, 0] == max(i + 1 for i, t in enumerate(truth) if t)   # the last true predicate wrote


def test_scalar_comparisons_reach_ptx():
    """Six f32 compares in the PTX (LLVM may branch on a negation: a > b as
    setp.leu and a branch around)."""
    import re
    from tkc.compiler import compile_to
    ptx = compile_to(_scalar_compare.trace(), "ptx")
    assert len(set(re.findall(r"setp\.\w+\.f32", ptx))) == 6, ptx
