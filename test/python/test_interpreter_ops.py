"""The interpreter's numbers, op family by op family, against numpy."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tkc.dialect.types import GL, RT, RV, ST, SV
from tkc.interpreter import run
from tkc.interpreter.testing import kernel_module
from tkc.interpreter.values import round_bf16

from helpers import ref_bf16, rng_of

RNG = None  # each test's: _inputs_by_test


@pytest.fixture(autouse=True)
def _inputs_by_test(request):
    """RNG seeded by the test (helpers.rng_of): the same inputs in any order."""
    global RNG
    RNG = rng_of(request)


C4 = "%c0, %c0, %c0, %c0"
IDX4 = "index, index, index, index"


def rand(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def load(dst, src, g, t, coords=C4):
    n = coords.count("%")
    return f'%{dst} = "tk.load"(%{src}{", " * bool(n)}{coords}) : (!{g}{", index" * n}) -> !{t}'


def store(dst, x, g, t, coords=C4):
    n = coords.count("%")
    return f'"tk.store"(%{dst}, %{x}{", " * bool(n)}{coords}) : (!{g}, !{t}{", index" * n}) -> ()'


def kernel(args, lines, aliases, **kw):
    return kernel_module(args, "\n".join(lines), aliases=aliases, **kw)


# ---- rounding

def test_round_bf16_matches_independent_reference():
    x = np.concatenate([rand(4096, lo=-1e3, hi=1e3), rand(1024, lo=-1e-38, hi=1e-38),
                        np.float32([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 3.4e38, -3.4e38,
                                    np.inf, -np.inf, 0.0, -0.0, 1e-45])])
    np.testing.assert_array_equal(round_bf16(x), ref_bf16(x))
    # ties go to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7
    assert round_bf16(np.float32(1 + 2**-8)) == 1.0
    assert round_bf16(np.float32(1 + 3 * 2**-8)) == 1 + 2**-6
    assert np.isnan(round_bf16(np.float32([np.nan]))).all()


def test_copy_rounds_to_bf16_and_f16():
    g, r32, rb, rh = GL("f32", 1, 1, 16, 32), RT("f32", 16, 32), RT("bf16", 16, 32), RT("f16", 16, 32)
    m = kernel([("a", "!g"), ("o", "!g"), ("p", "!g")], [
        load("x", "a", "g", "r"),
        '%b = "tk.copy"(%x) : (!r) -> !rb',
        '%h = "tk.copy"(%x) : (!r) -> !rh',
        '%b32 = "tk.copy"(%b) : (!rb) -> !r',
        store("o", "b32", "g", "r"),
        store("p", "h", "g", "rh"),
    ], {"g": g.text(), "r": r32.text(), "rb": rb.text(), "rh": rh.text()})
    a = rand(16, 32, lo=-300, hi=300)
    o, p = np.zeros_like(a), np.zeros_like(a)
    run(m, [a, o, p])
    np.testing.assert_array_equal(o, ref_bf16(a))
    np.testing.assert_array_equal(p, a.astype(np.float16).astype(np.float32))
    assert not np.array_equal(o, a)  # the data really needed rounding


# ---- elementwise

UNARY = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "abs": np.abs,
         "relu": lambda x: np.maximum(x, 0), "neg": np.negative}


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_unary(name, dtype):
    g, r = GL("f32", 1, 1, 32, 16), RT(dtype, 32, 16)
    m = kernel([("a", "!g"), ("o", "!g")], [
        load("x", "a", "g", "r"), f'%y = "tk.{name}"(%x) : (!r) -> !r', store("o", "y", "g", "r"),
    ], {"g": g.text(), "r": r.text()})
    a = rand(32, 16, lo=0.1 if name.startswith("log") else -3, hi=3)
    o = np.zeros_like(a)
    run(m, [a, o])
    rnd = ref_bf16 if dtype == "bf16" else np.float32
    np.testing.assert_allclose(o, rnd(UNARY[name](rnd(a)).astype(np.float32)), rtol=1e-6)


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "max": np.maximum, "min": np.minimum}


@pytest.mark.parametrize("name", BINARY)
def test_binary_tile_and_scalar(name):
    g, r = GL("f32", 1, 1, 16, 16), RT("f32", 16, 16)
    m = kernel([("a", "!g"), ("b", "!g"), ("s", "f32"), ("o", "!g"), ("p", "!g")], [
        load("x", "a", "g", "r"), load("y", "b", "g", "r"),
        f'%t = "tk.{name}"(%x, %y) : (!r, !r) -> !r',
        f'%u = "tk.{name}"(%x, %s) : (!r, f32) -> !r',
        store("o", "t", "g", "r"), store("p", "u", "g", "r"),
    ], {"g": g.text(), "r": r.text()})
    a, b = rand(16, 16), rand(16, 16, lo=0.5, hi=2)
    o, p = np.zeros_like(a), np.zeros_like(a)
    run(m, [a, b, 1.75, o, p])
    np.testing.assert_array_equal(o, BINARY[name](a, b))
    np.testing.assert_array_equal(p, BINARY[name](a, np.float32(1.75)))


@pytest.mark.parametrize("kind", ["zero", "ones", "neg_infty", "pos_infty", "fill"])
def test_initialisers(kind):
    g, r = GL("f32", 1, 1, 16, 32), RT("bf16", 16, 32)
    make = ('%x = "tk.fill"(%s) : (f32) -> !r' if kind == "fill"
            else f'%x = "tk.{kind}"() : () -> !r')
    m = kernel([("s", "f32"), ("o", "!g")], [make, store("o", "x", "g", "r")],
               {"g": g.text(), "r": r.text()})
    o = np.zeros((16, 32), np.float32)
    run(m, [1.00390625 + 2**-9, o])  # fill value needs bf16 rounding
    want = {"zero": 0.0, "ones": 1.0, "neg_infty": -np.inf, "pos_infty": np.inf,
            "fill": ref_bf16(np.float32(1.00390625 + 2**-9))}[kind]
    np.testing.assert_array_equal(o, np.full_like(o, want))


# ---- reductions and broadcasts

REDUCE = {"row_max": (np.max, 1, np.maximum), "row_sum": (np.sum, 1, np.add),
          "col_max": (np.max, 0, np.maximum), "col_sum": (np.sum, 0, np.add)}


@pytest.mark.parametrize("name", REDUCE)
@pytest.mark.parametrize("with_init", [False, True])
def test_reductions(name, with_init):
    f, axis, combine = REDUCE[name]
    n = 32 if axis == 1 else 48
    kind = "col" if axis == 1 else "row"
    g, gv, r, v = GL("f32", 1, 1, 32, 48), GL("f32", 1, 1, 1, n), RT("f32", 32, 48), RV("f32", n, kind)
    reduce = (f'%y = "tk.{name}"(%x, %i) : (!r, !v) -> !v' if with_init
              else f'%y = "tk.{name}"(%x) : (!r) -> !v')
    m = kernel([("a", "!g"), ("init", "!gv"), ("o", "!gv")], [
        load("x", "a", "g", "r"), load("i", "init", "gv", "v"), reduce, store("o", "y", "gv", "v"),
    ], {"g": g.text(), "gv": gv.text(), "r": r.text(), "v": v.text()})
    a, init = rand(32, 48), rand(n)
    o = np.zeros(n, np.float32)
    run(m, [a, init, o])
    want = f(a.astype(np.float64), axis=axis)
    if with_init:
        want = combine(init, want)
    np.testing.assert_allclose(o, want, rtol=1e-6, atol=1e-6)


BROADCAST = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


@pytest.mark.parametrize("op", BROADCAST)
@pytest.mark.parametrize("along", ["row", "col"])
def test_broadcasts(op, along):
    n, kind = (32, "col") if along == "row" else (48, "row")
    g, gv, r, v = GL("f32", 1, 1, 32, 48), GL("f32", 1, 1, 1, n), RT("f32", 32, 48), RV("f32", n, kind)
    m = kernel([("a", "!g"), ("vec", "!gv"), ("o", "!g")], [
        load("x", "a", "g", "r"), load("v", "vec", "gv", "v"),
        f'%y = "tk.{op}_{along}"(%x, %v) : (!r, !v) -> !r', store("o", "y", "g", "r"),
    ], {"g": g.text(), "gv": gv.text(), "r": r.text(), "v": v.text()})
    a, vec = rand(32, 48), rand(n, lo=0.5, hi=2)
    o = np.zeros_like(a)
    run(m, [a, vec, o])
    np.testing.assert_array_equal(o, BROADCAST[op](a, vec[:, None] if along == "row" else vec[None, :]))


# ---- mma

MMA = {  # name: (a is stored transposed, b is stored transposed, a layout, b layout)
    "mma_ab": (False, False, "row", "col"), "mma_abt": (False, True, "row", "row"),
    "mma_atb": (True, False, "col", "col"), "mma_atbt": (True, True, "col", "row"),
}


@pytest.mark.parametrize("name", MMA)
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_mma_variants(name, dtype):
    ta, tb, la, lb = MMA[name]
    M, N, K = 32, 48, 64
    ashape, bshape = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))
    ga, gb, gc = GL("f32", 1, 1, *ashape), GL("f32", 1, 1, *bshape), GL("f32", 1, 1, M, N)
    ra, rb, rc = RT(dtype, *ashape, la), RT(dtype, *bshape, lb), RT("f32", M, N)
    m = kernel([("a", "!ga"), ("b", "!gb"), ("c", "!gc"), ("d", "!gc")], [
        load("x", "a", "ga", "ra"), load("y", "b", "gb", "rb"), load("z", "c", "gc", "rc"),
        f'%w = "tk.{name}"(%x, %y, %z) : (!ra, !rb, !rc) -> !rc', store("d", "w", "gc", "rc"),
    ], {"ga": ga.text(), "gb": gb.text(), "gc": gc.text(),
        "ra": ra.text(), "rb": rb.text(), "rc": rc.text()})
    a, b, c = rand(*ashape), rand(*bshape), rand(M, N)
    d = np.zeros((M, N), np.float32)
    run(m, [a, b, c, d])
    rnd = ref_bf16 if dtype == "bf16" else (lambda x: x.astype(np.float16))
    A, B = rnd(a).astype(np.float64), rnd(b).astype(np.float64)
    want = (A.T if ta else A) @ (B.T if tb else B) + c
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-5)
    assert not np.allclose(d, (a.T if ta else a) @ (b.T if tb else b) + c, rtol=1e-5, atol=1e-5)


# ---- layouts

def test_swap_layout_and_transpose():
    g, gt = GL("f32", 1, 1, 32, 48), GL("f32", 1, 1, 48, 32)
    r, rt, rtc = RT("bf16", 32, 48), RT("bf16", 48, 32), RT("bf16", 48, 32, "col")
    m = kernel([("a", "!g"), ("o", "!gt")], [
        load("x", "a", "g", "r"), '%t = "tk.transpose"(%x) : (!r) -> !rt',
        '%s = "tk.swap_layout"(%t) : (!rt) -> !rtc', store("o", "s", "gt", "rtc"),
    ], {"g": g.text(), "gt": gt.text(), "r": r.text(), "rt": rt.text(), "rtc": rtc.text()})
    a = rand(32, 48)
    o = np.zeros((48, 32), np.float32)
    run(m, [a, o])
    np.testing.assert_array_equal(o, ref_bf16(a).T)


# ---- memory

def test_subtile_loads_and_stores_at_coordinates():
    g, go, s = GL("f32", 1, 1, 128, 128), GL("f32", 1, 1, 64, 64), ST("f32", 64, 64, "128b")
    r = RT("f32", 16, 32)
    m = kernel([("a", "!g"), ("o", "!go")], [
        '%s = "tk.alloc"() : () -> !s',
        '"tk.group_load"(%s, %a, %c0, %c0, %c1, %c1) {warps = 1 : i64} : (!s, !g, ' + IDX4 + ') -> ()',
        load("x", "s", "s", "r", "%c2, %c1"),
        store("o", "x", "go", "r", "%c0, %c0, %c3, %c0"),
    ], {"g": g.text(), "go": go.text(), "s": s.text(), "r": r.text()})
    a = rand(128, 128)
    o = np.zeros((64, 64), np.float32)
    run(m, [a, o])
    want = np.zeros_like(o)
    want[48:64, 0:32] = a[64:128, 64:128][32:48, 32:64]
    np.testing.assert_array_equal(o, want)


def test_vectors_through_shared_and_global():
    g, gv, sv, v = GL("f32", 1, 1, 4, 64), GL("f32", 1, 1, 1, 32), SV("f32", 32), RV("bf16", 32, "row")
    m = kernel([("a", "!g"), ("o", "!gv")], [
        '%s = "tk.alloc"() : () -> !sv',
        '"tk.group_load"(%s, %a, %c0, %c0, %c2, %c1) {warps = 1 : i64} : (!sv, !g, ' + IDX4 + ') -> ()',
        load("x", "s", "sv", "v", ""), store("o", "x", "gv", "v"),
    ], {"g": g.text(), "gv": gv.text(), "sv": sv.text(), "v": v.text()})
    a = rand(4, 64)
    o = np.zeros(32, np.float32)
    run(m, [a, o])
    np.testing.assert_array_equal(o, ref_bf16(a[2, 32:64]))


def test_unwritten_shared_memory_reads_nan_and_writes_round():
    g, s, sb, r = GL("f32", 1, 1, 16, 16), ST("f32", 16, 16), ST("bf16", 16, 16), RT("f32", 16, 16)
    m = kernel([("a", "!g"), ("o", "!g"), ("p", "!g")], [
        '%s = "tk.alloc"() : () -> !s', '%sb = "tk.alloc"() : () -> !sb',
        load("x", "s", "s", "r", "%c0, %c0"), store("o", "x", "g", "r"),
        load("y", "a", "g", "r"), store("sb", "y", "sb", "r", "%c0, %c0"),
        load("z", "sb", "sb", "r", "%c0, %c0"), store("p", "z", "g", "r"),
    ], {"g": g.text(), "s": s.text(), "sb": sb.text(), "r": r.text()})
    a = rand(16, 16)
    o, p = np.zeros_like(a), np.zeros_like(a)
    run(m, [a, o, p])
    assert np.isnan(o).all()
    np.testing.assert_array_equal(p, ref_bf16(a))


def test_half_precision_globals():
    """bf16 gl: a float32 array, rounded on write; f16 gl: a float16 array."""
    gb, gh, r = GL("bf16", 1, 1, 16, 16), GL("f16", 1, 1, 16, 16), RT("f32", 16, 16)
    m = kernel([("a", "!gh"), ("o", "!gb"), ("p", "!gh")], [
        load("x", "a", "gh", "r"), '%y = "tk.exp"(%x) : (!r) -> !r',
        store("o", "y", "gb", "r"), store("p", "y", "gh", "r"),
    ], {"gb": gb.text(), "gh": gh.text(), "r": r.text()})
    a = rand(16, 16).astype(np.float16)
    o, p = np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float16)
    run(m, [a, o, p])
    y = np.exp(a.astype(np.float32))
    np.testing.assert_array_equal(o, ref_bf16(y))
    np.testing.assert_array_equal(p, y.astype(np.float16))


# ---- control flow and scalars

def test_scf_for_with_iter_args_sums_column_tiles():
    g, go, r = GL("f32", 1, 1, 16, -1), GL("f32", 1, 1, 16, 16), RT("f32", 16, 16)
    m = kernel([("a", "!g"), ("o", "!go")], [
        '%n = "tk.dim"(%a) {axis = "c"} : (!g) -> index',
        '%c16 = arith.constant 16 : index', '%k = arith.divsi %n, %c16 : index',
        '%z = "tk.zero"() : () -> !r',
        '%acc = scf.for %i = %c0 to %k step %c1 iter_args(%s = %z) -> (!r) {',
        load("x", "a", "g", "r", "%c0, %c0, %c0, %i"),
        '  %t = "tk.add"(%s, %x) : (!r, !r) -> !r', '  scf.yield %t : !r', '}',
        store("o", "acc", "go", "r"),
    ], {"g": g.text(), "go": go.text(), "r": r.text()})
    a = rand(16, 80)
    o = np.zeros((16, 16), np.float32)
    run(m, [a, o])
    np.testing.assert_allclose(o, a.reshape(16, 5, 16).sum(axis=1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [3, -3])
def test_scf_if_with_results(n):
    g, r = GL("f32", 1, 1, 16, 16), RT("f32", 16, 16)
    m = kernel([("a", "!g"), ("n", "i32"), ("o", "!g")], [
        load("x", "a", "g", "r"), '%zero = arith.constant 0 : i32',
        '%pos = arith.cmpi sgt, %n, %zero : i32',
        '%y = scf.if %pos -> (!r) {', '  %e = "tk.exp"(%x) : (!r) -> !r', '  scf.yield %e : !r',
        '} else {', '  %e = "tk.neg"(%x) : (!r) -> !r', '  scf.yield %e : !r', '}',
        store("o", "y", "g", "r"),
    ], {"g": g.text(), "r": r.text()})
    a = rand(16, 16)
    o = np.zeros_like(a)
    run(m, [a, n, o])
    np.testing.assert_array_equal(o, np.exp(a) if n > 0 else -a)


def _trunc_div(a, b):
    return int(math.copysign(abs(a) // abs(b), a * b))


INT_OPS = {  # arith op: the semantics of LLVM's integer instructions, in Python
    "addi": lambda a, b: a + b, "subi": lambda a, b: a - b, "muli": lambda a, b: a * b,
    "divsi": _trunc_div, "remsi": lambda a, b: a - b * _trunc_div(a, b),
    "floordivsi": lambda a, b: math.floor(a / b), "ceildivsi": lambda a, b: math.ceil(a / b),
    "minsi": min, "maxsi": max,
    "divui": lambda a, b: ((a % 2**32) // (b % 2**32) + 2**31) % 2**32 - 2**31,
    "remui": lambda a, b: ((a % 2**32) % (b % 2**32) + 2**31) % 2**32 - 2**31,
}


@pytest.mark.parametrize("a,b", [(-7, 2), (7, -2), (13, 5), (-2**31, 3)])
def test_integer_arith(a, b):
    g, r = GL("f32", 1, 1, 16, 16 * len(INT_OPS)), RT("f32", 16, 16)
    lines = []
    for k, name in enumerate(INT_OPS):
        lines += [f"%v{k} = arith.{name} %a, %b : i32", f"%f{k} = arith.sitofp %v{k} : i32 to f32",
                  f'%t{k} = "tk.fill"(%f{k}) : (f32) -> !r', f"%j{k} = arith.constant {k} : index",
                  store("o", f"t{k}", "g", "r", f"%c0, %c0, %c0, %j{k}")]
    m = kernel([("a", "i32"), ("b", "i32"), ("o", "!g")], lines, {"g": g.text(), "r": r.text()})
    o = np.zeros((16, 16 * len(INT_OPS)), np.float32)
    run(m, [a, b, o])
    wrap = lambda v: (v + 2**31) % 2**32 - 2**31  # noqa: E731
    want = [np.float32(wrap(f(a, b))) for f in INT_OPS.values()]
    np.testing.assert_array_equal(o.reshape(16, -1, 16)[0, :, 0], want)


def test_float_scalars_cmpf_select_and_casts():
    g, r = GL("f32", 1, 1, 16, 16), RT("f32", 16, 16)
    m = kernel([("s", "f32"), ("n", "i32"), ("o", "!g")], [
        "%two = arith.constant 2.0 : f32", "%x = arith.mulf %s, %two : f32",
        "%nf = arith.sitofp %n : i32 to f32", "%y = arith.divf %x, %nf : f32",
        "%z = arith.negf %y : f32", "%lt = arith.cmpf olt, %z, %x : f32",
        "%w = arith.select %lt, %z, %x : f32",
        "%i = arith.index_cast %n : i32 to index", "%ii = arith.addi %i, %c1 : index",
        "%i32 = arith.index_cast %ii : index to i32", "%if = arith.sitofp %i32 : i32 to f32",
        "%h = arith.truncf %w : f32 to bf16", "%hf = arith.extf %h : bf16 to f32",
        "%sum = arith.addf %hf, %if : f32",
        '%t = "tk.fill"(%sum) : (f32) -> !r', store("o", "t", "g", "r"),
    ], {"g": g.text(), "r": r.text()})
    o = np.zeros((16, 16), np.float32)
    run(m, [1.3, 3, o])
    w = -(np.float32(1.3) * 2 / 3)
    np.testing.assert_array_equal(o, np.full_like(o, ref_bf16(np.float32(w)) + 4))


# ---- math functions (docs/tile-ir.md, "Math"): the interpreter is the float64 reference

def test_math_functions_against_float64():
    import tkc
    from tkc import f32, gl, rt
    from tkc.ops import erf, fma, gelu, gelu_tanh, load, rcp, rsqrt, sigmoid, silu, sqrt, store, tanh

    fns = (sqrt, rsqrt, rcp, sigmoid, silu, tanh, erf, gelu, gelu_tanh)

    @tkc.kernel(warps=1)
    def maths(x: gl(f32, 1, 1, 16, 32), o: gl(f32, 1, 11, 16, 32)):
        a = load(rt(f32, 16, 32), x, (0, 0, 0, 0))
        for i, fn in enumerate(fns):
            store(o, fn(a), (0, i, 0, 0))
        store(o, fma(a, a, 1.0), (0, 9, 0, 0))
        store(o, tkc.ops.div(a, a * 3.0, ieee=True), (0, 10, 0, 0))

    x = np.linspace(0.05, 4, 16 * 32, dtype=np.float32).reshape(16, 32)
    o = np.full((11, 16, 32), np.nan, np.float32)
    maths.interpret(x, o)
    d = x.astype(np.float64)
    erf64 = np.vectorize(__import__("math").erf)
    want = [np.sqrt(d), 1 / np.sqrt(d), 1 / d, 1 / (1 + np.exp(-d)), d / (1 + np.exp(-d)),
            np.tanh(d), erf64(d), 0.5 * d * (1 + erf64(d / np.sqrt(2))),
            0.5 * d * (1 + np.tanh(np.sqrt(2 / np.pi) * (d + 0.044715 * d ** 3))),
            d * d + 1, np.full_like(d, 1 / 3)]
    for i, w in enumerate(want):
        np.testing.assert_allclose(o[i], w.astype(np.float32), rtol=2e-7, err_msg=str(i))


# ---- whole-vector reductions and math on scalars

@pytest.mark.parametrize("kind", ["col", "row", "flat"])
@pytest.mark.parametrize("op,ref", [("vec_sum", np.sum), ("vec_max", np.max), ("vec_min", np.min)])
def test_vector_reductions(kind, op, ref):
    g, go, v, r = GL("f32", 1, 1, 1, 64), GL("f32", 1, 1, 16, 16), RV("f32", 64, kind), RT("f32", 16, 16)
    m = kernel([("a", "!g"), ("o", "!go")], [
        load("x", "a", "g", "v"),
        f'%s = "tk.{op}"(%x) : (!v) -> f32',
        '%t = "tk.fill"(%s) : (f32) -> !r', store("o", "t", "go", "r"),
    ], {"g": g.text(), "go": go.text(), "v": v.text(), "r": r.text()})
    a, o = rand(1, 64), np.zeros((16, 16), np.float32)
    run(m, [a, o])
    np.testing.assert_allclose(o, np.full_like(o, ref(a)), rtol=1e-6)


def test_math_on_scalars_against_float64():
    g, r = GL("f32", 1, 1, 16, 16), RT("f32", 16, 16)
    m = kernel([("s", "f32"), ("o", "!g")], [
        '%q = "tk.rsqrt"(%s) : (f32) -> f32', '%e = "tk.erf"(%q) : (f32) -> f32',
        '%f = "tk.fma"(%e, %s, %q) : (f32, f32, f32) -> f32',
        '%t = "tk.fill"(%f) : (f32) -> !r', store("o", "t", "g", "r"),
    ], {"g": g.text(), "r": r.text()})
    o = np.zeros((16, 16), np.float32)
    run(m, [np.float32(2.5), o])
    q = np.float32(1 / math.sqrt(np.float64(np.float32(2.5))))
    e = np.float32(math.erf(np.float64(q)))
    want = np.float32(np.float64(e) * np.float64(np.float32(2.5)) + np.float64(q))
    np.testing.assert_array_equal(o, np.full_like(o, want))


def test_sv_pieces_at_coordinates():
    """An rv of length L is piece i of an sv of length n*L: sv[i*L:(i+1)*L]."""
    g, gv, sv, v = GL("f32", 1, 1, 1, 128), GL("f32", 1, 1, 4, 32), SV("f32", 128), RV("f32", 32, "flat")
    m = kernel([("a", "!g"), ("o", "!gv")], [
        '%s = "tk.alloc"() : () -> !sv',
        '"tk.group_load"(%s, %a, %c0, %c0, %c0, %c0) {warps = 1 : i64} : (!sv, !g, ' + IDX4 + ') -> ()',
        '%x = "tk.load"(%s, %c2) : (!sv, index) -> !v',
        '"tk.store"(%s, %x, %c3) : (!sv, !v, index) -> ()',
        '%y = "tk.load"(%s, %c3) : (!sv, index) -> !v',
        store("o", "y", "gv", "v", "%c0, %c0, %c1, %c0"),
    ], {"g": g.text(), "gv": gv.text(), "sv": sv.text(), "v": v.text()})
    a, o = rand(1, 128), np.zeros((4, 32), np.float32)
    run(m, [a, o])
    np.testing.assert_array_equal(o[1], a[0, 64:96])
