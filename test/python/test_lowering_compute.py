"""Register-tile rules run on 32 simulated lanes (lanesim.simulate)
against numpy, plus PTX checks that the fast hardware paths are used."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from tkc.dialect import ops
from tkc.dialect.types import RT, RV
from tkc.lowering import lower_module

from lanesim import bf16, build, ptxas_resources, round_to, run_kernel, to_ptx
from helpers import rng_of

pytestmark = pytest.mark.usefixtures("lane_major_io")  # from conftest.py

RNG = None  # each test's: _inputs_by_test


@pytest.fixture(autouse=True)
def _inputs_by_test(request):
    """RNG seeded by the test (helpers.rng_of): the same inputs in any order."""
    global RNG
    RNG = rng_of(request)


def rand(shape, dtype="f32", scale=1.0):
    return round_to(RNG.standard_normal(shape).astype(np.float32) * scale, dtype)


# ---------------------------------------------------------------- elementwise

_erf = np.vectorize(math.erf)

UNARY_REF = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2,
    "abs": np.abs, "relu": lambda x: np.maximum(x, 0), "neg": np.negative,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "rcp": lambda x: 1 / x,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "silu": lambda x: x / (1 + np.exp(-x)),
    "tanh": np.tanh, "erf": _erf, "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
}
POSITIVE = ("log", "log2", "sqrt", "rsqrt")
# Beyond f32 rounding, the lowering's own algorithm (the instructions' error
# aside: lanesim computes them exactly): erf's polynomial is 1.5e-7 absolute.
ATOL = {"erf": 3e-7, "gelu": 1e-6, "gelu_tanh": 1e-6, "silu": 1e-7}


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("name", list(UNARY_REF))
def test_unary(name, dtype):
    v = RT(dtype, 16, 32, "row")
    x = rand(v.shape, dtype, scale=2.0)
    if name in POSITIVE:
        x = np.abs(x) + round_to(0.5, dtype)
    out, = run_kernel([v], [v], lambda t: [ops.unary(name, t)], [x])
    want = round_to(UNARY_REF[name](x.astype(np.float64)), dtype)
    np.testing.assert_allclose(out, want, rtol=1e-5 if dtype == "f32" else 1e-2,
                               atol=ATOL.get(name, 0) if dtype == "f32" else 1e-2)


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5, 1.0])
@pytest.mark.parametrize("name", ["exp", "exp2"])
def test_exp_fma_share(name, share):
    """exp / exp2 with a share of the elements on the FMA pipe (ex2_fma):
    within the polynomial's 8.6e-5 (and the clamp's 1e-5) of the exact
    value over the whole f32 range: -inf and below -127 give +0, 2^128 and
    up inf, no NaN."""
    v = RT("f32", 16, 32, "row")
    x = rand(v.shape, scale=40.0)
    special = [-np.inf, -1e30, -200.0, -127.5, -126.0, -1.0, 0.0, 3.0, 127.25, 200.0, np.inf]
    x.flat[:len(special)] = special
    x.flat[-64:] = np.linspace(-1, 1, 64)
    x = x.astype(np.float32)
    out, = run_kernel([v], [v], lambda t: [ops.unary(name, t, fma=share)], [x])
    with np.errstate(over="ignore"):
        want = (np.exp if name == "exp" else np.exp2)(x.astype(np.float64)).astype(np.float32)
    assert not np.isnan(out).any()
    tiny = want <= 2.0 ** -126            # flushed (ex2.approx.ftz), a denormal, or 2^-126
    assert ((out[tiny] >= 0) & (out[tiny] <= 2.0 ** -126)).all()
    assert (out[want < 2.0 ** -160] == 0).all()   # -inf, -1e30, -200 (exp: also -127.5)
    np.testing.assert_allclose(out[~tiny], want[~tiny], rtol=1.5e-4 if share else 1e-5)


@pytest.mark.parametrize("form", ["fma", "mul"])
@pytest.mark.parametrize("share", [0.25, 1.0])
def test_exp2_of_fma_share(share, form):
    """exp2(x c + r), the softmax's form, and exp2(x c), the attention
    backward's: the emulated elements fold the fma or product into their
    clamp (x (c / 255) + (r + 127) / 255), within the same bounds."""
    v = RT("f32", 16, 32, "row")
    x = rand(v.shape, scale=40.0)
    special = [-np.inf, -1e30, -200.0, -90.0, -86.0, -1.0, 0.0, 3.0, 90.0, 200.0, np.inf]
    x.flat[:len(special)] = special
    x = x.astype(np.float32)
    c, r = 1.4426950408889634, -3.0 if form == "fma" else 0.0
    x_of = {"fma": lambda t, a, b: ops.fma(t, a, b), "mul": lambda t, a, b: ops.binary("mul", t, a)}[form]
    out, = run_kernel([v], [v], lambda t, a, b: [ops.unary("exp2", x_of(t, a, b), fma=share)], [x],
                      scalars=(c, r))
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.exp2(x.astype(np.float64) * c + r).astype(np.float32)
    assert not np.isnan(out).any()
    tiny = want <= 2.0 ** -126
    assert ((out[tiny] >= 0) & (out[tiny] <= 2.0 ** -126)).all()
    np.testing.assert_allclose(out[~tiny], want[~tiny], rtol=1.5e-4)


def test_exp_fma_share_instructions():
    """A share s of a 16 x 32 f32 tile (16 values a thread): 16 (1 - s)
    ex2.approx and 16 s emulations (each one saturating FFMA and one
    rounding down), and of exp2(fma(x, c, r)) and exp2(x * c) the emulated
    elements' fmas and products fold into their clamps: 16 (1 - s) of them
    remain."""
    v = RT("f32", 16, 32, "row")
    for share, mufu in ((0.0, 16), (0.25, 12), (0.5, 8), (1.0, 0)):
        ptx = _ptx([v], [v], lambda t: [ops.unary("exp2", t, fma=share)])
        assert ptx.count("ex2.approx.ftz.f32") == mufu
        assert ptx.count("fma.rm.f32") == 16 - mufu
        assert ptx.count("fma.rn.sat.f32") == 16 - mufu
        ptx = _ptx([v], [v], lambda t, a, b: [ops.unary("exp2", ops.fma(t, a, b), fma=share)], (1.5, -2.0))
        assert ptx.count("fma.rn.sat.f32") == 16 - mufu
        # each emulation's own fmas: f and 3 of the polynomial (rounding down:
        # fma.rm), and one (r + 127) / 255 that they share
        assert ptx.count("fma.rn.f32") == mufu + 4 * (16 - mufu) + (mufu < 16)
        ptx = _ptx([v], [v], lambda t, a: [ops.unary("exp2", ops.binary("mul", t, a), fma=share)], (1.5,))
        assert ptx.count("fma.rn.sat.f32") == 16 - mufu
        assert ptx.count("mul.rn.f32") == mufu + (mufu < 16)    # and c / 255, once


def test_fma_tile_and_scalars():
    v = RT("f32", 16, 32, "row")
    x, y, z = rand(v.shape), rand(v.shape), rand(v.shape)
    out, = run_kernel([v, v, v], [v], lambda a, b, c: [ops.fma(a, b, c)], [x, y, z])
    np.testing.assert_allclose(out, x.astype(np.float64) * y + z, rtol=1e-6)
    out, = run_kernel([v], [v], lambda a, s, t: [ops.fma(a, s, t)], [x], scalars=(1.5, -2.0))
    np.testing.assert_allclose(out, x.astype(np.float64) * 1.5 - 2, rtol=1e-6)


def test_div_is_fast_unless_ieee():
    v = RT("f32", 16, 16, "row")

    def ptx(ieee):
        return to_ptx(build([v, v], [v], lambda a, b: [ops.binary("div", a, b, ieee=ieee)]))
    fast, exact = ptx(False), ptx(True)
    assert "div.full.f32" in fast and "div.rn.f32" not in fast
    assert "div.rn.f32" in exact and "div.full.f32" not in exact


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "max", "min"])
def test_binary_tile_tile_and_tile_scalar(name):
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
           "max": np.maximum, "min": np.minimum}[name]
    v = RT("bf16", 32, 16, "col")
    x, y = rand(v.shape, "bf16"), rand(v.shape, "bf16") + 3
    out, = run_kernel([v, v], [v], lambda a, b: [ops.binary(name, a, b)], [x, y])
    np.testing.assert_allclose(out, bf16(ref(x, y)), rtol=1e-2)
    out, = run_kernel([v], [v], lambda a, s: [ops.binary(name, a, s)], [x], scalars=(1.75,))
    np.testing.assert_allclose(out, bf16(ref(x, np.float32(1.75))), rtol=1e-2)


@pytest.mark.parametrize("kind,value", [("zero", 0.0), ("ones", 1.0), ("neg_infty", -np.inf), ("pos_infty", np.inf)])
def test_initialisers(kind, value):
    v = RV("f32", 32, "row")
    out, = run_kernel([], [v], lambda: [ops.init(kind, v)], [])
    assert (out == value).all()


def test_fill_rounds_to_bf16():
    v = RT("bf16", 16, 16, "row")
    out, = run_kernel([], [v], lambda s: [ops.fill(v, s)], [], scalars=(1.0 + 2 ** -9,))
    assert (out == bf16(np.float32(1.0 + 2 ** -9))).all() and out[0, 0] == 1.0


def test_copy_rounds_to_nearest_even():
    src, dst = RT("f32", 16, 16, "row"), RT("bf16", 16, 16, "row")
    # halfway cases: 1 + 2^-8 rounds down to 1 (even), 1 + 3*2^-8 up to 1 + 2^-6
    x = rand(src.shape)
    x[0, 0], x[0, 1] = 1 + 2 ** -8, 1 + 3 * 2 ** -8
    out, = run_kernel([src], [dst], lambda t: [ops.unary("copy", t, dst)], [x])
    np.testing.assert_array_equal(out, bf16(x))
    assert out[0, 0] == 1.0 and out[0, 1] == 1 + 2 ** -6


# ---------------------------------------------------------------- reductions and broadcasts

@pytest.mark.parametrize("name", ["row_max", "row_sum", "col_max", "col_sum"])
@pytest.mark.parametrize("shape", [(16, 16), (32, 48)])
@pytest.mark.parametrize("with_init", [False, True])
def test_reductions(name, shape, with_init):
    v = RT("bf16", *shape, "row")
    rows = name.startswith("row")
    rv = v.col_vec("f32") if rows else v.row_vec("f32")
    x = rand(shape, "bf16")
    init = rand(rv.shape)
    op = np.max if name.endswith("max") else np.sum
    want = op(x.astype(np.float64), axis=1 if rows else 0)
    if with_init:
        want = np.maximum(want, init) if name.endswith("max") else want + init
        out, = run_kernel([v, rv], [rv], lambda t, i: [ops.reduce(name, t, init=i)], [x, init])
    else:
        out, = run_kernel([v], [rv], lambda t: [ops.reduce(name, t, rv)], [x])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["row_pick", "col_pick"])
@pytest.mark.parametrize("shape", [(16, 16), (32, 48)])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_picks(name, shape, dtype, dynamic):
    """x[:, j] and x[i, :] at every index class (block, 8-half, parity), the
    index a constant or a run-time value (warpid() + k: the select chain)."""
    from mlir import ir
    from mlir.dialects import arith
    v = RT(dtype, *shape, "row")
    rows = name == "row_pick"
    rv = v.col_vec() if rows else v.row_vec()
    x = rand(shape, dtype)
    n = shape[1] if rows else shape[0]
    for k in sorted({0, 1, 6, 9, 14, n - 2, n - 1}):
        def body(t, k=k):
            at = arith.constant(ir.IndexType.get(), k)
            if dynamic:
                at = arith.addi(ops.worker_id("warpid"), at)
            return [ops.pick(name, t, at)]
        out, = run_kernel([v], [rv], body, [x])
        np.testing.assert_array_equal(out, x[:, k] if rows else x[k, :])


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(16, 16), (32, 48)])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_roll(axis, shape, dtype):
    """numpy.roll along rows and columns, every shift class (parity, within
    the 8-group, across 8-halves and base tiles, negative, whole turns),
    checked on the 32-lane simulation of the lowered shuffles."""
    v = RT(dtype, *shape, "row")
    x = rand(shape, dtype)
    n = shape[axis]
    for shift in sorted({0, 1, 2, 3, 7, 8, 9, 15, n - 1, n + 5, -1, -6}):
        out, = run_kernel([v], [v], lambda t, s=shift: [ops.roll(t, s % n, axis)], [x])
        np.testing.assert_array_equal(out, np.roll(x, shift, axis=axis), err_msg=f"shift {shift}")


@pytest.mark.parametrize("name", ["add_row", "sub_row", "mul_row", "div_row",
                                  "add_col", "sub_col", "mul_col", "div_col"])
def test_broadcasts(name):
    v = RT("f32", 32, 48, "row")
    rows = name.endswith("_row")
    rv = v.col_vec() if rows else v.row_vec()
    x, vec = rand(v.shape), rand(rv.shape) + 4
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[name[:3]]
    out, = run_kernel([v, rv], [v], lambda t, u: [ops.broadcast(name, t, u)], [x, vec])
    np.testing.assert_allclose(out, ref(x, vec[:, None] if rows else vec[None, :]), rtol=1e-6)


# ---------------------------------------------------------------- mma

def _mma_case(name, dtype, m, n, k):
    at, bt = name in ("mma_atb", "mma_atbt"), name in ("mma_abt", "mma_atbt")
    av = RT(dtype, *((k, m) if at else (m, k)), "col" if at else "row")
    bv = RT(dtype, *((n, k) if bt else (k, n)), "row" if bt else "col")
    cv = RT("f32", m, n, "row")
    a, b, c = rand(av.shape, dtype), rand(bv.shape, dtype), rand(cv.shape)
    out, = run_kernel([av, bv, cv], [cv], lambda x, y, z: [ops.mma(name, x, y, z)], [a, b, c])
    A = a.T if at else a
    Bm = b.T if bt else b
    np.testing.assert_allclose(out, A.astype(np.float64) @ Bm + c, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["mma_ab", "mma_abt", "mma_atb", "mma_atbt"])
@pytest.mark.parametrize("m,n,k", [(16, 16, 16), (32, 48, 16), (16, 32, 48), (48, 16, 32)])
def test_mma_variants(name, m, n, k):
    _mma_case(name, "bf16", m, n, k)


@pytest.mark.parametrize("name", ["mma_ab", "mma_atbt"])
def test_mma_f16(name):
    _mma_case(name, "f16", 32, 32, 32)


# ---------------------------------------------------------------- layouts

@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("layout", ["row", "col"])
def test_swap_layout(dtype, layout):
    v = RT(dtype, 32, 48, layout)
    w = v.with_(layout="col" if layout == "row" else "row")
    x = rand(v.shape, dtype)
    out, = run_kernel([v], [w], lambda t: [ops.swap_layout(t)], [x])
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("shape", [(16, 16), (16, 48), (48, 32)])
@pytest.mark.parametrize("flip", [False, True], ids=["same", "other"])
def test_transpose(dtype, layout, shape, flip):
    """x.T in x's layout (quadrants swapped, then base tiles renamed) or in
    the other one (the base tiles renamed alone: no shuffle or movmatrix)."""
    other = "col" if layout == "row" else "row"
    v = RT(dtype, *shape, layout)
    w = v.with_(rows=shape[1], cols=shape[0], layout=other if flip else layout)
    x = rand(v.shape, dtype)
    out, = run_kernel([v], [w], lambda t: [ops.transpose(t, w.layout)], [x])
    np.testing.assert_array_equal(out, x.T)
    if flip:
        ptx = _ptx([v], [w], lambda t: [ops.transpose(t, w.layout)])
        assert "movmatrix" not in ptx and "shfl" not in ptx


def test_softmax_like_chain():
    """row_max, sub_row, exp2, row_sum, div_row, copy to bf16, then mma_AB: the attention inner loop."""
    s, vv, o = RT("f32", 16, 32, "row"), RT("bf16", 32, 16, "col"), RT("f32", 16, 16, "row")

    def body(x, vals, acc):
        mx = ops.reduce("row_max", x)
        p = ops.unary("exp2", ops.broadcast("sub_row", x, mx))
        p = ops.broadcast("div_row", p, ops.reduce("row_sum", p))
        return [ops.mma("mma_ab", ops.unary("copy", p, s.with_(dtype="bf16")), vals, acc)]
    x, v, c = rand(s.shape, scale=3), rand(vv.shape, "bf16"), np.zeros(o.shape, np.float32)
    out, = run_kernel([s, vv, o], [o], body, [x, v, c])
    p = np.exp2(x - x.max(1, keepdims=True))
    p = bf16(p / p.sum(1, keepdims=True))
    np.testing.assert_allclose(out, p.astype(np.float64) @ v, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- PTX

def _ptx(ins, outs, body, scalars=()):
    m = build(ins, outs, body, scalars)
    with m.context:
        return to_ptx(m)


def test_ptx_mma_abt_operands():
    """rt<bf16,16,32> x rt<bf16,16,32>^T: 2 k blocks x 2 n halves = 4 mma.sync."""
    a = RT("bf16", 16, 32, "row")
    c = RT("f32", 16, 16, "row")
    ptx = _ptx([a, a, c], [c], lambda x, y, z: [ops.mma("mma_abt", x, y, z)])
    mmas = re.findall(r"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32\s*\{([^}]*)\},\s*"
                      r"\{([^}]*)\},\s*\{([^}]*)\},\s*\{([^}]*)\}", ptx)
    assert len(mmas) == 4
    d, a_ops, b_ops, c_ops = zip(*mmas)
    # one A register set per k block, shared by the two n8 halves; a B pair per (k block, half)
    assert len(set(a_ops)) == 2 and all(a_ops.count(x) == 2 for x in a_ops)
    assert len(set(b_ops)) == 4
    # the second k block accumulates onto the first: two mmas read another's D as C,
    # and those two use the other A register set
    chained = [n for n in range(4) if c_ops[n] in d]
    assert len(chained) == 2 and len({a_ops[n] for n in chained}) == 1
    assert {c_ops[n] for n in chained} == {d[n] for n in range(4) if n not in chained}
    res = ptxas_resources(ptx)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0


def test_ptx_row_max_shuffles():
    v = RT("f32", 16, 64, "row")
    ptx = _ptx([v], [v.col_vec()], lambda t: [ops.reduce("row_max", t)])
    # two rows (g, g+8) per thread, each: xor 1 then xor 2
    assert sorted(re.findall(r"shfl.sync.bfly.b32\s+\S+, \S+, (\d+), 31, -1;", ptx)) == ["1", "1", "2", "2"]
    assert "max.f32" in ptx


def test_ptx_col_sum_shuffles():
    v = RT("f32", 16, 16, "row")
    ptx = _ptx([v], [v.row_vec()], lambda t: [ops.reduce("col_sum", t)])
    assert sorted(set(re.findall(r"shfl.sync.bfly.b32\s+\S+, \S+, (\d+), 31", ptx))) == ["16", "4", "8"]


def test_ptx_fast_paths_and_rounding():
    v, w = RT("f32", 16, 16, "row"), RT("bf16", 16, 16, "row")
    ptx = _ptx([v], [w], lambda t: [ops.unary("copy", ops.unary("exp", t), w)])
    assert "ex2.approx.ftz.f32" in ptx
    assert re.search(r"cvt.rn.bf16(x2)?.f32", ptx)
    ptx = _ptx([v], [v], lambda t: [ops.unary("log", t)])
    assert "lg2.approx.ftz.f32" in ptx


def test_ptx_swap_layout_uses_movmatrix():
    v = RT("bf16", 16, 32, "row")
    ptx = _ptx([v], [v.with_(layout="col")], lambda t: [ops.swap_layout(t)])
    assert ptx.count("movmatrix.sync.aligned.m8n8.trans.b16") == 8
    ptxas_resources(ptx)


def test_lane_id_read_once():
    v = RT("f32", 16, 32, "row")
    m = build([v], [v.with_(layout="col")], lambda t: [ops.swap_layout(t)])
    with m.context:
        lower_module(m)
    assert str(m).count("nvvm.read.ptx.sreg.tid.x") == 1
