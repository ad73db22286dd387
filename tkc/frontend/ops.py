"""The tile operations, ThunderKittens style (`from tkc.ops import *`).

Every op has TK's in-place form, whose first argument is the destination
handle (rebound to the result and returned), and a functional form returning
a new handle; the forms are told apart by argument count or type:

    exp(dst, src)             exp(src)
    add(dst, a, b)            add(a, b)            b: tile, f32 value or number
    fma(dst, x, y, z)         fma(x, y, z)         x * y + z; y, z: tile or number
    row_max(dst, src[, acc])  row_max(src, init=None)
                              sum(v), max(v), min(v)   a whole vector -> f32
    row_pick(x, j), x[:, j]   col_pick(x, i), x[i, :]  one column / row as a vector
                              roll(x, shift, axis)     numpy.roll, a constant shift
                              rsqrt(x), fma(x, y, z)   math on f32 scalars too
    where(t < 0.5, t, 0.0)    where(lt(a, b) & (c >= 1), x, y)     masks (no bool tiles)
    sub_row(dst, src, vec)    sub_row(src, vec)
    mma_ABt(d, a, b, c)       mma_ABt(a, b, c)
    swap_layout(dst, src)     swap_layout(src)     (also transpose)
    copy(dst, src)            src.to(dtype)

Initialisers zero/ones/neg_infty/pos_infty/fill(dst[, value])/iota(dst, axis)
always take the destination. Memory ops: load(dst, src, coords), store(dst, src, coords),
group_load(st, gl, coords, warps=N), group_store(gl, st, coords, warps=N).

Types are checked here where it is cheap, so mistakes point at the author's
line; tk-verify checks the rest.
"""
from __future__ import annotations

import builtins
import functools
import operator

from ..dialect import ops as tk
from ..dialect.types import RV, ST, SV
from .complex import partwise
from .tiles import GLHandle, Reg, Shared, sv
from .trace import current, emitting, fail
from .values import F32, Bool, Index, Scalar, as_f32, as_index

__all__ = [
    "zero", "ones", "neg_infty", "pos_infty", "fill", "iota", "rand",
    "copy", "exp", "exp2", "log", "log2", "abs", "relu", "neg",
    "sqrt", "rsqrt", "rcp", "sigmoid", "silu", "tanh", "erf", "gelu", "gelu_tanh", "fma",
    "add", "sub", "mul", "div", "max", "min", "sum",
    "lt", "le", "gt", "ge", "eq", "ne", "where",
    "row_max", "row_sum", "col_max", "col_sum", "row_pick", "col_pick", "roll",
    "add_row", "sub_row", "mul_row", "div_row", "add_col", "sub_col", "mul_col", "div_col",
    "mma_AB", "mma_ABt", "mma_AtB", "mma_AtBt",
    "swap_layout", "transpose",
    "load", "store", "load_split", "store_join", "group_load", "group_store", "subtile",
    "atomic_add",
]


# ------------------------------------------------------------ helpers

def _name(v) -> str:
    return v.describe() if isinstance(v, Reg) else type(v).__name__


def _reg(x, op: str, what: str = "operand", tile: bool | None = None) -> Reg:
    """x as a register handle (tile / vector if `tile` says so)."""
    if not isinstance(x, Reg) or (tile is True and not x.is_tile) or (tile is False and x.is_tile):
        kind = {True: "register tile (rt)", False: "register vector (rv)"}.get(tile, "register tile or vector")
        raise fail(f"{op}: {what} must be a {kind}, got {_name(x)}")
    return x


def _result(op: str, dst: Reg | None, view, make) -> Reg:
    """Run make() (-> ir.Value) and bind dst (or a new handle) to it."""
    if dst is None:
        dst = Reg(view)
    elif dst.view != view:
        raise fail(f"{op}: destination is {_name(dst)} but the result is "
                   f"{Reg(view).describe()}")
    with emitting():
        value = make()
    return dst.bind(value)


def _split(op: str, args, n: int) -> tuple[Reg | None, tuple]:
    """TK in-place form has n+1 args (dst first), functional form n."""
    if len(args) == n + 1:
        return _reg(args[0], op, "destination"), args[1:]
    if len(args) == n:
        return None, args
    raise fail(f"{op} takes {n} operands (functional form) or a destination and "
               f"{n} operands (in-place form), got {len(args)} arguments")


# ------------------------------------------------------------ initialisers

def _init(kind):
    def op(dst: Reg) -> Reg:
        _reg(dst, kind, "destination")
        return _result(kind, dst, dst.view, lambda: tk.init(kind, dst.view.mlir()))
    op.__name__ = kind
    op.__doc__ = f"Set every element of dst to {kind.replace('_', ' ')}; returns dst."
    return op


zero, ones, neg_infty, pos_infty = (_init(k) for k in tk.INITS)


def fill(dst: Reg, value) -> Reg:
    """Set every element of dst to value (a number or f32 value); returns dst."""
    _reg(dst, "fill", "destination")
    v = as_f32(value, "fill value")
    return _result("fill", dst, dst.view, lambda: tk.fill(dst.view.mlir(), v.ir()))


