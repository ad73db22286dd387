"""Where the user called us from: the first stack frame outside tkc and torch.

Runtime errors (bad arguments, a missing artifact) are the caller's mistake,
so they are located at the caller's line, not deep inside tkc, nor inside
torch's machinery around a custom op (torch.library's wrapper, autograd,
torch.compile) when an op is reached through it. Computed only when an error
is raised: walking frames is too slow for every launch. A call that tkc
makes for the user from a command line (`tkc build --call EXPR`) has no
line of theirs: `standing_at` names the command instead.
"""
from __future__ import annotations

import contextlib
import os
import sys

# .../tkc/ (this file is tkc/runtime/callsite.py)
_TKC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _inside(filename: str) -> bool:
    if filename.startswith("<eval_with_key>"):  # torch.fx's generated code (a compiled graph)
        return True
    path = os.path.abspath(filename)
    if path.startswith(_TKC_DIR):
        return True
    torch = sys.modules.get("torch")  # only a caller of torch can be inside it
    return torch is not None and path.startswith(os.path.dirname(torch.__file__) + os.sep)


_standing: list[str] = []   # the commands whose calls are being made (innermost last)


@contextlib.contextmanager
def standing_at(where: str):
    """Inside the block, caller() is `where` (the command a call stands for)."""
    _standing.append(where)
    try:
        yield
    finally:
        _standing.pop()


def caller() -> str:
    """'file:line' of the innermost frame whose code is not in tkc/ or torch/
    ('' if none), or the command of an enclosing standing_at."""
    if _standing:
        return _standing[-1]
    frame = sys._getframe(1)
    while frame is not None and _inside(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return ""
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"
