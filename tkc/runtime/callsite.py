"""Where the user called us from: the first stack frame outside the tkc package.

Runtime errors (bad arguments, a missing artifact) are the caller's mistake,
so they are located at the caller's line, not deep inside tkc. Computed only
when an error is raised: walking frames is too slow for every launch.
"""
from __future__ import annotations

import os
import sys

# .../tkc/ (this file is tkc/runtime/callsite.py)
_TKC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def caller() -> str:
    """'file:line' of the innermost frame whose code is not in tkc/ ('' if none)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_TKC_DIR):
        frame = frame.f_back
    if frame is None:
        return ""
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"
