"""What every tk op handler reads off its op: the tk types of operands and
results, attributes, and located checks (shared by compute.py, memory.py,
gl.py, workers.py and the Hopper and warpgroup handlers).
"""
from __future__ import annotations

import numpy as np

from ..diagnostics import error
from ..dialect.types import view

F32 = np.float32


def tview(value):
    return view(value.type)


def expect(cond: bool, op, message: str) -> None:
    if not cond:
        raise error(op, f"{op.name}: {message}")


def _attr(op, name):
    return op.attributes[name].value