def iota(dst: Reg, axis: int = 0, start=None) -> Reg:
    """Each element's index along axis: the row (0) or column (1) of a tile,
    the position (0) in a vector, plus `start` (a number, index or f32 value);
    returns dst. iota(rt(f32, 64, 64), 1, start=k * 64) numbers global
    columns (cheaper in a loop than iota(...) + k * 64: see tk.iota)."""
    _reg(dst, "iota", "destination")
    axes = (0, 1) if dst.is_tile else (0,)
    if isinstance(axis, bool) or axis not in axes:
        raise fail(f"iota: axis must be {' or '.join(map(str, axes))} for {_name(dst)}, got {axis!r}")
    s = None if start is None else as_f32(start, "iota's start")
    return _result("iota", dst, dst.view, lambda: tk.iota(dst.view.mlir(), axis,
                                                          None if s is None else s.ir()))


def rand(dst: Reg, seed, offset, base, stride=0) -> Reg:
    """Uniform random numbers in [0, 1) (Philox4x32-10, docs/tile-ir.md): the
    elements of a tensor are numbered, and element (i, j) of dst is number
    base + i * stride + j (i of a vector: base + i), so the numbers do not
    depend on tiles, layouts or warps. seed and offset are i32 values as
    PyTorch's generator gives them (offset: how many numbers earlier calls
    used); base and stride multiples of 4. Dropout: where(rand(...) < p, 0.0, x / (1 - p))."""
    _reg(dst, "rand", "destination")
    vals = [as_index(x, f"rand's {what}") for x, what in
            ((seed, "seed"), (offset, "offset"), (base, "base"), (stride, "stride"))]
    return _result("rand", dst, dst.view, lambda: tk.rand(dst.view.mlir(), *(x.ir() for x in vals)))


# ------------------------------------------------------------ unary maps

def copy(dst: Reg, src: Reg) -> Reg:
    """dst = src converted to dst's dtype (same shape and layout)."""
    _reg(dst, "copy", "destination")
    _reg(src, "copy", "source")
    if dst.view.with_(dtype=src.dtype) != src.view:
        raise fail(f"copy: destination {_name(dst)} and source {_name(src)} may differ only "
                   "in dtype (use swap_layout to change layout)")
    if dst.dtype == src.dtype:
        # Value semantics: a same-type copy is the same value, so just rebind.
        return dst.bind(src.value())
    return _result("copy", dst, dst.view, lambda: tk.unary("copy", src.value(), dst.view.mlir()))


def _is_scalar(x) -> bool:
    """An f32 scalar operand: an F32 value or a Python number."""
    return isinstance(x, F32) or (isinstance(x, (int, float)) and not isinstance(x, bool))


def _scalar_op(make) -> F32:
    with emitting():
        return F32(make())


def _unary(name):
    def op(*args) -> Reg | F32:
        if len(args) == 1 and _is_scalar(args[0]):  # math on an f32 scalar
            x = as_f32(args[0], f"{name}'s operand")
            return _scalar_op(lambda: tk.unary(name, x.ir()))
        dst, (x,) = _split(name, args, 1)
        _reg(x, name)
        return _result(name, dst, x.view, lambda: tk.unary(name, x.value()))
    op.__name__ = name
    op.__doc__ = f"Elementwise {name}: {name}(dst, src) or {name}(src); on an f32 scalar, {name}(x)."
    return op


(_exp, _exp2, log, log2, _abs, relu, neg, sqrt, rsqrt, rcp, sigmoid, silu, tanh, erf, gelu,
 gelu_tanh) = (_unary(n) for n in tk.UNARY[1:])


def _exponential(name, base):
    def op(*args, fma: float | None = None) -> Reg | F32:
        if fma is None:
            return base(*args)
        if isinstance(fma, bool) or not isinstance(fma, (int, float)) or not 0 <= fma <= 1:
            raise fail(f"{name}: fma= is the share of the tile's elements computed on the FMA pipe, "
                       f"a number in [0, 1]; got {fma!r}")
        if fma == 0:                     # no share: every element on the MUFU, as without fma=
            return base(*args)
        dst, (x,) = _split(name, args, 1)
        if not (isinstance(x, Reg) and x.is_tile):
            raise fail(f"{name}: fma= applies to a register tile (rt), the share of its elements "
                       f"off the MUFU; got {_name(x)}")
        return _result(name, dst, x.view, lambda: tk.unary(name, x.value(), fma=fma))
    op.__name__ = name
    op.__doc__ = (f"Elementwise {name}: {name}(dst, src) or {name}(src); on an f32 scalar, {name}(x). "
                  f"fma=s (an rt): a share s of the elements is computed on the FMA pipe by a degree-3 "
                  f"polynomial (relative error under 1e-4), the rest by the MUFU's ex2, so that the two "
                  f"pipes share a softmax's exponentials (FlashAttention-4's emulation).")
    return op


exp, exp2 = _exponential("exp", _exp), _exponential("exp2", _exp2)


def abs(*args):
    """Elementwise abs of a tile; Python's abs for plain numbers."""
    if not builtins.any(isinstance(a, Reg) for a in args):
        return builtins.abs(*args)
    return _abs(*args)


# ------------------------------------------------------------ binary maps

def _operand2(name, x: Reg, y):
    """The second operand: a tile of x's type, or an f32 scalar."""
    if isinstance(y, Reg):
        if y.view != x.view:
            raise fail(f"{name}: operands must have the same type, got {_name(x)} and {_name(y)}")
        return y.value
    s = as_f32(y, f"{name}'s second operand")
    return s.ir


