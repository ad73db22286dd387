"""The numpy handlers of the tk ops that compute on registers: initialisers,
elementwise maps and fma, reductions and picks, roll, iota and where, random
numbers, broadcasts, the mma, and layout changes.

Every handler runs once per op at compile time (checking the types it relies
on, so a malformed op is a located error instead of a wrong number) and
returns the closure that runs per warp. Register values are float32 arrays
(int32 for i32 tiles, values.py) that no op ever mutates: a result is always
a fresh array (or an operand passed through unchanged), so they can be
shared freely between slots.
"""
from __future__ import annotations

import math

import numpy as np

from ..diagnostics import error
from ..dialect.types import RT, RV, view
from .operands import F32, expect, tview
from .program import handler
from .values import NUMPY, rounder, wrap


# ---- initialisers

_INIT = {"tk.zero": 0.0, "tk.ones": 1.0, "tk.neg_infty": -np.inf, "tk.pos_infty": np.inf}
_INT_INIT = {"tk.zero": 0, "tk.ones": 1, "tk.neg_infty": -2 ** 31, "tk.pos_infty": 2 ** 31 - 1}  # i32's range


@handler(*_INIT)
def _init(c, op):
    t = tview(op.results[0])
    expect(isinstance(t, (RT, RV)), op, f"result must be an rt or rv, got {t}")
    ints = t.dtype == "i32"
    value = np.full(t.shape, (_INT_INIT if ints else _INIT)[op.name], NUMPY[t.dtype])  # shared: immutable
    out = c.result_slot(op)

    def step(env, w):
        env[out] = value
    return step


@handler("tk.fill")
def _fill(c, op):
    t = tview(op.results[0])
    expect(isinstance(t, (RT, RV)), op, f"result must be an rt or rv, got {t}")
    v, out, rnd, shape = c.slot(op.operands[0]), c.result_slot(op), rounder(t.dtype), t.shape
    kind = NUMPY[t.dtype]

    def step(env, w):
        env[out] = rnd(np.full(shape, env[v], kind))
    return step


# ---- elementwise maps

def _exact(f):
    """f computed in float64 and rounded once to f32: the reference the GPU's
    approximations are measured against (docs/tile-ir.md, "Math")."""
    return lambda x: f(np.asarray(x, np.float64)).astype(F32)


_erf = np.vectorize(math.erf, otypes=[np.float64])

_UNARY = {
    "tk.copy": lambda x: x,
    "tk.exp": np.exp,
    "tk.exp2": np.exp2,
    "tk.log": np.log,
    "tk.log2": np.log2,
    "tk.abs": np.abs,
    "tk.relu": lambda x: np.fmax(x, x.dtype.type(0)),   # max.f32: relu(NaN) = 0
    "tk.neg": np.negative,
    "tk.sqrt": _exact(np.sqrt),
    "tk.rsqrt": _exact(lambda x: 1 / np.sqrt(x)),
    "tk.rcp": _exact(lambda x: 1 / x),
    "tk.sigmoid": _exact(lambda x: 1 / (1 + np.exp(-x))),
    "tk.silu": _exact(lambda x: x / (1 + np.exp(-x))),
    "tk.tanh": _exact(np.tanh),
    "tk.erf": _exact(_erf),
    "tk.gelu": _exact(lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    "tk.gelu_tanh": _exact(lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi)
                                                          * (x + 0.044715 * x ** 3)))),
}


def _scalar_math(op) -> bool:
    return all(str(v.type) == "f32" for v in (*op.operands, *op.results))


@handler(*_UNARY)
def _unary(c, op):
    if op.name != "tk.copy" and _scalar_math(op):
        x, out, f = c.slot(op.operands[0]), c.result_slot(op), _UNARY[op.name]

        def scalar(env, w):
            env[out] = F32(f(F32(env[x])))
        return scalar
    x_t, t = tview(op.operands[0]), tview(op.results[0])
    expect(isinstance(t, (RT, RV)) and type(x_t) is type(t) and x_t.shape == t.shape, op,
           f"operand {x_t} and result {t} must be rt/rv of one shape")
    if op.name != "tk.copy":
        expect(x_t == t, op, f"result type {t} must equal the operand's {x_t}")
    x, out, f, rnd = c.slot(op.operands[0]), c.result_slot(op), _UNARY[op.name], rounder(t.dtype)

    def step(env, w):
        env[out] = rnd(f(env[x]))
    return step


