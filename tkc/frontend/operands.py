"""What every tile op does with its operands: check them (located errors that
name the author's line) and bind the result to a register handle.

Shared by the ops' modules (elementwise, axes, memory); the public ops are
gathered in ops.py.
"""
from __future__ import annotations

from ..dtypes import I32_MAX, I32_MIN
from .tiles import Reg
from .trace import emitting, fail
from .values import F32, Index, as_f32


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



def _is_scalar(x) -> bool:
    """An f32 scalar operand: an F32 value or a Python number."""
    return isinstance(x, F32) or (isinstance(x, (int, float)) and not isinstance(x, bool))


def _scalar_op(make) -> F32:
    with emitting():
        return F32(make())


# ------------------------------------------------------------ integer tiles

def _is_int(x) -> bool:
    """An i32 register tile or vector."""
    return isinstance(x, Reg) and x.dtype == "i32"


def _float_only(op: str, *xs) -> None:
    """Refuse an i32 tile where op computes on floats (exp, div, mma, ...)."""
    for x in xs:
        if _is_int(x):
            raise fail(f"{op} computes on float tiles, got {_name(x)}, an integer tile: convert "
                       f"it with .to(tkc.f32) first")


def _int_scalar(x, what: str):
    """A getter of the i32 Value of x, an int or index value beside an i32
    tile (an index wraps to its low 32 bits, as a C cast; an int must fit)."""
    if isinstance(x, bool) or not isinstance(x, (int, Index)):
        raise fail(f"{what} must be an int or an index value beside an i32 tile, got "
                   f"{type(x).__name__} (convert the tile with .to(tkc.f32) to mix it with floats)")
    const = x if isinstance(x, int) else x.const
    if const is not None and not I32_MIN <= const <= I32_MAX:
        raise fail(f"{what} {const} does not fit an i32")
    from . import emit  # MLIR: only while tracing

    def get():
        if const is not None:
            return emit.constant("i32", const)
        v = x.ir()
        with emitting():
            return emit.index_to_i32(v)
    return get


def _scalar_for(x: Reg, y, what: str):
    """A getter of the scalar operand y of tile x: an i32 beside an i32 tile,
    else an f32 (a number or an f32 value)."""
    if _is_int(x):
        return _int_scalar(y, what)
    return as_f32(y, what).ir

