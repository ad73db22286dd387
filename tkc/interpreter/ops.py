"""One numpy function per tk op, registered by op name.

Every handler runs once per op at compile time (checking the types it relies
on, so a malformed op is a located error instead of a wrong number) and
returns the closure that runs per warp. Register values are float32 arrays
that no op ever mutates: a result is always a fresh array (or an operand
passed through unchanged), so they can be shared freely between slots.
"""
from __future__ import annotations

import math

import numpy as np

from ..diagnostics import error
from ..dialect.types import GL, RT, RV, ST, SV, view
from .program import handler
from .values import ROUND, rounder

F32 = np.float32


def tview(value):
    return view(value.type)


def expect(cond: bool, op, message: str) -> None:
    if not cond:
        raise error(op, f"{op.name}: {message}")


# ---- initialisers

_INIT = {"tk.zero": 0.0, "tk.ones": 1.0, "tk.neg_infty": -np.inf, "tk.pos_infty": np.inf}


@handler(*_INIT)
def _init(c, op):
    t = tview(op.results[0])
    expect(isinstance(t, (RT, RV)), op, f"result must be an rt or rv, got {t}")
    value = np.full(t.shape, _INIT[op.name], F32)  # shared: values are immutable
    out = c.result_slot(op)

    def step(env, w):
        env[out] = value
    return step


@handler("tk.fill")
def _fill(c, op):
    t = tview(op.results[0])
    expect(isinstance(t, (RT, RV)), op, f"result must be an rt or rv, got {t}")
    v, out, rnd, shape = c.slot(op.operands[0]), c.result_slot(op), rounder(t.dtype), t.shape

    def step(env, w):
        env[out] = rnd(np.full(shape, env[v], F32))
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
    "tk.relu": lambda x: np.maximum(x, F32(0)),
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
    "tk.div": np.divide, "tk.max": np.maximum, "tk.min": np.minimum,
}


@handler(*_BINARY)
def _binary(c, op):
    x_t, y_t, t = tview(op.operands[0]), tview(op.operands[1]), tview(op.results[0])
    expect(isinstance(x_t, (RT, RV)) and x_t == t, op,
           f"result {t} must equal the first operand's type {x_t}")
    scalar = str(op.operands[1].type) == "f32"
    expect(scalar or (type(y_t) is type(x_t) and y_t.shape == x_t.shape), op,
           f"second operand {y_t or op.operands[1].type} must be an f32 or of shape {x_t.shape}")
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

