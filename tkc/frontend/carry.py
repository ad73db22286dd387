"""Scalars carried through `tkc.range` loops and `tkc.if_` branches.

Register handles are mutable names for SSA values, carried by identity
(control.py). Scalars (Index, F32, Bool) are values: `m = max(m, v)` or
`c = c + 1` binds the author's local name to a new one. So a loop or an if
carries a scalar by *name*: each local name of the author's frame that holds
a traced scalar visible when the region starts is a candidate.

- A loop gives each candidate name, for its body, a copy of its scalar that
  holds the scratch loop's iter_arg, so the body reads the value of the
  iteration before. A name that holds anything else at the body's end was
  changed: the value it holds (a number or constant materialised, an index
  converted where the name held an f32) is yielded, and after the loop the
  name holds the loop's result; the others get their own scalar back.
- An if's branches read the candidates as they are. A name a branch changed
  gets, at the branch's end, a copy of its scalar (the value from before the
  if, which the else branch reads); the if is finished later (an else_ may
  follow), and its result is then written into that copy, the object the
  author's name already holds (Scalar.ir() finishes a pending if first).

Names are rebound by writing the author's frame (`frame.f_locals` writes
through from Python 3.13; before, PyFrame_LocalsToFast copies it back), so
another name or a list holding the same scalar keeps its value, as Python
values do. Python numbers and constant scalars (a static gl dim) are
trace-time values: they are not carried; a counter starts as `tkc.i32(0)`,
a running max as `tkc.f32(-math.inf)`. Only names are carried, not elements
of lists.
"""
from __future__ import annotations

import copy
import ctypes
import sys

from .trace import fail
from .values import F32, Bool, Index, Scalar, const_bool

_MISSING = object()


def _locals(frame) -> dict:
    return dict(frame.f_locals) if frame is not None else {}


def _set_local(frame, name: str, value) -> None:
    """Bind the author's local `name` to `value` (the frame is running)."""
    frame.f_locals[name] = value
    if sys.version_info < (3, 13):
        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))


def _traced(x, st) -> bool:
    """A scalar with an SSA value visible here (a candidate)."""
    return isinstance(x, (Scalar, Bool)) and x._v is not None and x._scope is not None \
        and st.visible(x._scope)


def _describe(x) -> str:
    if isinstance(x, (Scalar, Bool)):
        return x._what
    return f"a {type(x).__name__}"


def _trace_time(x) -> bool:
    """A Python number (or bool) or a constant scalar: a value of the trace."""
    return isinstance(x, (int, float)) or isinstance(x, Scalar) and x._v is None


def _same(x, y) -> bool:
    if isinstance(x, Scalar) or isinstance(y, Scalar):
        return type(x) is type(y) and x.const == y.const
    return type(x) is type(y) and x == y


def _show(x) -> str:
    return repr(x.const) if isinstance(x, Scalar) else repr(x)


