"""The elementwise tile ops: initialisers, unary and binary maps, fma, the
whole-vector max/min/sum, and masks (tile comparisons) with where.

Each output element depends on the operands' elements at its own position
(or, for max(v)/min(v)/sum(v), a vector folds to one f32). zero and copy are
extended to complex tiles in ops.py, which is where authors get them.
"""
from __future__ import annotations

import builtins
import functools
import operator

from ..dialect import ops as tk
from .operands import (_float_only, _int_scalar, _is_int, _is_scalar, _name, _reg, _result, _scalar_for,
                       _scalar_op, _split)
from .tiles import Reg
from .trace import emitting, fail
from .values import F32, Bool, Index, Scalar, as_f32, as_index


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
    get = _scalar_for(dst, value, "fill value")
    return _result("fill", dst, dst.view, lambda: tk.fill(dst.view.mlir(), get()))


def iota(dst: Reg, axis: int = 0, start=None) -> Reg:
    """Each element's index along axis: the row (0) or column (1) of a tile,
    the position (0) in a vector, plus `start` (a number, index or f32 value);
    returns dst. iota(rt(f32, 64, 64), 1, start=k * 64) numbers global
    columns (cheaper in a loop than iota(...) + k * 64: see tk.iota)."""
    _reg(dst, "iota", "destination")
    axes = (0, 1) if dst.is_tile else (0,)
    if isinstance(axis, bool) or axis not in axes:
        raise fail(f"iota: axis must be {' or '.join(map(str, axes))} for {_name(dst)}, got {axis!r}")
    s = None if start is None else _scalar_for(dst, start, "iota's start")
    return _result("iota", dst, dst.view, lambda: tk.iota(dst.view.mlir(), axis,
                                                          None if s is None else s()))


def rand(dst: Reg, seed, offset, base, stride=0) -> Reg:
    """Uniform random numbers in [0, 1) (Philox4x32-10, docs/tile-ir.md): the
    elements of a tensor are numbered, and element (i, j) of dst is number
    base + i * stride + j (i of a vector: base + i), so the numbers do not
    depend on tiles, layouts or warps. seed and offset are i32 values as
    PyTorch's generator gives them (offset: how many numbers earlier calls
    used); base and stride multiples of 4. Dropout: where(rand(...) < p, 0.0, x / (1 - p))."""
    _reg(dst, "rand", "destination")
    _float_only("rand", dst)
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



def _unary(name):
    def op(*args) -> Reg | F32:
        if len(args) == 1 and _is_scalar(args[0]):  # math on an f32 scalar
            x = as_f32(args[0], f"{name}'s operand")
            return _scalar_op(lambda: tk.unary(name, x.ir()))
        dst, (x,) = _split(name, args, 1)
        _reg(x, name)
        if name not in INT_UNARY:
            _float_only(name, x)
        return _result(name, dst, x.view, lambda: tk.unary(name, x.value()))
    op.__name__ = name
    op.__doc__ = f"Elementwise {name}: {name}(dst, src) or {name}(src); on an f32 scalar, {name}(x)."
    return op


INT_UNARY = ("abs", "relu", "neg")   # the maps an i32 tile has (exact integer results)

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
        _float_only(name, x)
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
    """The second operand: a tile of x's type, or a scalar (f32; i32 beside an i32 tile)."""
    if isinstance(y, Reg):
        if y.view != x.view:
            raise fail(f"{name}: operands must have the same type, got {_name(x)} and {_name(y)}")
        return y.value
    return _scalar_for(x, y, f"{name}'s second operand")


def _binary(name):
    def op(*args, **kw) -> Reg:
        ieee = kw.pop("ieee", False) if name == "div" else False
        if kw:
            raise fail(f"{name}: unknown keyword(s) {', '.join(kw)}")
        dst, (x, y) = _split(name, args, 2)
        if not isinstance(x, Reg) and isinstance(y, Reg) and name in ("add", "mul", "max", "min"):
            x, y = y, x   # commutative: scalar op tile
        _reg(x, name, "first operand")
        if name == "div":   # integers have no division here: a float quotient is what kernels want
            _float_only(name, x)
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
    _float_only("fma", x)
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


