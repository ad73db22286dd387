"""Scalars in kernels (issue 41): comparisons of f32 and index values, and
scalars carried through tkc.range loops and tkc.if_ branches; interpreter
results against numpy, and the mistakes as located errors."""
import builtins
import math

import numpy as np
import pytest

import tkc
from tkc import f32, gl, i32, rt
from tkc.ops import ge, load, lt, max, min, ne, store, where
from helpers import marker_line, refused_at  # noqa: E402

pytest.importorskip("mlir")

NAN = float("nan")


@tkc.kernel(warps=1, grid=lambda x, n, y: (1, 1))
def compare(x: gl(f32, 1, 1, 1, 16), n: gl(i32, 1, 1, 1, 16), y: gl(f32, 1, 1, 1, 32)):
    """Every comparison of f32 and index values (mixed ones compare as f32),
    each written as 1.0 / 0.0 through where and through tkc.if_."""
    a, b = load(f32, x, at=(0, 0, 0, 0), fill=0.0), load(f32, x, at=(0, 0, 0, 1), fill=0.0)
    i, j = load(i32, n, at=(0, 0, 0, 0), fill=0), load(i32, n, at=(0, 0, 0, 1), fill=0)
    conds = [a < b, a <= b, a > b, a >= b, a == b, a != b,
             i < j, i <= j, i > j, i >= j, i == j, i != j,
             i < a, a <= i, i == 2.5, lt(a, b), ge(i, j), ne(a, 1.0)]
    for k, c in enumerate(conds):
        store(y, where(c, 1.0, 0.0), at=(0, 0, 0, k), clip=True)
        with tkc.if_(c):
            store(y, tkc.f32(k), at=(0, 0, 0, 31), clip=True)   # the last true one stays
    store(y, max(a, b), at=(0, 0, 0, 20), clip=True)
    store(y, min(a, i, 0.5), at=(0, 0, 0, 21), clip=True)
    store(y, max(i, j, 1).to(f32), at=(0, 0, 0, 22), clip=True)


def _expected_comparisons(a, b, i, j):
    return [a < b, a <= b, a > b, a >= b, a == b, a != b,
            i < j, i <= j, i > j, i >= j, i == j, i != j,
            i < a, a <= i, i == 2.5, a < b, i >= j, a != 1.0]


@pytest.mark.parametrize("a,b,i,j", [(1.5, 2.0, 2, 3), (2.0, 1.5, 3, 2), (1.0, 1.0, 1, 1),
                                     (NAN, 1.0, -4, 7), (2.5, NAN, 2, 2)])
def test_comparisons(a, b, i, j):
    x = np.zeros((1, 16), np.float32)
    x[0, :2] = a, b
    n = np.zeros((1, 16), np.int32)
    n[0, :2] = i, j
    y = np.full((1, 32), -1.0, np.float32)
    compare.interpret(x, n, y)
    a, b = np.float32(a), np.float32(b)
    want = _expected_comparisons(a, b, i, j)
    np.testing.assert_array_equal(y[0, :len(want)], np.array(want, np.float32))
    assert y[0, 31] == builtins.max([k for k, t in enumerate(want) if t], default=-1)
    np.testing.assert_array_equal(y[0, 20:23], [np.fmax(a, b), np.fmin(np.fmin(a, i), 0.5), builtins.max(i, j, 1)])


def test_comparisons_reach_ptx():
    """f32 compares are setp.f32, index compares setp on integers (LLVM
    narrows them to the i32 loaded), mixed ones convert the index (cvt.rn.f32)."""
    import re
    from tkc.compiler import compile_to
    ptx = compile_to(compare.trace(), "ptx")
    assert re.search(r"setp\.\w+\.f32", ptx) and re.search(r"setp\.\w+\.s32", ptx), ptx
    assert re.search(r"cvt\.rn\.f32\.s32", ptx) and "max.f32" in ptx and "min.f32" in ptx, ptx


@tkc.kernel(warps=1, grid=lambda x, y, n: (1, 1))
def running(x: gl(f32, 1, 1, 1, "N"), y: gl(f32, 1, 1, 1, 16), n: i32):
    """Scalars carried through a loop over x's first n elements: a running
    max, its index, a sum, a count through a tkc.if_, a flag, and two names
    holding one value at the start (each keeps its own)."""
    m, best, c = tkc.f32(-math.inf), tkc.i32(-1), tkc.i32(0)
    s = load(f32, x, at=(0, 0, 0, 0), fill=0.0)
    first = s                            # not changed in the loop: keeps x[0]
    seen = x.c < 0                       # a Bool, false
    for i in tkc.range(n):
        v = load(f32, x, at=(0, 0, 0, i), fill=0.0)
        best = where(v > m, i, best)
        m = max(m, v)
        with tkc.if_(v > 0.5):
            c = c + 1
        s = s + first
        seen = seen | (v > 0.9)
    for k, value in enumerate((m, best.to(f32), c.to(f32), s, first, where(seen, 1.0, 0.0))):
        store(y, value, at=(0, 0, 0, k), clip=True)


@pytest.mark.parametrize("n", [0, 1, 37])
def test_scalars_carried_through_a_loop(n):
    """n = 0: the loop runs no iteration, the start values come out."""
    x = np.random.default_rng(n).random((1, 40)).astype(np.float32)
    y = np.zeros((1, 16), np.float32)
    running.interpret(x, y, n)
    p = x[:, :n]
    want = [p.max(), p.argmax(), (p > 0.5).sum(), x[0, 0] * (n + 1), x[0, 0], (p > 0.9).any()] if n \
        else [-np.inf, -1, 0, x[0, 0], x[0, 0], 0]
    np.testing.assert_allclose(y[0, :6], np.array(want, np.float32), rtol=1e-5)


def test_carried_scalars_are_iter_args():
    """The loop carries exactly the scalars it changes (first is not)."""
    text = running.tile_ir()
    assert "-> (f32, index, index, f32, i1) {" in text, text


@tkc.kernel(warps=1, grid=lambda x, y: (1, 1))
def branches(x: gl(f32, 1, 1, 1, 16), y: gl(f32, 1, 1, 1, 16)):
    """Scalars carried out of ifs: with and without an else, read right after
    (the if is finished then), a number assigned in a branch, nested ifs."""
    a, b = load(f32, x, at=(0, 0, 0, 0), fill=0.0), load(f32, x, at=(0, 0, 0, 1), fill=0.0)
    hi, lo, n = tkc.f32(0.0), tkc.f32(0.0), tkc.i32(0)
    with tkc.if_(a > b):
        hi, lo = a, b
    with tkc.else_():
        hi, lo = b, a
    top = tkc.f32(-1.0)
    with tkc.if_(a > 0.5):
        top = 7.0                        # a number, materialised in the branch
        with tkc.if_(b > 0.5):
            n = n + 2
    store(y, top, at=(0, 0, 0, 2), clip=True)   # read right after: the if's result
    with tkc.if_(b > a):
        n = n + a.to(i32)
    for k, value in enumerate((hi, lo)):
        store(y, value, at=(0, 0, 0, k), clip=True)
    store(y, n.to(f32), at=(0, 0, 0, 3), clip=True)


@pytest.mark.parametrize("a,b", [(0.75, 3.25), (4.0, 0.25), (0.25, 0.125), (0.9, 0.6)])
def test_scalars_carried_out_of_ifs(a, b):
    x = np.zeros((1, 16), np.float32)
    x[0, :2] = a, b
    y = np.zeros((1, 16), np.float32)
    branches.interpret(x, y)
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