def _binary(name):
    def op(*args, **kw) -> Reg:
        ieee = kw.pop("ieee", False) if name == "div" else False
        if kw:
            raise fail(f"{name}: unknown keyword(s) {', '.join(kw)}")
        dst, (x, y) = _split(name, args, 2)
        if not isinstance(x, Reg) and isinstance(y, Reg) and name in ("add", "mul", "max", "min"):
            x, y = y, x   # commutative: scalar op tile
        _reg(x, name, "first operand")
        get_y = _operand2(name, x, y)
        return _result(name, dst, x.view, lambda: tk.binary(name, x.value(), get_y(), ieee=ieee))
    op.__name__ = name
    op.__doc__ = f"Elementwise {name}: {name}(dst, a, b) or {name}(a, b); b may be a scalar."
    return op


add, sub, mul, div, _max, _min = (_binary(n) for n in tk.BINARY)
div.__doc__ = ("Elementwise a / b: div(dst, a, b) or div(a, b); b may be a scalar. Fast "
               "(div.full.f32, 2 ulp) by default; ieee=True rounds correctly (div.rn.f32).")


def fma(*args) -> Reg | F32:
    """x * y + z rounded once: fma(dst, x, y, z) or fma(x, y, z); y and z may be
    scalars, and so may x (then all three are, and so is the result). Of a
    tile x, y and z may also be "col" vectors of its rows, broadcast along
    each row (fma(s, scale, -m): the softmax's exponent in one FFMA)."""
    if len(args) == 3 and builtins.all(_is_scalar(a) for a in args):
        x, y, z = (as_f32(a, "fma's operand") for a in args)
        return _scalar_op(lambda: tk.fma(x.ir(), y.ir(), z.ir()))
    dst, (x, y, z) = _split("fma", args, 3)
    _reg(x, "fma", "x")
    get_y, get_z = (_row_vector(x, v) or _operand2("fma", x, v) for v in (y, z))
    return _result("fma", dst, x.view, lambda: tk.fma(x.value(), get_y(), get_z()))


def _row_vector(x: Reg, v):
    """v's value getter when v is a "col" vector of x's rows (broadcast), else None."""
    if not (isinstance(v, Reg) and not v.is_tile and x.is_tile):
        return None
    if (v.kind, v.length) != ("col", x.rows) or x.layout not in ("row", "wide"):
        raise fail(f"fma: a vector operand of {_name(x)} is a \"col\" vector of its {x.rows} rows "
                   f"(broadcast along each row; row or wide layout), got {_name(v)}")
    return v.value


def _vec_reduce(name: str, v) -> F32:
    _reg(v, name, "operand", tile=False)
    return _scalar_op(lambda: tk.vec_reduce(f"vec_{name}", v.value()))


def max(*args, **kw):
    """Elementwise max of tiles; max(v) of one vector is its largest element (an
    f32); Python's max for anything else."""
    if kw or not builtins.any(isinstance(a, Reg) for a in args):
        return builtins.max(*args, **kw)
    return _vec_reduce("max", args[0]) if len(args) == 1 else _max(*args)


def min(*args, **kw):
    """Elementwise min of tiles; min(v) of one vector is its smallest element (an
    f32); Python's min for anything else."""
    if kw or not builtins.any(isinstance(a, Reg) for a in args):
        return builtins.min(*args, **kw)
    return _vec_reduce("min", args[0]) if len(args) == 1 else _min(*args)


def sum(*args, **kw):
    """sum(v): the sum of a vector's elements, an f32 (ThunderKittens' sum);
    sum(tiles): their elementwise sum, a + b + ..; Python's sum for anything
    else."""
    if len(args) == 1 and not kw:
        if isinstance(args[0], Reg):
            return _vec_reduce("sum", args[0])
        items = list(args[0])
        if items and builtins.any(isinstance(x, (Reg, Scalar)) for x in items):
            # Python's sum starts from 0: one add of 0.0 per element, which
            # LLVM keeps (-0.0 + 0.0 is +0.0)
            return functools.reduce(operator.add, items)
        return builtins.sum(items)
    return builtins.sum(*args, **kw)


# ------------------------------------------------------------ masks

class Mask:
    """A comparison of tiles (or a tile and a scalar), for where(): there are
    no boolean tiles, each where folds its mask into per-element selects.
    Masks combine with & | ~ (nested selects)."""

    def __init__(self, op: str, *parts):
        self.op, self.parts = op, parts

    def __and__(self, o):
        return Mask("and", self, _mask(o, "&"))

    def __or__(self, o):
        return Mask("or", self, _mask(o, "|"))

    def __invert__(self):
        return Mask("not", self)

    def __bool__(self):
        raise fail("a tile comparison has no Python truth value: use where(mask, x, y)")

    def select(self, x, y):
        if self.op == "and":
            return self.parts[0].select(self.parts[1].select(x, y), y)
        if self.op == "or":
            return self.parts[0].select(x, self.parts[1].select(x, y))
        if self.op == "not":
            return self.parts[0].select(y, x)
        a, b = self.parts
        tiles = [v for v in (x, y, a, b) if isinstance(v, Reg)]
        view = x.view if isinstance(x, Reg) else y.view if isinstance(y, Reg) else tiles[0].view.with_(dtype="f32")
        for v, what in ((a, "a"), (b, "b"), (x, "x"), (y, "y")):
            if isinstance(v, Reg) and v.view.with_(dtype=view.dtype) != view:
                raise fail(f"where: {_name(v)} does not match {Reg(view).describe()} "
                           "(every tile of a where has one shape and layout)")
            if isinstance(v, Reg) and what in "xy" and v.view != view:
                raise fail(f"where: x and y must have one type, got {_name(x)} and {_name(y)}")
        get = [(v.value if isinstance(v, Reg) else as_f32(v, f"where's {what}").ir)
               for v, what in ((a, "a"), (b, "b"), (x, "x"), (y, "y"))]
        return _result("where", None, view, lambda: tk.where(self.op, *(g() for g in get), view.mlir()))