_BINARY = {
    "tk.add": np.add, "tk.sub": np.subtract, "tk.mul": np.multiply,
    "tk.div": np.divide, "tk.max": np.fmax, "tk.min": np.fmin,   # PTX max/min.f32: a NaN gives the other
}


@handler(*_BINARY)
def _binary(c, op):
    x_t, y_t, t = tview(op.operands[0]), tview(op.operands[1]), tview(op.results[0])
    expect(isinstance(x_t, (RT, RV)) and x_t == t, op,
           f"result {t} must equal the first operand's type {x_t}")
    want = "i32" if x_t.dtype == "i32" else "f32"
    scalar = str(op.operands[1].type) == want
    expect(scalar or (type(y_t) is type(x_t) and y_t.shape == x_t.shape), op,
           f"second operand {y_t or op.operands[1].type} must be an {want} or of shape {x_t.shape}")
    expect(not (want == "i32" and op.name == "tk.div"), op, "an i32 tile has no division")
    x, y, out = c.slot(op.operands[0]), c.slot(op.operands[1]), c.result_slot(op)
    f, rnd = _BINARY[op.name], rounder(t.dtype)

    def step(env, w):
        env[out] = rnd(f(env[x], env[y]))
    return step


@handler("tk.fma")
def _fma(c, op):
    if _scalar_math(op):
        x, y, z, out = (*(c.slot(v) for v in op.operands), c.result_slot(op))

        def scalar(env, w):
            env[out] = F32(np.float64(env[x]) * np.float64(env[y]) + np.float64(env[z]))
        return scalar
    t = tview(op.results[0])
    rows = [isinstance(t, RT) and isinstance(tview(v), RV) for v in op.operands[1:]]
    for v, row in zip(op.operands[1:], rows):
        expect(tview(v) == t or str(v.type) == "f32" or row, op,
               f"y and z must have the result's type {t}, be f32 scalars or vectors of its rows")
    x, y, z, out = (*(c.slot(v) for v in op.operands), c.result_slot(op))
    rnd = rounder(t.dtype)
    shape = [(slice(None), None) if row else () for row in rows]  # a row vector broadcast along rows

    def step(env, w):  # one rounding: exact in float64 (products of f32 are exact there)
        a = np.asarray(env[x], np.float64)
        b, d = (np.asarray(env[s], np.float64)[ix] for s, ix in zip((y, z), shape))
        env[out] = rnd((a * b + d).astype(F32))
    return step


# ---- reductions: row_* reduce each row (axis 1) into a "col" vector

# max as the GPU's (max.f32 on each pair): NaNs are skipped, a row of NaNs alone gives NaN
_fmax_reduce = np.fmax.reduce
_REDUCE = {
    "tk.row_max": (1, _fmax_reduce, np.fmax), "tk.row_sum": (1, np.sum, np.add),
    "tk.col_max": (0, _fmax_reduce, np.fmax), "tk.col_sum": (0, np.sum, np.add),
}


@handler(*_REDUCE)
def _reduce(c, op):
    axis, reduce, combine = _REDUCE[op.name]
    x_t, t = tview(op.operands[0]), tview(op.results[0])
    expect(isinstance(x_t, RT), op, f"operand must be an rt, got {x_t}")
    kind, length = ("col", x_t.rows) if axis == 1 else ("row", x_t.cols)
    expect(isinstance(t, RV) and t.kind == kind and t.length == length, op,
           f"result must be an rv of kind '{kind}' and length {length}, got {t}")
    has_init = len(op.operands) == 2
    if has_init:
        i_t = tview(op.operands[1])
        expect(isinstance(i_t, RV) and i_t.length == length and i_t.kind == kind, op,
               f"init must be an rv of kind '{kind}' and length {length}, got {i_t}")
    x, out, rnd = c.slot(op.operands[0]), c.result_slot(op), rounder(t.dtype)
    init = c.slot(op.operands[1]) if has_init else None

    def step(env, w):
        r = reduce(env[x], axis=axis)
        env[out] = rnd(combine(env[init], r) if has_init else r)
    return step


# ---- picks: row_pick(x, j) = x[:, j] (a "col" vector), col_pick(x, i) = x[i, :]

