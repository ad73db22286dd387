"""What every tile op does with its operands: check them (located errors that
name the author's line) and bind the result to a register handle.

Shared by the ops' modules (elementwise, axes, memory); the public ops are
gathered in ops.py.
"""
from __future__ import annotations

from .tiles import Reg
from .trace import emitting, fail
from .values import F32


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
