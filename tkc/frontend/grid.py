"""The grid lambda, evaluated symbolically into grid-language strings.

`grid=lambda q, k: (tkc.cdiv(q.r, 64), q.b)` is called with symbolic
arguments: a gl argument exposes .b .d .r .c (a Python int when the dim is
static, else the symbol `q.r`), an i32 scalar its name. The result is up to 3
expressions in the grid language of docs/tile-ir.md (`+ - * // %`,
cdiv/min/max, parentheses), padded with "1". No MLIR involved: the runtime
evaluates the strings at launch (tkc.runtime.grid).

`cdiv`, `min` and `max` also work on ints (computed) and on traced Index
values inside a kernel.
"""
from __future__ import annotations

import builtins
import inspect

from ..diagnostics import TkcError
from .values import Index


class Sym:
    """A grid-language expression; `atomic` ones need no parentheses."""

    def __init__(self, text: str, atomic: bool = True):
        self.text, self.atomic = text, atomic

    def _op(self, other, op, reverse=False):
        if not isinstance(other, (Sym, int)) or isinstance(other, bool):
            return NotImplemented
        a, b = (other, self) if reverse else (self, other)
        return Sym(f"{_operand(a)} {op} {_operand(b)}", atomic=False)

    __add__ = lambda s, o: s._op(o, "+")
    __radd__ = lambda s, o: s._op(o, "+", True)
    __sub__ = lambda s, o: s._op(o, "-")
    __rsub__ = lambda s, o: s._op(o, "-", True)
    __mul__ = lambda s, o: s._op(o, "*")
    __rmul__ = lambda s, o: s._op(o, "*", True)
    __floordiv__ = lambda s, o: s._op(o, "//")
    __rfloordiv__ = lambda s, o: s._op(o, "//", True)
    __mod__ = lambda s, o: s._op(o, "%")
    __rmod__ = lambda s, o: s._op(o, "%", True)

    def __truediv__(self, o):
        raise TkcError("grid expressions divide with `//` or tkc.cdiv(x, y), not `/`")

    __rtruediv__ = __truediv__

    def __bool__(self):
        raise TkcError(f"grid expression {self.text} has no value while the grid is built: "
                       "use tkc.min/tkc.max instead of comparisons")

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"Sym({self.text!r})"


def _operand(x) -> str:
    if isinstance(x, Sym):
        return x.text if x.atomic else f"({x.text})"
    return str(x) if x >= 0 else f"({x})"


def _arg(x) -> str:
    return x.text if isinstance(x, Sym) else str(x)


def _call(fn: str, x, y, py, traced):
    if isinstance(x, Index) or isinstance(y, Index):
        return traced(Index.wrap(x) if not isinstance(x, Index) else x, y)
    if isinstance(x, Sym) or isinstance(y, Sym):
        return Sym(f"{fn}({_arg(x)}, {_arg(y)})")
    return py(x, y)


def cdiv(x, y):
    """Ceiling division: ints, grid expressions or traced index values."""
    return _call("cdiv", x, y, lambda a, b: -(-a // b), lambda a, b: (a + b - 1) // b)


def min(x, y):
    """min of two ints, grid expressions or traced index values."""
    return _call("min", x, y, builtins.min, lambda a, b: a.min(b))


def max(x, y):
    """max of two ints, grid expressions or traced index values."""
    return _call("max", x, y, builtins.max, lambda a, b: a.max(b))


class _SymGL:
    def __init__(self, name: str, spec):
        self._name, self._spec = name, spec

    def __getattr__(self, axis):
        if axis not in ("b", "d", "r", "c"):
            raise AttributeError(axis)
        size = self._spec.static["bdrc".index(axis)]
        return size if size is not None else Sym(f"{self._name}.{axis}")


def grid_exprs(grid_fn, params, where: str) -> list[str]:
    """Evaluate the grid lambda over symbolic args; three expression strings."""
    if grid_fn is None:
        return ["1", "1", "1"]
    syms = {name: (_SymGL(name, p.spec) if p.kind == "gl" else Sym(name)) for name, p in params.items()}
    got = _call_grid(grid_fn, syms, where)
    if not isinstance(got, (tuple, list)):
        got = (got,)
    if not 1 <= len(got) <= 3:
        raise TkcError(f"grid must give 1 to 3 sizes, got {len(got)}", where)
    out = []
    for e in got:
        if isinstance(e, Sym):
            _check_scalars(e, params, where)
            out.append(e.text)
        elif isinstance(e, int) and not isinstance(e, bool) and e > 0:
            out.append(str(e))
        else:
            raise TkcError(f"grid sizes must be positive ints or expressions of the kernel's "
                           f"arguments, got {e!r}", where)
    return out + ["1"] * (3 - len(out))


def _call_grid(grid_fn, syms: dict, where: str):
    """By name when the lambda's parameters are kernel argument names, else in order."""
    try:
        names = list(inspect.signature(grid_fn).parameters)
    except (TypeError, ValueError):
        names = []
    try:
        if names and all(n in syms for n in names):
            return grid_fn(**{n: syms[n] for n in names})
        return grid_fn(*list(syms.values())[:len(names)])
    except TkcError as e:
        raise TkcError(e.message, e.where or where) from None
    except (TypeError, AttributeError) as e:
        raise TkcError(f"grid lambda failed on symbolic arguments: {e}", where) from None


def _check_scalars(e: Sym, params, where: str) -> None:
    import re
    for name in re.findall(r"(?<![\w.])([A-Za-z_]\w*)(?![\w.(])", e.text):
        p = params.get(name)
        if p is not None and p.kind == "scalar" and p.dtype != "i32":
            raise TkcError(f"grid expression {e.text} uses the {p.dtype} scalar {name}: "
                           "only i32 scalars may size the grid", where)