_REDUCE = {
    "tk.row_max": (1, np.max, np.maximum), "tk.row_sum": (1, np.sum, np.add),
    "tk.col_max": (0, np.max, np.maximum), "tk.col_sum": (0, np.sum, np.add),
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
    idx = np.indices(t.shape)[axis].astype(F32)
    rnd, out = rounder(t.dtype), c.result_slot(op)
    start = c.slot(op.operands[0]) if len(op.operands) else None

    def step(env, w):
        env[out] = rnd(idx if start is None else idx + F32(env[start]))
    return step


_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


@handler("tk.where")
def _where(c, op):
    t = tview(op.results[0])
    expect(isinstance(t, (RT, RV)), op, f"result must be an rt or rv, got {t}")
    for v in op.operands:
        v_t = view(v.type) if str(v.type).startswith("!tk.") else None
        expect(str(v.type) == "f32" or (type(v_t) is type(t) and v_t.shape == t.shape), op,
               f"operands must be f32 scalars or tiles of shape {t.shape}, got {v.type}")
    cmp, rnd = _CMP[op.attributes["cmp"].value], rounder(t.dtype)
    a, b, x, y = (c.slot(v) for v in op.operands)
    out, shape = c.result_slot(op), t.shape

    def step(env, w):
        env[out] = rnd(np.broadcast_to(np.where(cmp(env[a], env[b]), env[x], env[y]), shape).astype(F32))
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

_VEC_REDUCE = {"tk.vec_sum": np.sum, "tk.vec_max": np.max, "tk.vec_min": np.min}


@handler(*_VEC_REDUCE)
def _vec_reduce(c, op):
    f = _VEC_REDUCE[op.name]
    expect(isinstance(tview(op.operands[0]), RV), op, f"operand must be an rv, got {op.operands[0].type}")
    x, out = c.slot(op.operands[0]), c.result_slot(op)

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
    expect(isinstance(x_t, RT) and t == x_t.with_(rows=x_t.cols, cols=x_t.rows), op,
           f"result {t} must be the transpose of {x_t}")
    x, out = c.slot(op.operands[0]), c.result_slot(op)

    def step(env, w):
        env[out] = np.ascontiguousarray(env[x].T)
    return step


# ---- memory

@handler("tk.load_split")
def _load_split(c, op):
    """(even, odd) columns of the gl or st tile of twice the results' width."""
    mem_t, t = tview(op.operands[0]), tview(op.results[0])
    expect(isinstance(mem_t, (GL, ST)) and isinstance(t, RT) and tview(op.results[1]) == t, op,
           "splits a gl or st tile into two rt of one type")
    src, idx, outs = c.slot(op.operands[0]), [c.slot(v) for v in op.operands[1:]], \
        [c.slot(r) for r in op.results]
    piece = _pair_piece(op, mem_t, t, "fill")
    rnd_mem, rnd = ROUND[mem_t.dtype], rounder(t.dtype)

    def step(env, w):
        arr, coords = env[src], [env[i] for i in idx]
        ix, part, whole = piece(arr, coords)
        if isinstance(mem_t, ST) and w.block.races is not None:
            w.block.races.read(w.warpid, arr, ix, op)
        whole[part] = rnd_mem(arr[ix].astype(F32))
        env[outs[0]], env[outs[1]] = rnd(whole[:, 0::2]), rnd(whole[:, 1::2])
    return step


@handler("tk.store_join")
def _store_join(c, op):
    mem_t, t = tview(op.operands[0]), tview(op.operands[1])
    expect(isinstance(mem_t, (GL, ST)) and isinstance(t, RT) and tview(op.operands[2]) == t, op,
           "joins two rt of one type into a gl or st tile")
    dst, xs, idx = c.slot(op.operands[0]), [c.slot(v) for v in op.operands[1:3]], \
        [c.slot(v) for v in op.operands[3:]]
    piece, rnd = _pair_piece(op, mem_t, t, "clip"), ROUND[mem_t.dtype]

    def step(env, w):
        arr, coords = env[dst], [env[i] for i in idx]
        ix, part, whole = piece(arr, coords)
        if isinstance(mem_t, ST) and w.block.races is not None:
            w.block.races.write(w.warpid, arr, ix, op)
        whole[:, 0::2], whole[:, 1::2] = env[xs[0]], env[xs[1]]
        arr[ix] = rnd(whole[part])
    return step


def _pair_piece(op, mem_t, t, bound):
    """piece(arr, coords) -> (the gl's index, the pair tile's index, a pair
    tile filled with the fill value): ragged with fill/clip, else whole."""
    shape = (t.rows, 2 * t.cols)
    ragged, elements = bound in op.attributes, "elements" in op.attributes
    expect(ragged or not elements, op, f"element coordinates need {bound}")
    expect(isinstance(mem_t, GL) or not ragged, op, f"{bound} (a ragged access) needs a gl")
    _coords_count(op, mem_t, len(op.operands) - (1 if bound == "fill" else 3))
    fill = F32(op.attributes["fill"].value) if bound == "fill" and ragged else F32(np.nan)
    if ragged:
        width = access_width(t, mem_t, 2)
        return lambda arr, coords: (*clipped(op, coords, shape, arr.shape, width, elements,
                                             whole(arr)[1][3]),
                                    np.full(shape, fill, F32))
    return lambda arr, coords: (window(op, coords, mem_t, shape, arr.shape),
                                (slice(None), slice(None)), np.full(shape, fill, F32))


def _element(c, op, mem, coords, x, bound):
    """One element at element coordinates (b, d, r, c) of a gl (an f32, or an
    int from an i32 gl): outside its rows or columns a load reads fill and a
    store writes nothing."""
    mem_t = tview(mem)
    expect(isinstance(mem_t, GL) and len(coords) == 4, op, "one element moves to or from a gl, at 4 coordinates")
    expect("elements" in op.attributes and bound in op.attributes, op,
           f"one element needs element coordinates and {bound}")
    arr_s, idx = c.slot(mem), [c.slot(v) for v in coords]
    if x is None:
        out, fill = c.result_slot(op), op.attributes["fill"].value
        value = int if mem_t.dtype == "i32" else lambda v: F32(ROUND[mem_t.dtype](v.astype(F32)))

        def load(env, w):
            b, d, r, col = (int(env[i]) for i in idx)
            arr = env[arr_s]
            _element_bd(op, b, d, arr.shape)
            inside = 0 <= r < arr.shape[2] and 0 <= col < arr.shape[3]
            env[out] = value(arr[b, d, r, col]) if inside else value(np.asarray(fill))
        return load
    rnd = ROUND[mem_t.dtype]
    x_s = c.slot(x)

    def store(env, w):
        b, d, r, col = (int(env[i]) for i in idx)
        arr = env[arr_s]
        _element_bd(op, b, d, arr.shape)
        if 0 <= r < arr.shape[2] and 0 <= col < arr.shape[3]:
            arr[b, d, r, col] = rnd(F32(env[x_s]))
    return store


def _element_bd(op, b, d, full) -> None:
    if not (0 <= b < full[0] and 0 <= d < full[1]):
        raise error(op, f"{op.name}: coordinate ({b}, {d}, ...) is out of bounds of shape {tuple(full)}")


def clipped(op, coords, shape, full, width: int, elements: bool = False,
            origin: int = 0) -> tuple[tuple, tuple]:
    """A ragged gl access: (the gl's index, the piece's index) of the part of
    the `shape` piece at coords (b, d, r, c) that lies inside `full`. With
    element coordinates the piece may start before row or column 0; its
    column in the argument (from a slice's `origin` column) must be a
    multiple of the access width (the GPU's alignment)."""
    b, d, r, c = coords
    if not (0 <= b < full[0] and 0 <= d < full[1]) or (not elements and (r < 0 or c < 0)):
        raise error(op, f"{op.name}: coordinate {tuple(coords)} is out of bounds of shape "
                        f"{tuple(full)} (a ragged access clips rows and columns only)")
    col = origin + (c if elements else c * shape[-1])
    if col % width:
        where = f" (column {col - origin} of a slice starting at column {origin})" if origin else ""
        raise error(op, f"{op.name}: column {col}{where} is not a multiple of {width}, the access "
                        f"width of this {op.name.removeprefix('tk.')} (accesses stay aligned)")
    if len(shape) == 1:  # a vector is row r of the gl
        rows = _span(r, 1, full[2])
        cols = _span(c if elements else c * shape[0], shape[0], full[3])
        if rows[0].stop == rows[0].start:
            cols = (slice(0, 0), slice(0, 0))
        return (b, d, min(max(r, 0), full[2] - 1), cols[0]), (cols[1],)
    rows = _span(r if elements else r * shape[0], shape[0], full[2])
    cols = _span(c if elements else c * shape[1], shape[1], full[3])
    return (b, d, rows[0], cols[0]), (rows[1], cols[1])


def access_width(t, gl_t, k: int = 1) -> int:
    """Elements per GPU memory access of a ragged access of t (requirements.extents;
    k = 2 for a split or joined pair)."""
    from ..lowering.requirements import extents
    return extents(t, gl_t.dtype, True, k)[3]


def _span(start: int, n: int, size: int) -> tuple[slice, slice]:
    """(in the gl, in the piece) of the piece's n entries from start within 0..size."""
    lo, hi = max(start, 0), min(start + n, size)
    if hi <= lo:
        return slice(0, 0), slice(0, 0)
    return slice(lo, hi), slice(lo - start, hi - start)


def window(op, coords, mem_t, shape, where: str) -> tuple:
    """The numpy index of a `shape` piece at tile coordinates `coords` of `mem_t`.

    gl: coords (b, d, r, c); a tile piece spans rows r*R.. and cols c*C..,
    a vector piece is row r, cols c*L... st: coords (r, c) in units of the
    piece. sv: no coords, the whole vector.
    """
    if isinstance(mem_t, SV):
        i = coords[0] if coords else 0
        if not 0 <= i < mem_t.length // shape[0]:
            raise error(op, f"{op.name}: coordinate {i} of a {shape[0]}-element piece is out of "
                            f"bounds of {mem_t.text()}")
        return (slice(i * shape[0], (i + 1) * shape[0]),)
    if isinstance(mem_t, ST):
        r, c = coords if coords else (0, 0)
        full = mem_t.shape
        idx = (slice(r * shape[0], (r + 1) * shape[0]), slice(c * shape[1], (c + 1) * shape[1]))
        ok = r >= 0 and c >= 0 and (r + 1) * shape[0] <= full[0] and (c + 1) * shape[1] <= full[1]
    else:  # gl: `full` is the bound array's 4-D shape
        b, d, r, c = coords
        full = where
        if len(shape) == 2:
            idx = (b, d, slice(r * shape[0], (r + 1) * shape[0]), slice(c * shape[1], (c + 1) * shape[1]))
            rows_ok = 0 <= r and (r + 1) * shape[0] <= full[2]
        else:
            idx = (b, d, r, slice(c * shape[0], (c + 1) * shape[0]))
            rows_ok = 0 <= r < full[2]
        ok = 0 <= b < full[0] and 0 <= d < full[1] and rows_ok and c >= 0 \
            and (c + 1) * shape[-1] <= full[3]
    if not ok:
        what = "x".join(map(str, shape))
        raise error(op, f"{op.name}: coordinate {tuple(coords)} of a {what} piece is out of "
                        f"bounds of shape {tuple(full)}")
    return idx


def _coords_count(op, mem_t, n: int) -> None:
    want = {GL: (4,), ST: (2, 0), SV: (1, 0)}[type(mem_t)]
    expect(n in want, op, f"{mem_t} takes {want[0]} coordinates, got {n}")


def _piece_fits(op, mem_t, t) -> None:
    """The register/shared piece `t` can be cut out of `mem_t`."""
    if isinstance(mem_t, SV):
        expect(isinstance(t, (RV, SV)) and mem_t.length % t.length == 0, op,
               f"{t} is not a piece of {mem_t} (its length must divide the sv's)")
    elif isinstance(mem_t, ST):
        expect(isinstance(t, RT) and mem_t.rows % t.rows == 0 and mem_t.cols % t.cols == 0, op,
               f"{t} is not a subtile of {mem_t}")
    else:
        expect(isinstance(t, (RT, RV, ST, SV)), op, f"cannot move {t} to or from a gl")


def _memory(op, mem_t, t, ncoords: int) -> None:
    """Common checks of load/store between memory `mem_t` and registers `t`."""
    expect(isinstance(mem_t, (GL, ST, SV)), op, f"memory operand must be gl, st or sv, got {mem_t}")
    _coords_count(op, mem_t, ncoords)
    _piece_fits(op, mem_t, t)


@handler("tk.load")
def _load(c, op):
    if str(op.results[0].type) in ("f32", "i32"):
        return _element(c, op, op.operands[0], op.operands[1:], None, "fill")
    mem_t, t = tview(op.operands[0]), tview(op.results[0])
    _memory(op, mem_t, t, len(op.operands) - 1)
    src, out, idx = c.slot(op.operands[0]), c.result_slot(op), [c.slot(v) for v in op.operands[1:]]
    rnd_mem, rnd, shape = ROUND[mem_t.dtype], rounder(t.dtype), t.shape
    shared = not isinstance(mem_t, GL)
    expect("elements" not in op.attributes or "fill" in op.attributes, op,
           "element coordinates need fill (the load may reach past the gl's edges)")
    if "fill" in op.attributes:  # ragged: what lies outside the gl reads as fill
        expect(not shared, op, "fill (a ragged load) needs a gl source")
        fill = rnd(np.full(shape, op.attributes["fill"].value, F32))
        width, elements = access_width(t, mem_t), "elements" in op.attributes

        def ragged(env, w):
            arr = env[src]
            ix, part = clipped(op, [env[i] for i in idx], shape, arr.shape, width, elements,
                               whole(arr)[1][3])
            piece = fill.copy()
            piece[part] = rnd(rnd_mem(arr[ix].astype(F32)))
            env[out] = piece
        return ragged

    def step(env, w):
        arr = env[src]
        ix = window(op, [env[i] for i in idx], mem_t, shape, arr.shape)
        if shared and w.block.races is not None:
            w.block.races.read(w.warpid, arr, ix, op)
        piece = arr[ix]
        # astype copies (registers never alias memory); a gl array may hold
        # values its dtype cannot (a float32 array for bf16): round them.
        env[out] = rnd(rnd_mem(piece.astype(F32)))
    return step


@handler("tk.store")
def _store(c, op):
    if str(op.operands[1].type) == "f32":
        return _element(c, op, op.operands[0], op.operands[2:], op.operands[1], "clip")
    mem_t, t = tview(op.operands[0]), tview(op.operands[1])
    _memory(op, mem_t, t, len(op.operands) - 2)
    dst, x, idx = c.slot(op.operands[0]), c.slot(op.operands[1]), [c.slot(v) for v in op.operands[2:]]
    rnd, shape = ROUND[mem_t.dtype], t.shape
    shared = not isinstance(mem_t, GL)
    expect("elements" not in op.attributes or "clip" in op.attributes, op,
           "element coordinates need clip (the store may reach past the gl's edges)")
    add = "add" in op.attributes  # atomic adds: the gl's values plus x
    expect(not add or (not shared and mem_t.dtype == "f32"), op, "add needs an f32 gl destination")
    if "deinterleave" in op.attributes:
        expect(shared and isinstance(t, RT) and mem_t.dtype == t.dtype == "f32" and t.layout == "row", op,
               "deinterleave writes an f32 row-layout rt into an f32 st")

        def arranged(v):   # each 8 columns as their evens, then their odds
            r, c = v.shape
            return v.reshape(r, c // 8, 4, 2).transpose(0, 1, 3, 2).reshape(r, c)
    elif "packed" in op.attributes:
        expect(add and isinstance(t, RT) and t.dtype == "f32" and t.layout == "row", op,
               "packed adds an f32 row-layout rt into an f32 gl")

        def arranged(v):   # a lane's columns 2t, 2t + 1, 2t + 8, 2t + 9 of 16 at 4t .. 4t + 3
            r, c = v.shape
            return v.reshape(r, c // 16, 2, 4, 2).transpose(0, 1, 3, 2, 4).reshape(r, c)
    else:
        def arranged(v):
            return v

    def put(arr, ix, v):
        arr[ix] = rnd(arr[ix] + v) if add else rnd(v)
    if "clip" in op.attributes:  # ragged: what lies outside the gl is not written
        expect(not shared, op, "clip (a ragged store) needs a gl destination")
        width, elements = access_width(t, mem_t), "elements" in op.attributes

        def ragged(env, w):
            arr = env[dst]
            ix, part = clipped(op, [env[i] for i in idx], shape, arr.shape, width, elements,
                               whole(arr)[1][3])
            put(arr, ix, arranged(env[x])[part])
        return ragged

    def step(env, w):
        arr = env[dst]
        ix = window(op, [env[i] for i in idx], mem_t, shape, arr.shape)
        if shared and w.block.races is not None:
            w.block.races.write(w.warpid, arr, ix, op)
        put(arr, ix, arranged(env[x]))
    return step


def _group(c, op, mem, shared):
    """Checks and slots of group_load/group_store; returns (W, gl type, shared type)."""
    gl_t, sh_t = tview(mem), tview(shared)
    expect(isinstance(gl_t, GL), op, f"global operand must be a gl, got {gl_t}")
    expect(isinstance(sh_t, (ST, SV)), op, f"shared operand must be an st or sv, got {sh_t}")
    expect(gl_t.dtype == sh_t.dtype, op, f"dtypes differ: {gl_t} and {sh_t}")
    expect(len(op.operands) == 6, op, f"takes 4 coordinates, got {len(op.operands) - 2}")
    warps = op.attributes["warps"].value
    expect(0 < warps <= c.warps and c.warps % warps == 0, op,
           f"a group of {warps} warps does not divide the block's {c.warps} warps")
    return warps, gl_t, sh_t


def _arrive_at_group(op, key, warps, w, coords):
    """(arrival, first): this warp's group's n-th run of this op, and whether
    the warp is the first of its group to reach it.

    Every warp of the group calls a group op; the copy is done once, by the
    first to arrive (the scheduler runs warps in order up to each barrier,
    so it is complete before the next tk.sync, when the data is visible).
    The block checks at each barrier that the whole group arrived.
    """
    n = w.counts.get(key, 0)
    w.counts[key] = n + 1
    token = (key, w.warpid // warps, n)
    arrival = w.block.groups.get(token)
    if arrival is None:
        arrival = w.block.groups[token] = GroupArrival(op, warps, coords)
        return arrival, True
    if arrival.coords != coords:
        raise error(op, f"{op.name}: warps of one group disagree on coordinates: "
                        f"{tuple(arrival.coords)} and {tuple(coords)} (warp {w.warpid})")
    arrival.count += 1
    return arrival, False


class GroupArrival:
    """How many warps of a group reached one run of a group op; `prior`: the
    accesses the group's copy overwrites (races.Prior), for later members."""
    __slots__ = ("op", "warps", "coords", "count", "prior")

    def __init__(self, op, warps, coords):
        self.op, self.warps, self.coords, self.count, self.prior = op, warps, coords, 1, None

    def members(self, token) -> set[int]:
        """The warps of the group that `token` (key, group, run) names."""
        first = self.warps * token[1]
        return set(range(first, first + self.warps))

    def check(self) -> None:
        if self.count != self.warps:
            raise error(self.op, f"{self.op.name}: only {self.count} of the {self.warps} warps "
                                 f"of a group called it before the next tk.sync (every warp "
                                 f"of the group must)")


@handler("tk.group_load")
def _group_load(c, op):
    warps, gl_t, sh_t = _group(c, op, op.operands[1], op.operands[0])
    dst, src, idx = c.slot(op.operands[0]), c.slot(op.operands[1]), [c.slot(v) for v in op.operands[2:]]
    rnd, shape, key = ROUND[sh_t.dtype], sh_t.shape, object()

    def step(env, w):
        coords = [env[i] for i in idx]
        arrival, first = _arrive_at_group(op, key, warps, w, coords)
        races = w.block.races
        if races is not None:  # the copy is every member's write
            base = warps * (w.warpid // warps)
            arrival.prior = races.group_write(w.warpid, env[dst], first, arrival.prior,
                                              slice(base, base + warps), op)
        if first:
            arr = env[src]
            env[dst][...] = rnd(arr[window(op, coords, gl_t, shape, arr.shape)].astype(F32))
    return step


@handler("tk.group_store")
def _group_store(c, op):
    warps, gl_t, sh_t = _group(c, op, op.operands[0], op.operands[1])
    dst, src, idx = c.slot(op.operands[0]), c.slot(op.operands[1]), [c.slot(v) for v in op.operands[2:]]
    rnd, shape, key = ROUND[gl_t.dtype], sh_t.shape, object()

    def step(env, w):
        coords = [env[i] for i in idx]
        _, first = _arrive_at_group(op, key, warps, w, coords)
        if w.block.races is not None:  # each member reads the tile
            w.block.races.read(w.warpid, env[src], (slice(None),), op)
        if first:
            arr = env[dst]
            arr[window(op, coords, gl_t, shape, arr.shape)] = rnd(env[src])
    return step


# ---- workers, grid, barrier

_DIMS = {"x": 0, "y": 1, "z": 2}
_AXES = {"b": 0, "d": 1, "r": 2, "c": 3}


def _attr(op, name):
    return op.attributes[name].value


@handler("tk.warpid")
def _warpid(c, op):
    out = c.result_slot(op)

    def step(env, w):
        env[out] = w.warpid
    return step


@handler("tk.warpgroupid")
def _warpgroupid(c, op):
    out = c.result_slot(op)

    def step(env, w):
        env[out] = w.warpid // 4
    return step


@handler("tk.laneid")
def _laneid(c, op):
    def step(env, w):
        raise error(op, "tk.laneid is not supported by the interpreter "
                        "(it runs each warp as one unit, not 32 lanes)")
    return step


@handler("tk.block_idx", "tk.grid_dim")
def _block_idx(c, op):
    out, d = c.result_slot(op), _DIMS[_attr(op, "dim")]
    grid = op.name == "tk.grid_dim"

    def step(env, w):
        env[out] = (w.block.grid if grid else w.block.idx)[d]
    return step


class GLSlice(np.ndarray):
    """A gl slice: a numpy view of the argument's elements (accesses through
    it see its own edges), remembering the whole argument (`whole`) and its
    first element there (`origin`, b d r c), which TMA loads read past its end."""


def whole(arr) -> tuple:
    """(the argument array, the origin of `arr` in it) of a gl value."""
    if isinstance(arr, GLSlice):
        return arr.whole, arr.origin
    return arr, (0, 0, 0, 0)


@handler("tk.gl_slice")
def _gl_slice(c, op):
    g, start, size = (c.slot(op.operands[i]) for i in range(3))
    out = c.result_slot(op)
    axis = _AXES[op.attributes["axis"].value]

    def step(env, w):
        arr, s, n = env[g], int(env[start]), int(env[size])
        expect(0 <= s <= arr.shape[axis], op, f"the slice starts at {s}, outside the gl's "
               f"{arr.shape[axis]} elements along {'bdrc'[axis]}")
        idx = [slice(None)] * 4
        idx[axis] = slice(s, s + max(n, 0))  # numpy clamps at the end, as the GPU's bounds
        part = arr[tuple(idx)].view(GLSlice)
        root, origin = whole(arr)
        part.whole, part.origin = root, tuple(o + (s if i == axis else 0) for i, o in enumerate(origin))
        env[out] = part
    return step


@handler("tk.dim")
def _dim(c, op):
    g, out, axis = c.slot(op.operands[0]), c.result_slot(op), _AXES[_attr(op, "axis")]

    def step(env, w):
        env[out] = env[g].shape[axis]
    return step


# ---- Hopper warpgroup ops live in their own module; importing it registers them.
from . import hopper, warpgroup  # noqa: E402,F401