def _mask(m, op: str) -> Mask:
    if not isinstance(m, Mask):
        raise fail(f"{op} combines masks (tile comparisons), got {type(m).__name__}")
    return m


def _compare(cmp: str):
    def op(a, b) -> Mask:
        if not builtins.any(isinstance(v, Reg) for v in (a, b)):
            raise fail(f"{cmp} compares tiles (or a tile and a scalar): for scalars use {cmp!r} "
                       "operators, which give a condition for tkc.if_")
        for v in (a, b):
            if not isinstance(v, Reg):
                as_f32(v, f"{cmp}'s operand")
        return Mask(cmp, a, b)
    op.__name__ = cmp
    op.__doc__ = f"The mask a {cmp} b, elementwise (a or b may be a scalar), for where()."
    return op


lt, le, gt, ge, eq, ne = (_compare(c) for c in tk.CMPS)


def where(mask: Mask, x, y) -> Reg:
    """x where mask holds, else y, elementwise (torch.where); x and y are tiles
    of one type or scalars. The result has x's (or y's) type; with two scalars,
    the compared tiles' shape in f32. With a scalar condition (a comparison of
    index or f32 values) it selects between two scalars: where(i < n, i, 0)."""
    if isinstance(mask, (Bool, bool)):
        return _select(mask, x, y)
    if not isinstance(mask, Mask):
        raise fail(f"where's first argument is a mask (a tile comparison such as t < 0.5 or "
                   f"lt(a, b)), got {_name(mask)}")
    return mask.select(x, y)


def _select(cond, x, y):
    """The scalar where: x if cond else y, two index values or two f32 values."""
    kind = F32 if any(isinstance(v, (F32, float)) for v in (x, y)) else Index
    a, b = kind.wrap(x), kind.wrap(y)
    if a is NotImplemented or b is NotImplemented:
        raise fail(f"where with a scalar condition selects between two scalars (index or f32 "
                   f"values, numbers), got {type(x).__name__} and {type(y).__name__}")
    if isinstance(cond, bool):
        return a if cond else b
    from . import emit
    c, av, bv = cond.ir(), a.ir(), b.ir()
    with emitting():
        return kind(emit.select(c, av, bv))


# ------------------------------------------------------------ reductions

def _reduce(name):
    by_row = name.startswith("row")

    def op(*args, init=None) -> Reg:
        if args and isinstance(args[0], Reg) and not args[0].is_tile:
            if len(args) not in (2, 3) or init is not None:
                raise fail(f"{name}(dst, src[, accum]) takes a destination vector, a tile "
                           "and optionally a vector to accumulate onto")
            dst, src, acc = args[0], args[1], (args[2] if len(args) == 3 else None)
        elif len(args) == 1:
            dst, src, acc = None, args[0], init
        else:
            raise fail(f"{name} takes (src, init=None) or (dst_vec, src[, accum])")
        _reg(src, name, "source", tile=True)
        layouts = ("row", "wide") if by_row else ("row",)
        if src.layout not in layouts:
            raise fail(f"{name}: the source tile must be in {' or '.join(layouts)} layout, got {_name(src)}")
        want = RV(src.dtype, src.rows if by_row else src.cols, "col" if by_row else "row")
        view = dst.view if dst is not None else acc.view if isinstance(acc, Reg) else want
        if (view.length, view.kind) != (want.length, want.kind):
            raise fail(f"{name}: result must be a \"{want.kind}\" vector of length {want.length} "
                       f"for {_name(src)}, got {Reg(view).describe()}")
        if acc is not None:
            _reg(acc, name, "accumulator", tile=False)
            if acc.view != view:
                raise fail(f"{name}: accumulator {_name(acc)} must have the result's type "
                           f"{Reg(view).describe()}")
        return _result(name, dst, view, lambda: tk.reduce(
            name, src.value(), view.mlir(), acc.value() if acc is not None else None))
    op.__name__ = name
    op.__doc__ = f"{name}(dst_vec, src[, accum]) or {name}(src, init=None)."
    return op


row_max, row_sum, col_max, col_sum = (_reduce(n) for n in tk.REDUCE)


def _pick(name):
    by_row = name == "row_pick"

    def op(x, index) -> Reg:
        _reg(x, name, "source", tile=True)
        if x.layout != "row":
            raise fail(f"{name}: the source tile must be in row layout, got {_name(x)}")
        i = as_index(index, f"{name}'s {'column' if by_row else 'row'}")
        n = x.cols if by_row else x.rows
        if i.const is not None and not 0 <= i.const < n:
            raise fail(f"{name}: {'column' if by_row else 'row'} {i.const} is outside {_name(x)}")
        view = RV(x.dtype, x.rows, "col") if by_row else RV(x.dtype, x.cols, "row")
        return _result(name, None, view, lambda: tk.pick(name, x.value(), i.ir()))
    op.__name__ = name
    op.__doc__ = (f"{name}(x, {'j' if by_row else 'i'}): "
                  + ("column j of x, one element per row (a \"col\" rv, as row_sum gives): x[:, j]"
                     if by_row else "row i of x, one element per column (a \"row\" rv, as col_sum "
                                    "gives): x[i, :]")
                  + "; the index may be known only at run time (e.g. from warpgroupid()).")
    return op


