"""Python operators on register handles: x + y, -x, 2.0 / x, t < 0.5, x == y,
x[:, j], x.to(bf16): the functional forms of the tile ops.

They are methods of Reg (tiles.py), but the ops are built on Reg, so tiles.py
cannot import the ops without an import cycle. They are defined here instead
and installed on Reg when this module is imported, which ops.py does, and
tkc.frontend imports ops.py before anything can trace a kernel.
"""
from __future__ import annotations

from .axes import col_pick, row_pick
from .elementwise import add, copy, div, eq, fill, ge, gt, le, lt, mul, ne, neg, sub
from .operands import _float_only
from .tiles import Reg, reg_dtype
from .trace import fail
from .values import F32, Index


class _RegOperators:
    """Reg's methods that call the ops (installed on Reg below)."""

    def to(self, dtype) -> "Reg":
        """A copy converted to dtype (functional form of copy); float -> i32
        truncates toward zero (as C), saturating, NaN -> 0."""
        return copy(Reg(self.view.with_(dtype=reg_dtype(dtype))), self)

    def __getitem__(self, key):
        """x[:, j]: column j, one value per row (row_pick); x[i, :]: row i (col_pick)."""
        whole = lambda k: isinstance(k, slice) and k == slice(None)  # noqa: E731
        if self.is_tile and isinstance(key, tuple) and len(key) == 2:
            if whole(key[0]) and not isinstance(key[1], slice):
                return row_pick(self, key[1])
            if whole(key[1]) and not isinstance(key[0], slice):
                return col_pick(self, key[0])
        raise fail(f"a register tile is indexed as x[:, j] (a column) or x[i, :] (a row), "
                   f"got {self.describe()}[{key!r}]")

    # -- operators: the functional forms of add/sub/mul/div/neg
    def __add__(self, o):
        return add(self, o)

    def __radd__(self, o):
        return add(self, o)

    def __sub__(self, o):
        return sub(self, o)

    def __rsub__(self, o):
        return add(neg(self), o)

    def __mul__(self, o):
        return mul(self, o)

    def __rmul__(self, o):
        return mul(self, o)

    def __truediv__(self, o):
        return div(self, o)

    # -- comparisons: masks for where(), == and != included (a tile is hashed
    # by identity; a mask has no truth value, so `t == 1.0` can never quietly
    # become False)
    def __eq__(self, o):
        if not _comparable(o):  # None, a dtype name, ...: plain identity
            return NotImplemented
        return eq(self, o)

    def __ne__(self, o):
        if not _comparable(o):
            return NotImplemented
        return ne(self, o)

    __hash__ = object.__hash__

    def __lt__(self, o):
        return lt(self, o)

    def __le__(self, o):
        return le(self, o)

    def __gt__(self, o):
        return gt(self, o)

    def __ge__(self, o):
        return ge(self, o)

    def __rtruediv__(self, o):
        _float_only("div", self)
        return div(fill(Reg(self.view), o), self)

    def __neg__(self):
        return neg(self)


def _comparable(o) -> bool:
    """What a tile compares with elementwise: a tile, a number, an f32 or index value."""
    return isinstance(o, (Reg, int, float, F32, Index))


for _name in ("to", "__getitem__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
              "__rmul__", "__truediv__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
              "__ge__", "__rtruediv__", "__neg__"):
    _method = vars(_RegOperators)[_name]
    _method.__qualname__ = f"Reg.{_name}"   # help(Reg) and tracebacks name Reg
    setattr(Reg, _name, _method)
del _name, _method
