"""The tracing context: where the kernel being traced puts its ops.

While `Kernel.trace()` runs the author's function, one `TraceState` is
active. It holds the module, the insertion point stack (one entry per open
loop body or if branch), the scope stack that decides which traced values are
still visible, and every register handle bound so far (loops and ifs need them
to find loop-carried values).

Locations: every op gets the author's line, found by walking the Python stack
to the first frame outside tkc/frontend.

This module imports MLIR only inside functions: `import tkc` must work without
it.
"""
from __future__ import annotations

import contextlib
import os
import sys
from contextlib import contextmanager
from functools import lru_cache

from ..diagnostics import TkcError

_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# `with emitting():` runs our code under contextlib's frames: skip those too.
_CONTEXTLIB = contextlib.__file__

_ACTIVE: list["TraceState"] = []


# ---------------------------------------------------------------- locations

def author_frame():
    """The innermost Python frame that is not frontend code."""
    f = sys._getframe(1)
    while f is not None and (f.f_code.co_filename.startswith(_HERE)
                             or f.f_code.co_filename == _CONTEXTLIB):
        f = f.f_back
    return f


@lru_cache(maxsize=512)
def _positions(code):
    return tuple(code.co_positions())


def frame_position(f) -> tuple[str, int, int]:
    """(file, line, 1-based column) of the instruction a frame is executing."""
    line, col = f.f_lineno, 0
    pos = _positions(f.f_code)
    i = f.f_lasti // 2
    if 0 <= i < len(pos) and pos[i][0] is not None:
        line = pos[i][0]
        col = pos[i][2] or 0
    return f.f_code.co_filename, line, col + 1


def author_where() -> str:
    """'file:line:col' of the author's current line ('' outside any frame)."""
    f = author_frame()
    if f is None:
        return ""
    file, line, col = frame_position(f)
    return f"{file}:{line}:{col}"


def fail(message: str) -> TkcError:
    """A TkcError at the author's current line (raise it)."""
    return TkcError(message, author_where())


# ---------------------------------------------------------------- scopes

class Scope:
    """A region of the kernel: the body, a loop body or an if branch.

    A traced value defined in a scope is visible only while that scope is
    open: using it after its loop or branch ended is an error, not invalid IR.
    """

    def __init__(self, kind: str, where: str, parent: "Scope | None"):
        self.kind, self.where, self.parent = kind, where, parent
        self.open = True

    def describe(self) -> str:
        return f"{self.kind} at {self.where}" if self.where else self.kind


# ---------------------------------------------------------------- state

class TraceState:
    """Everything the frontend needs while one kernel is being traced."""

    def __init__(self, ctx, module, func_op, entry_block, warps: int):
        from mlir import ir
        self.ctx, self.module, self.func = ctx, module, func_op
        self.entry = entry_block
        self.warps = warps
        self.ips = [ir.InsertionPoint(entry_block)]
        self.scope = Scope("kernel", "", None)
        self.handles = []          # every register handle bound in this trace
        self._handle_ids = set()
        self.pending_if = None     # an if_ whose else_ may still follow
        self.poisoned: TkcError | None = None
        self.divisible: dict[str, int] = {}  # "a.c" -> multiple, from loops over whole tiles
        self.has_pgl = False       # a pgl argument: tkc.rank() / world_size() mean something
        self.cluster = (1, 1, 1)   # the kernel's cluster shape (tkc.cluster_sync needs one)

    def require_divisible(self, ref: str, n: int) -> None:
        from math import lcm
        self.divisible[ref] = lcm(self.divisible.get(ref, 1), n)

    # -- insertion points and scopes
    def push(self, block, kind: str, where: str) -> Scope:
        from mlir import ir
        self.ips.append(ir.InsertionPoint(block))
        self.scope = Scope(kind, where, self.scope)
        return self.scope

    def pop(self) -> None:
        self.ips.pop()
        self.scope.open = False
        self.scope = self.scope.parent

    def visible(self, scope) -> bool:
        s = self.scope
        while s is not None:
            if s is scope:
                return True
            s = s.parent
        return False

    @property
    def in_entry(self) -> bool:
        return self.scope.parent is None

    def require_top_level(self, what: str, why: str) -> None:
        """A located error unless tracing is at the kernel's top level."""
        if not self.in_entry:
            raise fail(f"{what} must be at the top level of the kernel, not inside the "
                       f"{self.scope.describe()}: {why}")

    # -- handles
    def track(self, handle) -> None:
        if id(handle) not in self._handle_ids:
            self._handle_ids.add(id(handle))
            self.handles.append(handle)

    def live_handles(self):
        """Register handles that hold a value visible here (loop/if candidates)."""
        return [h for h in self.handles
                if h._value is not None and h._scope is not None and self.visible(h._scope)]

    # -- deferred work
    def flush(self) -> None:
        """Finish an if_ that no else_ followed, and report a broken loop."""
        if self.poisoned is not None:
            raise self.poisoned
        p = self.pending_if
        if p is not None:
            self.pending_if = None
            p.finish(None)

    def location(self, where: tuple[str, int, int] | None = None):
        from mlir import ir
        if where is None:
            f = author_frame()
            where = frame_position(f) if f is not None else ("<unknown>", 0, 0)
        return ir.Location.file(where[0], where[1], where[2], context=self.ctx)


def current() -> TraceState:
    """The active trace, or a TkcError saying ops need a kernel being traced."""
    if not _ACTIVE:
        raise fail("tile operations can only be used inside a @tkc.kernel function "
                   "while it is traced (call kernel.trace(), .build() or the kernel)")
    return _ACTIVE[-1]


def tracing() -> bool:
    return bool(_ACTIVE)


@contextmanager
def active(state: TraceState):
    _ACTIVE.append(state)
    try:
        yield state
    finally:
        _ACTIVE.pop()


@contextmanager
def emitting(where: tuple[str, int, int] | None = None):
    """Context for building ops: flushed state, author location, insertion point."""
    st = current()
    st.flush()
    with st.ctx, st.location(where), st.ips[-1]:
        yield st