row_pick, col_pick = (_pick(n) for n in tk.PICK)


def roll(x, shift: int, axis: int) -> Reg:
    """numpy.roll(x, shift, axis) of a row-layout tile, a constant shift:
    element i along the axis (0: rows, 1: columns) is x's element i - shift,
    cyclically. roll(q, -d, 1)[:, j] = q[:, (j + d) % cols]: with q * roll(q,
    -d, 1), the products q_j q_(j+d) of one diagonal of q's outer product."""
    _reg(x, "roll", "source", tile=True)
    if x.layout != "row":
        raise fail(f"roll: the source tile must be in row layout, got {_name(x)}")
    if isinstance(axis, bool) or axis not in (0, 1):
        raise fail(f"roll: axis must be 0 or 1, got {axis!r}")
    if isinstance(shift, bool) or not isinstance(shift, int):
        raise fail(f"roll: shift must be a Python int (a constant), got {type(shift).__name__}")
    n = x.shape[axis]
    return _result("roll", None, x.view, lambda: tk.roll(x.value(), shift % n, axis))


# ------------------------------------------------------------ broadcasts

def _broadcast(name):
    per_row = name.endswith("_row")

    def op(*args) -> Reg:
        dst, (x, v) = _split(name, args, 2)
        _reg(x, name, "tile", tile=True)
        _reg(v, name, "vector", tile=False)
        layouts = ("row", "wide") if per_row else ("row",)
        if x.layout not in layouts:
            raise fail(f"{name}: the tile must be in {' or '.join(layouts)} layout, got {_name(x)}")
        kind, n = ("col", x.rows) if per_row else ("row", x.cols)
        if (v.kind, v.length) != (kind, n):
            raise fail(f"{name}: the vector must be a \"{kind}\" vector of length {n} for "
                       f"{_name(x)}, got {_name(v)}")
        return _result(name, dst, x.view, lambda: tk.broadcast(name, x.value(), v.value()))
    op.__name__ = name
    op.__doc__ = f"{name}(dst, src, vec) or {name}(src, vec)."
    return op


(add_row, sub_row, mul_row, div_row,
 add_col, sub_col, mul_col, div_col) = (_broadcast(n) for n in tk.BROADCAST)


# ------------------------------------------------------------ mma

# op -> (a layout, b layout, a's (M|K) axes, b's (K|N) axes) as index pairs
_MMA = {
    "mma_ab": ("row", "col", "MK", "KN"),
    "mma_abt": ("row", "row", "MK", "NK"),
    "mma_atb": ("col", "col", "KM", "KN"),
    "mma_atbt": ("col", "row", "KM", "NK"),
}


def _check_mma(py: str, name: str, a: Reg, b: Reg, c: Reg) -> None:
    _, _, sa, sb = _MMA[name]
    for x, what in ((a, "a"), (b, "b"), (c, "c")):
        _reg(x, py, what, tile=True)
    if a.dtype not in ("bf16", "f16") or b.dtype != a.dtype:
        raise fail(f"{py}: a and b must both be bf16 or both f16, got {_name(a)} and {_name(b)}")
    if c.dtype != "f32" or c.layout != "row":
        raise fail(f"{py}: c must be an f32 row-layout tile, got {_name(c)}")
    for x, what in ((a, "a"), (b, "b")):
        if x.layout == "wide":
            raise fail(f"{py}: {what} is {_name(x)}; the wide layout is for memory, the tensor "
                       "cores take row or col: load it in one of those")
    # a and b may come in either layout: tk-layout-selection makes them legal
    # (retyping their loads, or one swap_layout each), so authors need not.
    dims = {}
    for shape, axes in ((a.shape, sa), (b.shape, sb), (c.shape, "MN")):
        for size, axis in zip(shape, axes):
            if dims.setdefault(axis, size) != size:
                raise fail(f"{py}: shapes do not agree on {axis} ({dims[axis]} vs {size}): "
                           f"a {_name(a)}, b {_name(b)}, c {_name(c)}")


def _mma(py):
    name = py.lower()

    def op(*args) -> Reg:
        dst, (a, b, c) = _split(py, args, 3)
        _check_mma(py, name, a, b, c)
        return _result(py, dst, c.view, lambda: tk.mma(name, a.value(), b.value(), c.value()))
    op.__name__ = py
    op.__doc__ = f"{py}(d, a, b, c) or {py}(a, b, c): d = a @ b + c with the named transposes."
    return op


mma_AB, mma_ABt, mma_AtB, mma_AtBt = (_mma(n) for n in ("mma_AB", "mma_ABt", "mma_AtB", "mma_AtBt"))


# ------------------------------------------------------------ layout

def swap_layout(*args) -> Reg:
    """The same values in the other register layout: swap_layout(dst, src) or (src)."""
    dst, (x,) = _split("swap_layout", args, 1)
    _reg(x, "swap_layout", tile=True)
    if x.layout == "wide":
        raise fail(f"swap_layout: {_name(x)} is wide, which does not change layout in registers: "
                   "store it to shared memory and load it in the layout you need")
    view = x.view.with_(layout="col" if x.layout == "row" else "row")
    return _result("swap_layout", dst, view, lambda: tk.swap_layout(x.value()))


def transpose(*args) -> Reg:
    """x.T in the same layout: transpose(dst, src) or (src)."""
    dst, (x,) = _split("transpose", args, 1)
    _reg(x, "transpose", tile=True)
    if x.layout == "wide":
        raise fail(f"transpose: needs a row or col layout tile, got {_name(x)}")
    view = x.view.with_(rows=x.cols, cols=x.rows)
    return _result("transpose", dst, view, lambda: tk.transpose(x.value()))


