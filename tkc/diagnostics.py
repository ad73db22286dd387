"""Located errors: every user-facing error names the user's file and line.

MLIR locations print as `loc("file.py":12:5)` (possibly wrapped in
callsite/fused forms); `where(op_or_loc)` turns them into `file.py:12:5`.
"""
from __future__ import annotations

import re

_FILE_LOC = re.compile(r'"([^"]+)":(\d+):(\d+)')


class TkcError(Exception):
    """A user-facing error: `where` is 'file:line:col' (or '' if unknown)."""

    def __init__(self, message: str, where: str = ""):
        self.message = message
        self.where = where
        super().__init__(f"{where}: error: {message}" if where else f"error: {message}")


class TkcErrors(TkcError):
    """Several located errors reported at once; str() gives one
    `file:line:col: error: msg` line per error (`.errors`: (where, msg) pairs).
    """

    def __init__(self, errors: list[tuple[str, str]]):
        self.errors = list(errors)
        super().__init__(self.errors[0][1], self.errors[0][0])

    def __str__(self) -> str:
        return "\n".join(f"{w}: error: {m}" if w else f"error: {m}" for w, m in self.errors)


def where(obj) -> str:
    """'file:line:col' of an Operation, Value's owner, Location or its text."""
    loc = getattr(obj, "location", obj)
    m = _FILE_LOC.search(str(loc))
    return f"{m[1]}:{m[2]}:{m[3]}" if m else ""


def error(obj, message: str) -> TkcError:
    """A TkcError located at obj (an op, location or 'file:line:col')."""
    return TkcError(message, obj if isinstance(obj, str) else where(obj))
