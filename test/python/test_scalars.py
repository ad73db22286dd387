"""Scalars in kernels (issue 41): comparisons of f32 and index values, and
scalars carried through tkc.range loops and tkc.if_ branches; interpreter
results against numpy, and the mistakes as located errors."""
import builtins
import math

import numpy as np
import pytest

import tkc
from tkc import f32, gl, rt
from tkc.ops import load, lt, max, store
from helpers import marker_line, refused_at  # noqa: E402
from scalar_kernels import (expected_comparisons, expected_sv_element, scalar_branches, scalar_compare,
                            scalar_running, sv_element)

pytest.importorskip("mlir")

NAN = float("nan")


@pytest.mark.parametrize("a,b,i,j", [(1.5, 2.0, 2, 3), (2.0, 1.5, 3, 2), (1.0, 1.0, 1, 1),
                                     (NAN, 1.0, -4, 7), (2.5, NAN, 2, 2)])
def test_comparisons(a, b, i, j):
    x = np.zeros((1, 16), np.float32)
    x[0, :2] = a, b
    n = np.zeros((1, 16), np.int32)
    n[0, :2] = i, j
    y = np.full((1, 32), -1.0, np.float32)
    scalar_compare.interpret(x, n, y)
    a, b = np.float32(a), np.float32(b)
    want = expected_comparisons(a, b, i, j)
    np.testing.assert_array_equal(y[0, :len(want)], np.array(want, np.float32))
    assert y[0, 31] == builtins.max([k for k, t in enumerate(want) if t], default=-1)
    np.testing.assert_array_equal(y[0, 20:23], [np.fmax(a, b), np.fmin(np.fmin(a, i), 0.5), builtins.max(i, j, 1)])


def test_comparisons_reach_ptx():
    """f32 compares are setp.f32, index compares setp on integers (LLVM
    narrows them to the i32 loaded), mixed ones convert the index (cvt.rn.f32)."""
    import re
    from tkc.compiler import compile_to
    ptx = compile_to(scalar_compare.trace(), "ptx")
    assert re.search(r"setp\.\w+\.f32", ptx) and re.search(r"setp\.\w+\.s32", ptx), ptx
    assert re.search(r"cvt\.rn\.f32\.s32", ptx) and "max.f32" in ptx and "min.f32" in ptx, ptx


@pytest.mark.parametrize("n", [0, 1, 37])
def test_scalars_carried_through_a_loop(n):
    """n = 0: the loop runs no iteration, the start values come out."""
    x = np.random.default_rng(n).random((1, 40)).astype(np.float32)
    y = np.zeros((1, 16), np.float32)
    scalar_running.interpret(x, y, n)
    p = x[:, :n]
    want = [p.max(), p.argmax(), (p > 0.5).sum(), x[0, 0] * (n + 1), x[0, 0], (p > 0.9).any()] if n \
        else [-np.inf, -1, 0, x[0, 0], x[0, 0], 0]
    np.testing.assert_allclose(y[0, :6], np.array(want, np.float32), rtol=1e-5)


def test_carried_scalars_are_iter_args():
    """The loop carries exactly the scalars it changes (first is not)."""
    text = scalar_running.tile_ir()
    assert "-> (f32, index, index, f32, i1) {" in text, text


@pytest.mark.parametrize("a,b", [(0.75, 3.25), (4.0, 0.25), (0.25, 0.125), (0.9, 0.6)])
def test_scalars_carried_out_of_ifs(a, b):
    x = np.zeros((1, 16), np.float32)
    x[0, :2] = a, b
    y = np.zeros((1, 16), np.float32)
    scalar_branches.interpret(x, y)
    a, b = np.float32(a), np.float32(b)
    n = (2 if a > 0.5 and b > 0.5 else 0) + (int(a) if b > a else 0)
    np.testing.assert_array_equal(y[0, :4], [builtins.max(a, b), builtins.min(a, b), 7.0 if a > 0.5 else -1.0, n])


# ---------------------------------------------------------------- mistakes

def _line_of(marker: str) -> int:
    return marker_line(__file__, marker)


def _fails(body, marker: str, *words):
    refused_at(tkc.kernel(body).trace, __file__, marker, *words)


X = gl(f32, 1, 1, 1, 16)


def test_a_comparison_has_no_python_truth_value():
    def k(x: X):
        a = load(f32, x, at=(0, 0, 0, 0), fill=0.0)
        if a < 1.0:  # @truth
            store(x, a, at=(0, 0, 0, 1), clip=True)
    _fails(k, "truth", "no Python truth value", "tkc.if_")


def test_a_python_number_is_not_carried():
    """m starts as a Python float: the loop's max is not carried, and using it
    after the loop says how to start it."""
    def k(x: X):
        m = -math.inf
        for i in tkc.range(16):
            m = max(m, load(f32, x, at=(0, 0, 0, i), fill=0.0))
        store(x, m, at=(0, 0, 0, 0), clip=True)  # @number
    _fails(k, "number", "defined inside the tkc.range loop", "m = tkc.f32(0.0)")


