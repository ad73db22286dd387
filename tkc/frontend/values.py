"""Scalar values of a traced kernel: Index, F32 and Bool wrappers.

An Index is either a Python int known while tracing (folded: `k.r // 64` with
a static `k.r` stays an int) or an `index` SSA value. Arithmetic mixes both
and emits arith ops only when an operand is traced. Comparisons give a Bool
for `tkc.if_`. Python control flow on a traced value (`if`, `while`, `bool()`,
`range()`) is an error that points at tkc.if_ / tkc.range: tracing sees only
one path.
"""
from __future__ import annotations

import operator

from .trace import current, emitting, fail


class Traced:
    """Base of every traced value: no Python truth value, no int()."""

    _what = "a traced value"

    def __bool__(self):
        raise fail(f"{self._what} has no Python truth value while tracing: use "
                   "`with tkc.if_(cond):` instead of `if`/`while`/`and`/`or`")

    def __index__(self):
        raise fail(f"{self._what} is not a Python int while tracing: use tkc.range(...) "
                   "for loops and tile ops for indexing")

    __int__ = __index__

    def __float__(self):
        raise fail(f"{self._what} is not a Python float while tracing")


def _check_visible(scope, what: str) -> None:
    st = current()
    if scope is not None and not st.visible(scope):
        raise fail(f"{what} was defined inside the {scope.describe()} and is not "
                   "available after it (loops and ifs carry out register tiles/vectors and the "
                   "scalars that names hold as traced values before them: start a scalar as "
                   "one, e.g. m = tkc.f32(0.0), c = tkc.i32(0))")


class Scalar(Traced):
    """A traced scalar: a Python constant or an SSA value of one MLIR type."""

    _type_name = ""

    def __init__(self, value=None, const=None):
        self._v = value
        self.const = const
        self._scope = current().scope if value is not None else None

    @classmethod
    def wrap(cls, x):
        raise NotImplementedError

    def ir(self):
        """The SSA value (materialising a constant at the current point)."""
        if self._v is None:
            from . import emit
            with emitting():
                return emit.constant(self._type_name, self.const)
        current().flush()  # a pending tkc.if_ may still give this value its result (carry.py)
        _check_visible(self._scope, self._what)
        return self._v

    def _binary(self, other, pyop, emit_name, reverse=False):
        other = self.wrap(other) if not isinstance(other, type(self)) else other
        if other is NotImplemented:
            return NotImplemented
        a, b = (other, self) if reverse else (self, other)
        if a.const is not None and b.const is not None:
            return type(self)(const=pyop(a.const, b.const))
        simple = _identity(emit_name, a, b)
        if simple is not None:
            return simple
        from . import emit
        av, bv = a.ir(), b.ir()
        with emitting():
            return type(self)(emit.binary(emit_name, av, bv))

    def _compare(self, other, pred):
        other = self.wrap(other) if not isinstance(other, type(self)) else other
        if other is NotImplemented:
            return NotImplemented
        if self.const is not None and other.const is not None:
            return _PYCMP[pred](self.const, other.const)
        from . import emit
        av, bv = self.ir(), other.ir()
        with emitting():
            return Bool(emit.compare(self._type_name, pred, av, bv))

    def __eq__(self, o):
        return self._compare(o, "eq")

    def __ne__(self, o):
        return self._compare(o, "ne")

    def __lt__(self, o):
        return self._compare(o, "lt")

    def __le__(self, o):
        return self._compare(o, "le")

    def __gt__(self, o):
        return self._compare(o, "gt")

    def __ge__(self, o):
        return self._compare(o, "ge")

    __hash__ = object.__hash__

    def __repr__(self):
        return f"{type(self).__name__}({self.const if self._v is None else self._v})"


_PYCMP = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
          "le": operator.le, "gt": operator.gt, "ge": operator.ge}


def _identity(name, a, b):
    """x+0, x-0, x*1, x//1 fold to x (keeps index math readable)."""
    if b.const == 0 and name in ("add", "sub"):
        return a
    if a.const == 0 and name == "add":
        return b
    if b.const == 1 and name in ("mul", "floordiv", "div"):
        return a
    if a.const == 1 and name == "mul":
        return b
    return None


def _operators(*ops):
    """`__add__`/`__radd__`-style methods for (python name, operator, emitted op
    name); a method the class defines itself is kept."""
    def install(cls):
        for py, pyop, name in ops:
            for dunder, rev in ((f"__{py}__", False), (f"__r{py}__", True)):
                if dunder not in cls.__dict__:
                    setattr(cls, dunder, lambda self, o, f=pyop, n=name, r=rev:
                            self._binary(o, f, n, reverse=r))
        return cls
    return install


_ADD_SUB_MUL = (("add", operator.add, "add"), ("sub", operator.sub, "sub"),
                ("mul", operator.mul, "mul"))


@_operators(*_ADD_SUB_MUL, ("floordiv", operator.floordiv, "floordiv"),
            ("mod", operator.mod, "mod"))
