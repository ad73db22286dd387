"""Typed Python views of the tk types.

An IRDL type is an opaque `ir.Type` in Python, so each tk type has a frozen
dataclass here that builds it from its parameters (`.mlir(ctx)`) and reads
them back (`view(t)`). Views are plain values: compare, hash, print them.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ..dtypes import from_mlir, mlir_name

DYN = -1  # a runtime dim of a gl

LAYOUTS = ("row", "col", "wide")
VEC_KINDS = ("row", "col", "flat")
MMA_LAYOUTS = ("row", "col")  # the tensor-core fragment layouts; "wide" is for memory
SWIZZLES = ("auto", "none", "32b", "64b", "128b")
UNIFORM_IDS = ("warpgroup", "warp")  # a kernel's tk.uniform_ids (tkc.kernel's uniform_ids)


def _i(n: int) -> str:
    return f"{int(n)} : i64"


@dataclass(frozen=True)
class RT:
    """Register tile rt<dtype, rows, cols, layout>."""
    dtype: str
    rows: int
    cols: int
    layout: str = "row"

    def text(self) -> str:
        return f'!tk.rt<{mlir_name(self.dtype)}, {_i(self.rows)}, {_i(self.cols)}, "{self.layout}">'

    @property
    def shape(self):
        return (self.rows, self.cols)

    def with_(self, **kw) -> "RT":
        return RT(**{**self.__dict__, **kw})

    def col_vec(self, dtype: str | None = None) -> "RV":
        """One element per row (ThunderKittens' col_vec): row_max's result."""
        return RV(dtype or self.dtype, self.rows, "col")

    def row_vec(self, dtype: str | None = None) -> "RV":
        """One element per column (row_vec): col_max's result."""
        return RV(dtype or self.dtype, self.cols, "row")

    def mlir(self, ctx=None):
        return _parse(self.text(), ctx)


@dataclass(frozen=True)
class RV:
    """Register vector rv<dtype, length, kind>; kind "col" = one per tile row,
    "row" = one per tile column, "flat" = a vector on its own (no replication)."""
    dtype: str
    length: int
    kind: str = "col"

    def text(self) -> str:
        return f'!tk.rv<{mlir_name(self.dtype)}, {_i(self.length)}, "{self.kind}">'

    @property
    def shape(self):
        return (self.length,)

    def with_(self, **kw) -> "RV":
        return RV(**{**self.__dict__, **kw})

    def mlir(self, ctx=None):
        return _parse(self.text(), ctx)


@dataclass(frozen=True)
class ST:
    """Shared tile st<dtype, rows, cols, swizzle>."""
    dtype: str
    rows: int
    cols: int
    swizzle: str = "auto"

    def text(self) -> str:
        return f'!tk.st<{mlir_name(self.dtype)}, {_i(self.rows)}, {_i(self.cols)}, "{self.swizzle}">'

    @property
    def shape(self):
        return (self.rows, self.cols)

    def with_(self, **kw) -> "ST":
        return ST(**{**self.__dict__, **kw})

    def mlir(self, ctx=None):
        return _parse(self.text(), ctx)


@dataclass(frozen=True)
class SV:
    """Shared vector sv<dtype, length>."""
    dtype: str
    length: int

    def text(self) -> str:
        return f"!tk.sv<{mlir_name(self.dtype)}, {_i(self.length)}>"

    @property
    def shape(self):
        return (self.length,)

    # as a TMA box (tma.load of an sv): one row of `length` elements
    rows = property(lambda self: 1)
    cols = property(lambda self: self.length)

    def mlir(self, ctx=None):
        return _parse(self.text(), ctx)


@dataclass(frozen=True)
class GL:
    """Global layout gl<dtype, b, d, r, c>; a dim is DYN (-1) when runtime."""
    dtype: str
    b: int
    d: int
    r: int
    c: int

    def text(self) -> str:
        return f"!tk.gl<{mlir_name(self.dtype)}, {_i(self.b)}, {_i(self.d)}, {_i(self.r)}, {_i(self.c)}>"

    @property
    def dims(self):
        return (self.b, self.d, self.r, self.c)

    def mlir(self, ctx=None):
        return _parse(self.text(), ctx)


@dataclass(frozen=True)
class Barrier:
    """An mbarrier in shared memory."""

    def text(self) -> str:
        return "!tk.barrier"

    def mlir(self, ctx=None):
        return _parse(self.text(), ctx)


_PATTERNS = {
    "rt": (re.compile(r'!tk\.rt<(\w+), (-?\d+) : i64, (-?\d+) : i64, "(\w+)">'),
           lambda m: RT(from_mlir(m[1]), int(m[2]), int(m[3]), m[4])),
    "rv": (re.compile(r'!tk\.rv<(\w+), (-?\d+) : i64, "(\w+)">'),
           lambda m: RV(from_mlir(m[1]), int(m[2]), m[3])),
    "st": (re.compile(r'!tk\.st<(\w+), (-?\d+) : i64, (-?\d+) : i64, "(\w+)">'),
           lambda m: ST(from_mlir(m[1]), int(m[2]), int(m[3]), m[4])),
    "sv": (re.compile(r"!tk\.sv<(\w+), (-?\d+) : i64>"),
           lambda m: SV(from_mlir(m[1]), int(m[2]))),
    "gl": (re.compile(r"!tk\.gl<(\w+), (-?\d+) : i64, (-?\d+) : i64, (-?\d+) : i64, (-?\d+) : i64>"),
           lambda m: GL(from_mlir(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]))),
    "barrier": (re.compile(r"!tk\.barrier"), lambda m: Barrier()),
}

TileType = RT | RV | ST | SV | GL | Barrier


_VIEWS: dict = {}  # ir.Type -> its view
_VIEWS_MAX = 4096


def view(t) -> TileType | None:
    """The Python view of a tk type (an ir.Type or its text), None otherwise.

    Remembered per ir.Type: printing a type is most of the cost, and passes and
    the interpreter ask for the same few types thousands of times a kernel.
    An ir.Type compares and hashes as its uniqued storage in its Context (and
    the key keeps that Context alive), so an entry is never another type's;
    the dict is emptied when it grows past _VIEWS_MAX (types of many contexts)."""
    if not isinstance(t, _ir_type()):  # text, or anything printing as a type
        return _view_text(str(t))
    found = _VIEWS.get(t, _VIEWS)
    if found is not _VIEWS:
        return found
    v = _view_text(str(t))
    if len(_VIEWS) >= _VIEWS_MAX:
        _VIEWS.clear()
    _VIEWS[t] = v
    return v


@functools.cache
def _ir_type():
    from mlir import ir
    return ir.Type


def _view_text(s: str) -> TileType | None:
    if not s.startswith("!tk."):
        return None
    kind = s[4:].split("<", 1)[0]
    pat = _PATTERNS.get(kind)
    m = pat[0].fullmatch(s) if pat else None
    if m is None:
        raise ValueError(f"malformed tk type {s}")
    return pat[1](m)


def _parse(text: str, ctx=None):
    from mlir import ir
    return ir.Type.parse(text, ctx) if ctx is not None else ir.Type.parse(text)


def safe_view(value):
    """The view of a value's type; None when it is not a (well-formed) tk type."""
    try:
        return view(value.type)
    except ValueError:  # reported where the value is defined
        return None