# ------------------------------------------------------------ memory

def _coords(op: str, mem, coords) -> list:
    """Check the coordinate count for mem (gl: 4, st: 2, sv: 0 or 1); Index values."""
    if not isinstance(coords, (tuple, list)):
        coords = (coords,)
    if isinstance(mem, GLHandle):
        want, what = 4, "(b, d, r, c)"
    elif isinstance(mem.view, ST):
        want, what = 2, "(r, c)"
    else:
        want, what = (len(coords) if len(coords) in (0, 1) else 1), "(i) or ()"
    if len(coords) != want:
        raise fail(f"{op}: a {'gl' if want == 4 else 'st' if want == 2 else 'sv'} takes {want} "
                   f"coordinates {what}, got {len(coords)}")
    return [as_index(c, f"{op} coordinate") for c in coords]


def _check_mem(op: str, mem, reg: Reg, role: str) -> None:
    if not isinstance(mem, (GLHandle, Shared)):
        raise fail(f"{op}: {role} must be a gl argument, st or sv, got {_name(mem)}")
    if isinstance(mem, Shared) and isinstance(mem.view, ST) and not reg.is_tile:
        raise fail(f"{op}: an st is read and written with register tiles (rt), got {_name(reg)}")
    if isinstance(mem, Shared) and isinstance(mem.view, SV) and reg.is_tile:
        raise fail(f"{op}: an sv is read and written with register vectors (rv), got {_name(reg)}")
    if isinstance(mem, Shared) and isinstance(mem.view, ST):
        if mem.rows % reg.rows or mem.cols % reg.cols:
            raise fail(f"{op}: {_name(reg)} is not a subtile of {mem.view.text()}")
    if isinstance(mem, Shared) and isinstance(mem.view, SV) and mem.length % reg.length:
        raise fail(f"{op}: {_name(reg)} is not a piece of {mem.view.text()} (its length must "
                   "divide the sv's)")


def _index_values(idx):
    return [i.ir() for i in idx]


def load(dst: Reg, src, coords=(), fill=None, at=None) -> Reg:
    """dst = the tile of src at coords (in units of dst's shape); returns dst.
    fill=value makes a load from a gl ragged: elements past the gl's last row
    or column read as value (a number), so the gl's r and c need not be
    multiples of the tile (c only of the access width: docs/tile-ir.md).
    at=(b, d, row, col) instead of coords places the tile at an element (a
    shifted load: row may be negative); it needs fill.
    load(tkc.f32, src, at=(b, d, row, col), fill=v) reads one element of a gl
    as an f32 scalar (v outside the gl), e.g. a row's saved statistic;
    load(tkc.i32, src, ...) one element of an i32 gl as an index value (a
    cumulative sequence offset)."""
    if dst in ("f32", "i32") and not isinstance(dst, Reg):
        return _load_element(src, dst, at, fill)
    _reg(dst, "load", "destination")
    _check_mem("load", src, dst, "source")
    idx = _placed("load", src, coords, at, fill is not None, "fill=")
    if fill is not None:
        _ragged("load", src, "fill")
        _check_fill("load", fill)
    return _result("load", dst, dst.view, lambda: tk.load(
        dst.view.mlir(), src.value(), _index_values(idx), fill=fill, elements=at is not None))


def store(dst, src: Reg, coords=(), clip: bool = False, at=None, add: bool = False,
          deinterleave: bool = False, packed: bool = False) -> None:
    """Write src into the tile of dst at coords (the mirror of load). clip=True
    makes a store to a gl ragged: elements past its last row or column are
    not written. at=(b, d, row, col) places it at an element; it needs clip.
    add=True adds src into an f32 gl's values, atomically (red.global.add:
    many blocks accumulating one result, e.g. dQ), instead of writing them.
    An f32 scalar src writes one element (at=, clip=True), from lane 0.
    deinterleave=True (an f32 row-layout rt into an f32 st) writes each
    8-column group of src as its 4 even columns, then its 4 odd ones: by
    stmatrix, 16-byte rows that a 128B swizzle spreads over every bank, in
    half the instructions. For a tile that goes out whole to a buffer the
    kernel's caller owns (attention_bwd's dQ accumulator), which reads the
    columns back in that order. packed=True (with add, an f32 row-layout rt
    into an f32 gl) puts a lane's four values of each 16-column block and row
    (columns 2t, 2t + 1, 2t + 8, 2t + 9) at columns 4t .. 4t + 3 of that
    block: one 16-byte red.global.add.v4.f32 where the pairs take two (the
    L2's reductions bound such adds: attention_bwd's dQ at D = 256); clip
    then works on those groups of four."""
    if not isinstance(src, Reg) and _is_scalar(src):
        _store_element(dst, src, at, clip)
        return
    _reg(src, "store", "source")
    _check_mem("store", dst, src, "destination")
    idx = _placed("store", dst, coords, at, bool(clip), "clip=True")
    if clip:
        _ragged("store", dst, "clip")
    if add and not (isinstance(dst, GLHandle) and dst.dtype == "f32"):
        raise fail(f"store(add=True) adds into an f32 gl, got {_name(dst)}")
    if deinterleave and not (isinstance(dst, Shared) and isinstance(dst.view, ST) and dst.dtype == "f32"
                             and src.is_tile and src.view.dtype == "f32"):
        raise fail(f"store(deinterleave=True) writes an f32 rt into an f32 st, got "
                   f"{_name(src)} into {_name(dst)}")
    if packed and not (add and src.is_tile and src.view.dtype == "f32"):
        raise fail(f"store(packed=True) adds an f32 rt into an f32 gl (add=True), got {_name(src)}"
                   f"{'' if add else ' without add=True'}")
    with emitting():
        tk.store(dst.value(), src.value(), _index_values(idx), clip=bool(clip), elements=at is not None,
                 add=bool(add), deinterleave=bool(deinterleave), packed=bool(packed))