@handler("tk.row_pick", "tk.col_pick")
def _pick(c, op):
    rows = op.name == "tk.row_pick"
    x_t, t = tview(op.operands[0]), tview(op.results[0])
    expect(isinstance(x_t, RT), op, f"operand must be an rt, got {x_t}")
    kind, length = ("col", x_t.rows) if rows else ("row", x_t.cols)
    expect(isinstance(t, RV) and t.kind == kind and t.length == length, op,
           f"result must be an rv of kind '{kind}' and length {length}, got {t}")
    x, i, out = c.slot(op.operands[0]), c.slot(op.operands[1]), c.result_slot(op)
    n = x_t.cols if rows else x_t.rows

    def step(env, w):
        k = env[i]
        if not 0 <= k < n:
            raise error(op, f"{op.name}: index {k} is outside the tile's {n} {'columns' if rows else 'rows'}")
        env[out] = (env[x][:, k] if rows else env[x][k, :]).copy()
    return step


# ---- roll: numpy.roll along rows (axis 0) or columns (axis 1)

@handler("tk.roll")
def _roll(c, op):
    t = tview(op.operands[0])
    expect(isinstance(t, RT) and tview(op.results[0]) == t, op, f"operand and result must be one rt type, got {t}")
    shift, axis = op.attributes["shift"].value, op.attributes["axis"].value
    x, out = c.slot(op.operands[0]), c.result_slot(op)

    def step(env, w):
        env[out] = np.roll(env[x], shift, axis=axis)
    return step


# ---- masks

@handler("tk.iota")
def _iota(c, op):
    t, axis = tview(op.results[0]), op.attributes["axis"].value
    expect(isinstance(t, (RT, RV)) and axis in ((0, 1) if isinstance(t, RT) else (0,)), op,
           f"result must be an rt (axis 0 or 1) or rv (axis 0), got {t} with axis {axis}")
    kind = NUMPY[t.dtype]
    idx = np.indices(t.shape)[axis].astype(kind)
    rnd, out = rounder(t.dtype), c.result_slot(op)
    start = c.slot(op.operands[0]) if len(op.operands) else None

    def step(env, w):
        env[out] = rnd(idx if start is None else idx + kind(env[start]))
    return step


_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


@handler("tk.where")
def _where(c, op):
    t = tview(op.results[0])
    expect(isinstance(t, (RT, RV)), op, f"result must be an rt or rv, got {t}")
    for v in op.operands:
        v_t = view(v.type) if str(v.type).startswith("!tk.") else None
        expect(str(v.type) in ("f32", "i32") or (type(v_t) is type(t) and v_t.shape == t.shape), op,
               f"operands must be scalars or tiles of shape {t.shape}, got {v.type}")
    cmp, rnd, kind = _CMP[op.attributes["cmp"].value], rounder(t.dtype), NUMPY[t.dtype]
    a, b, x, y = (c.slot(v) for v in op.operands)
    out, shape = c.result_slot(op), t.shape

    def step(env, w):
        env[out] = rnd(np.broadcast_to(np.where(cmp(env[a], env[b]), env[x], env[y]), shape).astype(kind))
    return step


# ---- random numbers

@handler("tk.rand")
def _rand(c, op):
    from .. import philox
    t = tview(op.results[0])
    expect(isinstance(t, (RT, RV)), op, f"result must be an rt or rv, got {t}")
    seed, offset, base, stride = (c.slot(v) for v in op.operands)
    out, rnd = c.result_slot(op), rounder(t.dtype)
    idx = np.indices(t.shape)

    def step(env, w):
        b, s = int(env[base]), int(env[stride])
        if b % 4 or s % 4:  # the GPU draws 4 numbers per Philox call, for aligned groups of 4
            raise error(op, f"tk.rand: base ({b}) and stride ({s}) must be multiples of 4")
        e = b + (idx[0] * s + idx[1] if len(t.shape) == 2 else idx[0])
        env[out] = rnd(philox.uniform(int(env[seed]), int(env[offset]), e))
    return step


# ---- whole-vector reductions: rv -> f32 scalar

_VEC_REDUCE = {"tk.vec_sum": np.sum, "tk.vec_max": np.fmax.reduce, "tk.vec_min": np.fmin.reduce}


@handler(*_VEC_REDUCE)
def _vec_reduce(c, op):
    f = _VEC_REDUCE[op.name]
    expect(isinstance(tview(op.operands[0]), RV), op, f"operand must be an rv, got {op.operands[0].type}")
    x, out = c.slot(op.operands[0]), c.result_slot(op)
    if str(op.results[0].type) == "i32":   # of an i32 rv: wraps as the GPU's i32 adds
        def integer(env, w):
            env[out] = wrap(int(f(env[x].astype(np.int64))), 32)
        return integer

    def step(env, w):
        env[out] = F32(f(env[x]))
    return step


