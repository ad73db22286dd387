"""Located errors: every user-facing error names the user's file and line.

MLIR locations print as `loc("file.py":12:5)` (possibly wrapped in
callsite/fused forms); `where(op_or_loc)` turns them into `file.py:12:5`.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re

_FILE_LOC = re.compile(r'"([^"]+)":(\d+):(\d+)')
_TKC_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


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


_LIBRARY_WARNINGS = [False]   # library_warnings' state


@contextlib.contextmanager
def library_warnings():
    """Within: the compiler's performance notes at lines of tkc's own sources
    (a library kernel's bank conflicts) are written too: `tkc build`, which
    collects them into its summary, and `tkc FILE`. Outside, a library kernel
    that an op compiles at its first call writes none: they are known and
    measured, and its user cannot act on them."""
    before, _LIBRARY_WARNINGS[0] = _LIBRARY_WARNINGS[0], True
    try:
        yield
    finally:
        _LIBRARY_WARNINGS[0] = before


def noted_at(loc: str) -> bool:
    """Whether a performance note at loc ('file:line:col') is written (see
    library_warnings): at the user's lines always, at tkc's inside it."""
    path = loc.rsplit(":", 2)[0] if loc.count(":") >= 2 else loc
    return _LIBRARY_WARNINGS[0] or not path or not os.path.abspath(path).startswith(_TKC_DIR)


def where(obj) -> str:
    """'file:line:col' of an Operation, Value's owner, Location or its text."""
    loc = getattr(obj, "location", obj)
    m = _FILE_LOC.search(str(loc))
    return f"{m[1]}:{m[2]}:{m[3]}" if m else ""


def error(obj, message: str) -> TkcError:
    """A TkcError located at obj (an op, location or 'file:line:col')."""
    return TkcError(message, obj if isinstance(obj, str) else where(obj))


def author_python_error(exc: BaseException, path: str) -> TkcError | None:
    """A Python exception from the author's code (a NameError or TypeError in a
    kernel body, say) as a TkcError at the innermost line of file `path` in its
    traceback; chain it with `raise ... from exc`.

    None when the exception was raised inside tkc itself (an internal error,
    not the author's) or its traceback never passes through `path`.
    """
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((os.path.abspath(tb.tb_frame.f_code.co_filename), tb))
        tb = tb.tb_next
    target = os.path.abspath(path)
    ours = [tb for f, tb in frames if f == target]
    if not ours or (frames[-1][0] != target and frames[-1][0].startswith(_TKC_DIR)):
        return None
    tb = ours[-1]
    col = _column(tb.tb_frame.f_code, tb.tb_lasti)
    return TkcError(f"{type(exc).__name__}: {exc}", f"{path}:{tb.tb_lineno}:{col}")


def _column(code, lasti: int) -> int:
    """1-based column of the instruction at lasti (1 when Python does not know)."""
    try:
        col = list(code.co_positions())[lasti // 2][2]
    except (AttributeError, IndexError):
        return 1
    return col + 1 if col is not None else 1


def at_least(least: int):
    """An argparse type for the command lines' counts: an int of at least
    `least` (`tkc fuzz --count 0` ran nothing and reported no failure;
    `--start -4` failed in the generator)."""
    def parse(text: str) -> int:
        n = int(text)   # (a ValueError: argparse's "invalid int value")
        if n < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {n}")
        return n
    parse.__name__ = "int"
    return parse