def atomic_add(dst, value: int = 1, at=None, after=()) -> Index:
    """Add `value` to one element of an i32 gl, once for the whole block, and
    return the element's old value to every warp (atom.add.acq_rel.gpu by
    the block's first thread; block-collective, at the kernel's top level).
    It comes after the block's earlier writes to the gls in `after` (a gl or
    a list): register stores, and TMA stores (tma.store, tma.store_add),
    whichever warp issues them, have completed. So the block whose add makes
    the count reach n reads every block's writes: the last of n blocks
    finishes their shared result (attention_bwd's dq_convert converts dQ so).
    Counts are not reset: the caller zeroes the gl."""
    if not isinstance(dst, GLHandle) or dst.dtype != "i32":
        raise fail(f"atomic_add adds into an i32 gl (a counter), got {_name(dst)}")
    if isinstance(value, bool) or not isinstance(value, int) or not -2**31 <= value < 2**31:
        raise fail(f"atomic_add: value must be an int (a 32-bit constant), got {value!r}")
    after = list(after) if isinstance(after, (list, tuple)) else [after]
    for g in after:
        if not isinstance(g, GLHandle):
            raise fail(f"atomic_add: after= takes gls (whose writes come first), got {_name(g)}")
    if at is None:
        raise fail("atomic_add: give the element as at=(b, d, row, col)")
    idx = _coords("atomic_add", dst, at)
    current().require_top_level("atomic_add", "the whole block takes part (one add, its old "
                                "value to every warp)")
    from . import emit  # MLIR: only while tracing
    scratch = sv("f32", 16)   # the old value passes through it (first word: its i32 bits)
    with emitting():
        return Index(emit.index_cast(tk.atomic_add(dst.value(), scratch.value(), _index_values(idx),
                                                   [g.value() for g in after], value)))


def load_split(dst: Reg, src, coords=(), fill=None, at=None) -> tuple[Reg, Reg]:
    """(even, odd): columns 2j and 2j + 1 of the gl or st tile twice dst's
    width (in units of that pair tile; at= in elements), as two tiles of dst's
    type: the interleaved pairs of complex numbers or of interleaved rotary,
    moved with the same wide accesses as a load. fill= as for load (gl only)."""
    _reg(dst, "load_split", "destination", tile=True)
    _split_memory("load_split", src, dst, "reads")
    idx = _placed("load_split", src, coords, at, fill is not None, "fill=")
    if fill is not None:
        _ragged("load_split", src, "fill")
        _check_fill("load_split", fill)
    with emitting():
        even, odd = tk.load_split(dst.view.mlir(), src.value(), _index_values(idx), fill=fill,
                                  elements=at is not None)
    return Reg(dst.view).bind(even), Reg(dst.view).bind(odd)


def store_join(dst, even: Reg, odd: Reg, coords=(), clip: bool = False, at=None) -> None:
    """The mirror of load_split: even and odd interleaved into the gl or st tile."""
    for x, what in ((even, "even"), (odd, "odd")):
        _reg(x, "store_join", what, tile=True)
    if even.view != odd.view:
        raise fail(f"store_join: even and odd must have one type, got {_name(even)} and {_name(odd)}")
    _split_memory("store_join", dst, even, "writes")
    idx = _placed("store_join", dst, coords, at, bool(clip), "clip=True")
    if clip:
        _ragged("store_join", dst, "clip")
    with emitting():
        tk.store_join(dst.value(), even.value(), odd.value(), _index_values(idx), clip=bool(clip),
                      elements=at is not None)


def _split_memory(op: str, mem, reg: Reg, verb: str) -> None:
    """load_split/store_join move a gl or st tile of twice reg's width."""
    if not (isinstance(mem, GLHandle) or isinstance(mem, Shared) and isinstance(mem.view, ST)):
        raise fail(f"{op} {verb} a gl or st, got {_name(mem)}")
    if isinstance(mem, Shared) and (mem.rows % reg.rows or mem.cols % (2 * reg.cols)):
        raise fail(f"{op}: pairs of {_name(reg)} are not a subtile of {mem.view.text()} (its shape "
                   f"must be a multiple of {reg.rows}x{2 * reg.cols})")


def _load_element(src, dtype, at, fill) -> F32 | Index:
    if not isinstance(src, GLHandle) or at is None or fill is None:
        raise fail(f"load(tkc.{dtype}, src, at=(b, d, row, col), fill=value) reads one element "
                   "of a gl: give a gl, at= and fill=")
    if (src.dtype == "i32") != (dtype == "i32"):
        raise fail(f"load(tkc.{dtype}, ...): one element of the {src.dtype} gl {src.name} is "
                   f"read as tkc.{'i32' if src.dtype == 'i32' else 'f32'}")
    from . import emit  # MLIR: only while tracing
    _check_fill("load", fill)
    if dtype == "i32" and fill != int(fill):
        raise fail(f"load(tkc.i32, ...): fill must be an integer, got {fill!r}")
    idx = _coords("load", src, at)
    if dtype == "f32":
        return _scalar_op(lambda: tk.load(emit.mlir_type("f32"), src.value(), _index_values(idx),
                                          fill=fill, elements=True))
    vals = _index_values(idx)
    with emitting():
        return Index(emit.index_cast(tk.load(emit.mlir_type("i32"), src.value(), vals,
                                             fill=float(fill), elements=True)))