class Scalars:
    """The candidates of one region: {name: the scalar it held at the start}."""

    def __init__(self, st, frame, region: str):
        self.st, self.frame, self.region = st, frame, region
        names = _locals(frame)
        self.start = {n: v for n, v in names.items() if _traced(v, st)}
        self.numbers = {n: v for n, v in names.items() if _trace_time(v)}
        self.fresh: dict = {}        # loops: name -> the copy holding the iter_arg
        self.copies: dict = {}       # ifs: name -> the copy the if's result goes into
        self.left: set = set()       # loops: names reused for something else (not carried)

    # ---------------------------------------------------------- loops

    def inits(self) -> list:
        return [v.ir() for v in self.start.values()]

    def enter_loop(self, args, scope) -> None:
        """Bind each candidate name to a copy holding its iter_arg."""
        for (n, v), a in zip(self.start.items(), args):
            f = copy.copy(v)
            f._v, f._scope = a, scope
            self.fresh[n] = f
            _set_local(self.frame, n, f)

    def loop_finals(self) -> dict:
        """{name: value to yield} of the names the body changed, emitted at
        the body's end; a located error for a name changed to another kind
        of value after the body read it (a name the body only rebinds was
        reused for something else: it is left as the body left it)."""
        now = _locals(self.frame)
        self._check_numbers(now)
        out = {}
        for n, v in self.start.items():
            x = now.get(n, _MISSING)
            if x is self.fresh[n]:
                continue
            if not _fits(x, v) and not _has_uses(self.fresh[n]._v):
                self.left.add(n)
                continue
            out[n] = self._final(n, x, v)
        return out

    def leave_loop(self, results: dict, scope) -> None:
        """After the loop: changed names hold its results, the others their
        own scalars again."""
        for n, v in self.start.items():
            if n in self.left:
                continue
            if n in results:
                v = type(v)(results[n]) if isinstance(v, Scalar) else Bool(results[n])
                v._scope = scope
            _set_local(self.frame, n, v)

    # ---------------------------------------------------------- ifs

    def branch_end(self) -> dict:
        """At a branch's end: {name: value to yield} of the names it changed;
        those names then hold the copy that will get the if's result (the
        value from before the if until then)."""
        now, finals = _locals(self.frame), {}
        self._check_numbers(now)
        for n, v in self.start.items():
            x = now.get(n, _MISSING)
            if x is v or x is self.copies.get(n):
                continue
            finals[n] = self._final(n, x, v)
            if n not in self.copies:
                self.copies[n] = copy.copy(v)
            _set_local(self.frame, n, self.copies[n])
        return finals

    def if_results(self, results: dict, scope) -> None:
        for n, r in results.items():
            self.copies[n]._v, self.copies[n]._scope = r, scope

    # ---------------------------------------------------------- both

    def _part(self) -> str:
        return "body" if "loop" in self.region else "branch"

    def _final(self, name: str, x, start):
        """The SSA value of what `name` holds at a region's end, as the type
        of its `start` scalar (emitted at the current insertion point)."""
        if not _fits(x, start):
            raise fail(f"{name} holds {start._what} before the {self.region} and "
                       f"{_describe(x) if x is not _MISSING else 'nothing'} at the end of its "
                       f"{self._part()}: a carried scalar keeps its type{_hint(start)}")
        if isinstance(start, Bool):
            return (x if isinstance(x, Bool) else const_bool(x)).ir()
        return type(start).wrap(x).ir()   # a number materialised, an index converted to f32

    def _check_numbers(self, now: dict) -> None:
        """A name holding a number (or a constant) before the region and
        another one at its end counted at trace time: the body is traced
        once (`c = 0; for ...: c = c + 1` would give 1), a branch whether or
        not its condition will hold."""
        for n, v in self.numbers.items():
            x = now.get(n, _MISSING)
            if x is v or not _trace_time(x) or _same(x, v):
                continue
            how = "once, not once per iteration" if "loop" in self.region else \
                "once, whether or not its condition holds when the kernel runs"
            start = "a comparison" if isinstance(v, bool) else \
                f"{n} = tkc.{'f32' if isinstance(v, float) or isinstance(v, F32) else 'i32'}({_show(v)})"
            raise fail(f"{n} is a trace-time value ({_show(v)} before the {self.region}, {_show(x)} "
                       f"at the end of its {self._part()}): the {self._part()} is traced {how}; to "
                       f"carry it, start it as a traced value: {start}")


def _fits(x, start) -> bool:
    """Whether x can be carried as start's type: a value of it, a number, or
    an index where start is an f32."""
    if isinstance(start, Bool):
        return isinstance(x, (Bool, bool))
    if isinstance(x, bool) or x is _MISSING:
        return False
    return isinstance(x, (Index, int)) or isinstance(start, F32) and isinstance(x, (F32, float))


def _has_uses(value) -> bool:
    return next(iter(value.uses), None) is not None


def _hint(start) -> str:
    if isinstance(start, Index):
        return " (an f32 value converts with .to(tkc.i32))"
    if isinstance(start, F32):
        return ""
    return " (a condition: a comparison, & | ~, or a Python bool)"