class Index(Scalar):
    """An `index` value: block/warp ids, gl dims, loop variables, coordinates."""

    _what = "an index value"
    _type_name = "index"

    @classmethod
    def wrap(cls, x):
        if isinstance(x, Index):
            return x
        if isinstance(x, bool) or not isinstance(x, int):
            return NotImplemented
        return Index(const=x)

    def __floordiv__(self, o):
        out = self._binary(o, operator.floordiv, "floordiv")
        src = getattr(self, "gl_dim", None)
        if src and isinstance(o, int) and not isinstance(o, bool) and o > 1 and out is not self:
            out.whole_tiles = (src, o)  # counts whole tiles of a gl dim (see tkc.range)
        return out

    def __truediv__(self, o):
        raise fail("index values divide with `//` (true division `/` is for f32 values: "
                   "convert with .to(tkc.f32) first)")

    def __neg__(self):
        return Index(const=0) - self

    def _binary(self, other, pyop, emit_name, reverse=False):
        if isinstance(other, (float, F32)) and emit_name in ("add", "sub", "mul", "min", "max"):
            return F32.wrap(self)._binary(other, pyop, emit_name, reverse)  # index op f32 is f32
        return super()._binary(other, pyop, emit_name, reverse)

    def _compare(self, other, pred):
        if isinstance(other, (float, F32)):   # compared as f32 values, as Python compares 2 < 2.5
            return F32.wrap(self)._compare(other, pred)
        return super()._compare(other, pred)

    def to(self, dtype) -> "F32":
        """This index as an f32 scalar (exact below 2^24): i.to(tkc.f32)."""
        if dtype != "f32":
            raise fail(f"an index value converts to f32 (tkc.f32), not {dtype!r}")
        if self._v is None:
            return F32(const=float(self.const))
        from . import emit
        v = self.ir()
        with emitting():
            return F32(emit.index_to_f32(v))

    def min(self, o):
        return self._binary(o, min, "min")

    def max(self, o):
        return self._binary(o, max, "max")


def as_index(x, what: str = "coordinate") -> Index:
    """An Index from an Index or a Python int, else a located error."""
    i = Index.wrap(x)
    if i is NotImplemented:
        raise fail(f"{what} must be an int or an index value (block_idx, warpid(), a gl dim, "
                   f"a tkc.range variable), got {type(x).__name__}")
    return i


@_operators(*_ADD_SUB_MUL, ("truediv", operator.truediv, "div"))
class F32(Scalar):
    """An f32 scalar: kernel arguments and values derived from them."""

    _what = "an f32 value"
    _type_name = "f32"

    @classmethod
    def wrap(cls, x):
        if isinstance(x, F32):
            return x
        if isinstance(x, Index):
            return x.to("f32")  # an index where an f32 is wanted converts (like int -> float)
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return NotImplemented
        return F32(const=float(x))

    def __neg__(self):
        return F32(const=-0.0) - self if self.const is None else F32(const=-self.const)

    def min(self, o):
        return self._binary(o, _fmin, "min")

    def max(self, o):
        return self._binary(o, _fmax, "max")

    def to(self, dtype) -> "Index":
        """This value as an index, rounded toward zero (like Python's int()): x.to(tkc.i32)."""
        if dtype != "i32":
            raise fail(f"an f32 value converts to an index with tkc.i32, not {dtype!r}")
        if self._v is None:
            return Index(const=int(self.const))
        from . import emit
        v = self.ir()
        with emitting():
            return Index(emit.f32_to_index(v))


def _fmax(a, b):
    """max as maxnumf folds it: a NaN gives the other operand."""
    return b if a != a else a if b != b else max(a, b)


def _fmin(a, b):
    return b if a != a else a if b != b else min(a, b)


def as_f32(x, what: str = "scalar") -> F32:
    f = F32.wrap(x)
    if f is NotImplemented:
        raise fail(f"{what} must be a Python number or an f32 value, got {type(x).__name__}")
    return f


class Bool(Traced):
    """An i1 condition for tkc.if_; combine with & | ~."""

    _what = "a traced condition"

    def __init__(self, value):
        self._v = value
        self._scope = current().scope

    def ir(self):
        current().flush()
        _check_visible(self._scope, self._what)
        return self._v

    def _logic(self, o, name):
        if isinstance(o, bool):
            o = const_bool(o)
        if not isinstance(o, Bool):
            return NotImplemented
        from . import emit
        a, b = self.ir(), o.ir()
        with emitting():
            return Bool(emit.logic(name, a, b))

    def __and__(self, o):
        return self._logic(o, "and")

    __rand__ = __and__

    def __or__(self, o):
        return self._logic(o, "or")

    __ror__ = __or__

    def __invert__(self):
        return self._logic(True, "xor")


def const_bool(b: bool) -> Bool:
    from . import emit
    with emitting():
        return Bool(emit.constant("i1", int(b)))