def _vec_reduce(name: str, v) -> F32 | Index:
    """The vector's sum, max or min: an f32, or of an i32 vector an index value."""
    _reg(v, name, "operand", tile=False)
    if _is_int(v):
        from . import emit
        value = v.value()
        with emitting():
            return Index(emit.index_cast(tk.vec_reduce(f"vec_{name}", value)))
    return _scalar_op(lambda: tk.vec_reduce(f"vec_{name}", v.value()))


def max(*args, **kw):
    """Elementwise max of tiles; max(v) of one vector is its largest element (an
    f32); of scalars (index or f32 values, numbers), the largest (an F32 if one
    is); Python's max for anything else."""
    if kw or not builtins.any(isinstance(a, Reg) for a in args):
        return _scalar_extreme("max", args) if _traced_scalars(args, kw) else builtins.max(*args, **kw)
    return _vec_reduce("max", args[0]) if len(args) == 1 else _max(*args)


def min(*args, **kw):
    """Elementwise min of tiles; min(v) of one vector is its smallest element (an
    f32); of scalars, the smallest; Python's min for anything else."""
    if kw or not builtins.any(isinstance(a, Reg) for a in args):
        return _scalar_extreme("min", args) if _traced_scalars(args, kw) else builtins.min(*args, **kw)
    return _vec_reduce("min", args[0]) if len(args) == 1 else _min(*args)


def _traced_scalars(args, kw) -> bool:
    """max(a, b, ...) of scalars, one of them traced (Python's max would
    compare them: a Bool has no truth value)."""
    return not kw and len(args) >= 2 and builtins.any(isinstance(a, Scalar) for a in args)


def _scalar_extreme(name: str, args):
    def pair(a, b):
        s, o = (a, b) if isinstance(a, Scalar) else (b, a)   # max and min commute
        if not isinstance(s, Scalar):
            return getattr(builtins, name)(a, b)
        r = getattr(s, name)(o) if isinstance(o, (Scalar, int, float)) and not isinstance(o, bool) \
            else NotImplemented
        if r is NotImplemented:
            raise fail(f"{name} of scalars takes index or f32 values and numbers, got "
                       f"{type(a).__name__} and {type(b).__name__}")
        return r
    return functools.reduce(pair, args)


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
        ints = _is_int(a) or _is_int(b)   # the comparison is of i32 tiles (else in f32)
        if ints and not all(_is_int(v) or not isinstance(v, Reg) for v in (a, b)):
            raise fail(f"where: an i32 tile compares with an i32 tile or an int, got {_name(a)} and "
                       f"{_name(b)} (convert one with .to())")
        get = [v.value if isinstance(v, Reg)
               else _int_scalar(v, f"where's {what}") if (ints if what in "ab" else view.dtype == "i32")
               else as_f32(v, f"where's {what}").ir
               for v, what in ((a, "a"), (b, "b"), (x, "x"), (y, "y"))]
        return _result("where", None, view, lambda: tk.where(self.op, *(g() for g in get), view.mlir()))


def _mask(m, op: str) -> Mask:
    if not isinstance(m, Mask):
        raise fail(f"{op} combines masks (tile comparisons), got {type(m).__name__}")
    return m


def _compare(cmp: str):
    def op(a, b) -> Mask:
        if not builtins.any(isinstance(v, Reg) for v in (a, b)):
            return _scalar_compare(cmp, a, b)
        tile = a if isinstance(a, Reg) else b
        for v in (a, b):
            if not isinstance(v, Reg):
                _int_scalar(v, f"{cmp}'s operand") if _is_int(tile) else as_f32(v, f"{cmp}'s operand")
            elif _is_int(v) != _is_int(tile):
                raise fail(f"{cmp}: an i32 tile compares with an i32 tile or an int, got {_name(a)} and "
                           f"{_name(b)} (convert one with .to())")
        return Mask(cmp, a, b)
    op.__name__ = cmp
    op.__doc__ = f"The mask a {cmp} b, elementwise (a or b may be a scalar), for where()."
    return op


lt, le, gt, ge, eq, ne = (_compare(c) for c in tk.CMPS)


def _scalar_compare(cmp: str, a, b):
    """lt(a, b) of two scalars: a < b, a Bool (a Python bool for two numbers)."""
    for v in (a, b):
        if not isinstance(v, (Scalar, int, float)) or isinstance(v, bool):
            raise fail(f"{cmp} compares tiles, a tile and a scalar, or two scalars (index or f32 "
                       f"values, numbers), got {type(a).__name__} and {type(b).__name__}")
    return getattr(operator, cmp)(a, b)


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