def _store_element(dst, x, at, clip) -> None:
    if not isinstance(dst, GLHandle) or at is None or not clip:
        raise fail("store(dst, value, at=(b, d, row, col), clip=True) writes one element of a "
                   "gl: give a gl, at= and clip=True")
    idx = _coords("store", dst, at)
    v = as_f32(x, "store's value")
    with emitting():
        tk.store(dst.value(), v.ir(), _index_values(idx), clip=True, elements=True)


def _check_fill(op: str, fill) -> None:
    if isinstance(fill, bool) or not isinstance(fill, (int, float)):
        raise fail(f"{op}: fill must be a number, got {type(fill).__name__}")


def _placed(op: str, mem, coords, at, ragged: bool, needs: str) -> list:
    """The coordinates: tile units (coords) or elements (at=, a gl only, ragged)."""
    if at is None:
        return _coords(op, mem, coords)
    if coords != ():
        raise fail(f"{op}: give the place as coords (in tiles) or at= (in elements), not both")
    if not isinstance(mem, GLHandle):
        raise fail(f"{op}: at= (element coordinates) is for a gl, got {_name(mem)}")
    if not ragged:
        raise fail(f"{op}: at= places the tile at any element, past the gl's edges too: "
                   f"give {needs}")
    return _coords(op, mem, at)


def _ragged(op: str, mem, what: str) -> None:
    if not isinstance(mem, GLHandle):
        raise fail(f"{op}: {what} is for a gl (global memory has ragged edges; shared tiles "
                   f"do not), got {_name(mem)}")


def _group(op: str, shared, glh, coords, warps):
    if not isinstance(shared, Shared):
        raise fail(f"{op}: the shared side must be an st or sv, got {_name(shared)}")
    if not isinstance(glh, GLHandle):
        raise fail(f"{op}: the global side must be a gl argument, got {_name(glh)}")
    if shared.dtype != glh.dtype:
        raise fail(f"{op}: {shared.view.text()} and gl {glh.name} ({glh.dtype}) must have the "
                   "same dtype")
    kernel_warps = current().warps
    n = kernel_warps if warps is None else warps
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0 or kernel_warps % n:
        raise fail(f"{op}: warps={n!r} must be a positive divisor of the kernel's "
                   f"{kernel_warps} warps")
    return _coords(op, glh, coords), n


def group_load(dst: Shared, src: GLHandle, coords, warps: int | None = None) -> Shared:
    """Cooperative copy gl -> shared by groups of `warps` warps (default: all)."""
    idx, n = _group("group_load", dst, src, coords, warps)
    with emitting():
        tk.group_load(dst.value(), src.value(), _index_values(idx), n)
    return dst


def group_store(dst: GLHandle, src: Shared, coords, warps: int | None = None) -> None:
    """Cooperative copy shared -> gl by groups of `warps` warps (default: all)."""
    idx, n = _group("group_store", src, dst, coords, warps)
    with emitting():
        tk.group_store(dst.value(), src.value(), _index_values(idx), n)


# ------------------------------------------------------------ subtiles

def subtile(x, rows: int, cols: int, coords=(0, 0)):
    """The rows x cols part of st or rt `x` at coords (in units of that shape),
    ThunderKittens' subtile_inplace: a view, no data moves. An st view may sit
    at run-time coords (`subtile(a_s, 64, 64, (warpgroupid(), 0))`); an rt
    view needs int coords (registers are not indexed at run time)."""
    from ..passes.verify_block import subtile_problems
    if not isinstance(x, (Reg, Shared)) or not (isinstance(x, Shared) and isinstance(x.view, ST)
                                                or isinstance(x, Reg) and x.is_tile):
        raise fail(f"subtile: x must be an st or rt, got {_name(x)}")
    if not isinstance(coords, (tuple, list)) or len(coords) != 2:
        raise fail(f"subtile: coordinates are (row, col) in units of the subtile, got {coords!r}")
    view = x.view.with_(rows=rows, cols=cols)
    problems = subtile_problems(x.view, view)
    if problems:
        raise fail(problems[0])
    if isinstance(x, Reg):
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in coords):
            raise fail(f"subtile: a register tile's coordinates must be ints, got {coords!r} "
                       "(registers cannot be indexed at run time)")
        return _result("subtile", None, view, lambda: tk.subtile(
            view.mlir(), x.value(), *_index_values([as_index(c) for c in coords])))
    idx = [as_index(c, "subtile coordinate") for c in coords]
    for c, n in zip(idx, (x.rows // rows, x.cols // cols)):
        if c.const is not None and not 0 <= c.const < n:
            raise fail(f"subtile: coordinate {c.const} is outside the {n} parts of {x.view.text()}")
    vals = _index_values(idx)
    with emitting():
        return Shared(view, tk.subtile(view.mlir(), x.value(), *vals), current().scope)


# complex tiles (tkc.crt, tkc.cst, tkc.cgl): the data movers act on each part
zero, copy, load, store, group_load, group_store, subtile = (
    partwise(f) for f in (zero, copy, load, store, group_load, group_store, subtile))