# ---- broadcasts: *_row apply v[i] to row i, *_col apply v[j] to column j

_BROADCAST = {f"tk.{name}_{where}": (f, where)
              for name, f in (("add", np.add), ("sub", np.subtract),
                              ("mul", np.multiply), ("div", np.divide))
              for where in ("row", "col")}


@handler(*_BROADCAST)
def _broadcast(c, op):
    f, along = _BROADCAST[op.name]
    x_t, v_t, t = tview(op.operands[0]), tview(op.operands[1]), tview(op.results[0])
    expect(isinstance(x_t, RT) and x_t == t, op, f"result {t} must equal the tile's type {x_t}")
    kind, length = ("col", x_t.rows) if along == "row" else ("row", x_t.cols)
    expect(isinstance(v_t, RV) and v_t.kind == kind and v_t.length == length, op,
           f"vector must be an rv of kind '{kind}' and length {length}, got {v_t}")
    x, v, out, rnd = c.slot(op.operands[0]), c.slot(op.operands[1]), c.result_slot(op), rounder(t.dtype)
    shape = (length, 1) if along == "row" else (1, length)

    def step(env, w):
        env[out] = rnd(f(env[x], env[v].reshape(shape)))
    return step


# ---- mma: (transpose a?, transpose b?, layout of a, layout of b)

_MMA = {
    "tk.mma_ab": (False, False, "row", "col"),
    "tk.mma_abt": (False, True, "row", "row"),
    "tk.mma_atb": (True, False, "col", "col"),
    "tk.mma_atbt": (True, True, "col", "row"),
}


@handler(*_MMA)
def _mma(c, op):
    ta, tb, la, lb = _MMA[op.name]
    a_t, b_t, c_t, d_t = (*(tview(v) for v in op.operands), tview(op.results[0]))
    expect(all(isinstance(t, RT) for t in (a_t, b_t, c_t, d_t)), op, "operands must be rt")
    expect(a_t.dtype == b_t.dtype and a_t.dtype in ("bf16", "f16"), op,
           f"a and b must both be bf16 or f16, got {a_t.dtype} and {b_t.dtype}")
    expect((a_t.layout, b_t.layout) == (la, lb), op,
           f"wants a in '{la}' and b in '{lb}' layout, got '{a_t.layout}' and '{b_t.layout}'")
    (m, k), (k2, n) = (a_t.shape[::-1] if ta else a_t.shape), (b_t.shape[::-1] if tb else b_t.shape)
    expect(k == k2, op, f"inner dims differ: {a_t} and {b_t}")
    want = RT("f32", m, n, "row")
    expect(c_t == want and d_t == want, op, f"c and d must be {want.text()}, got {c_t} and {d_t}")
    a, b, acc, out = (*(c.slot(v) for v in op.operands), c.result_slot(op))

    # Products of bf16/f16 values are exact in float64; the sum is rounded
    # to f32 once (the tensor core accumulates in f32 as it goes).
    def step(env, w):
        x = env[a].astype(np.float64)
        y = env[b].astype(np.float64)
        env[out] = (np.matmul(x.T if ta else x, y.T if tb else y) + env[acc]).astype(F32)
    return step


# ---- layout changes

@handler("tk.swap_layout")
def _swap_layout(c, op):
    x_t, t = tview(op.operands[0]), tview(op.results[0])
    expect(isinstance(x_t, RT) and isinstance(t, RT) and t == x_t.with_(layout=t.layout), op,
           f"result {t} must be the operand {x_t} in a layout")
    x, out = c.slot(op.operands[0]), c.result_slot(op)

    def step(env, w):
        env[out] = env[x]  # layouts do not change values
    return step


@handler("tk.transpose")
def _transpose(c, op):
    x_t, t = tview(op.operands[0]), tview(op.results[0])
    expect(isinstance(x_t, RT) and isinstance(t, RT)
           and t.with_(layout=x_t.layout) == x_t.with_(rows=x_t.cols, cols=x_t.rows), op,
           f"result {t} must be the transpose of {x_t}")
    x, out = c.slot(op.operands[0]), c.result_slot(op)

    def step(env, w):
        env[out] = np.ascontiguousarray(env[x].T)
    return step