def test_a_python_number_counted_in_a_region_is_refused():
    """`c = 0; c = c + 1` in a loop body counts at trace time (the body is
    traced once: c would be 1); so does a number set in a branch."""
    def counter(x: X):
        c = 0
        for i in tkc.range(16):  # @counter
            c = c + 1
        store(x, tkc.f32(c), at=(0, 0, 0, 0), clip=True)
    _fails(counter, "counter", "c is a trace-time value (0 before the tkc.range loop",
           "1 at the end of its body", "c = tkc.i32(0)")

    def branch(x: gl(f32, 1, 1, 1, None)):
        n = 2.0
        with tkc.if_(x.c > 3):  # @branch
            n = 0.5
    _fails(branch, "branch", "n is a trace-time value", "whether or not its condition holds",
           "n = tkc.f32(2.0)")


def test_a_name_reused_in_a_loop_is_not_carried():
    """A scalar name the body rebinds to something else without reading it
    is left alone (no iter_arg); a tile name reused for a scalar likewise."""
    @tkc.kernel(warps=1, grid=lambda x, y: (1, 1))
    def k(x: gl(f32, 1, 1, 1, 16), y: gl(f32, 1, 1, 1, 16)):
        t = tkc.i32(3)
        for i in tkc.range(4):
            t = load(rt(f32, 16, 16), x, (0, 0, 0, 0), fill=0.0)
            store(y, load(f32, x, at=(0, 0, 0, i), fill=0.0) * 2.0, at=(0, 0, 0, i), clip=True)
    assert "iter_args" not in k.tile_ir()
    x, y = np.arange(16, dtype=np.float32).reshape(1, 16), np.zeros((1, 16), np.float32)
    k.interpret(x, y)
    np.testing.assert_array_equal(y[0, :4], 2 * x[0, :4])


def test_a_carried_scalar_keeps_its_type():
    def k(x: X):
        c = tkc.i32(0)
        for i in tkc.range(16):  # @type
            c = c + load(f32, x, at=(0, 0, 0, i), fill=0.0)
    _fails(k, "type", "c holds an index value before the tkc.range loop", "keeps its type")

    def flag(x: gl(f32, 1, 1, 1, None)):
        f = x.c < 3
        with tkc.if_(f):  # @flag
            f = load(f32, x, at=(0, 0, 0, 0), fill=0.0)
    _fails(flag, "flag", "f holds a traced condition before the tkc.if_", "an f32 value")


def test_scalar_constructor_and_operand_mistakes():
    def bf(x: X):
        tkc.bf16(1.0)  # @bf16
    _fails(bf, "bf16", "a scalar is tkc.f32 or tkc.i32")

    def frac(x: X):
        tkc.i32(1.5)  # @frac
    _fails(frac, "frac", "tkc.i32(x) takes an int")

    def cmp(x: X):
        lt(load(f32, x, at=(0, 0, 0, 0), fill=0.0), "1")  # @lt
    _fails(cmp, "lt", "lt compares tiles, a tile and a scalar, or two scalars")

    def biggest(x: X):
        max(load(f32, x, at=(0, 0, 0, 0), fill=0.0), None)  # @max
    _fails(biggest, "max", "max of scalars takes index or f32 values")


# ---------------------------------------------------------------- one element of an sv

def test_an_element_of_an_sv_is_read_by_every_lane():
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    y = np.zeros((1, 1, 1, 128), np.float32)
    sv_element.interpret(x.reshape(1, 1, 1, 64), y)
    assert np.array_equal(y.reshape(-1), expected_sv_element(x))


def test_an_element_of_an_sv_mistakes():
    from tkc import sv

    def fill(x: X):
        s = sv(f32, 16)
        store(x, load(f32, s, at=(0,), fill=0.0), at=(0, 0, 0, 0), clip=True)  # @svfill
    _fails(fill, "svfill", "reads one element of an f32 sv", "no fill")

    def two(x: X):
        s = sv(f32, 16)
        store(x, load(f32, s, at=(0, 1)), at=(0, 0, 0, 0), clip=True)  # @svtwo
    _fails(two, "svtwo", "a sv takes 1 coordinates (i)")


def test_an_element_past_an_sv_is_refused_by_the_interpreter():
    from tkc import sv

    @tkc.kernel(warps=1, grid=lambda x: (1,))
    def past(x: X):
        s = sv(f32, 16)
        store(x, load(f32, s, at=(x.c,)), at=(0, 0, 0, 0), clip=True)
    from tkc.diagnostics import TkcError
    with pytest.raises(TkcError, match="element 16 is out of bounds of"):
        past.interpret(np.zeros((1, 1, 1, 16), np.float32))
