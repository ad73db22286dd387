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


def where(obj) -> str:
    """'file:line:col' of an Operation, Value's owner, Location or its text."""
    loc = getattr(obj, "location", obj)
    m = _FILE_LOC.search(str(loc))
    return f"{m[1]}:{m[2]}:{m[3]}" if m else ""


def error(obj, message: str) -> TkcError:
    """A TkcError located at obj (an op, location or 'file:line:col')."""
    return TkcError(message, obj if isinstance(obj, str) else where(obj))
