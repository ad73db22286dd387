"""gl values in the interpreter: the argument arrays, their slices (tk.gl_slice,
a view that remembers the whole argument for TMA) and dims (tk.dim).
"""
from __future__ import annotations

import numpy as np

from .operands import _attr, expect
from .program import handler

_AXES = {"b": 0, "d": 1, "r": 2, "c": 3}


class GLSlice(np.ndarray):
    """A gl slice: a numpy view of the argument's elements (accesses through
    it see its own edges), remembering the whole argument (`whole`) and its
    first element there (`origin`, b d r c), which TMA loads read past its end."""


def whole(arr) -> tuple:
    """(the argument array, the origin of `arr` in it) of a gl value."""
    if isinstance(arr, GLSlice):
        return arr.whole, arr.origin
    return arr, (0, 0, 0, 0)


@handler("tk.gl_slice")
def _gl_slice(c, op):
    g, start, size = (c.slot(op.operands[i]) for i in range(3))
    out = c.result_slot(op)
    axis = _AXES[op.attributes["axis"].value]

    def step(env, w):
        arr, s, n = env[g], int(env[start]), int(env[size])
        expect(0 <= s <= arr.shape[axis], op, f"the slice starts at {s}, outside the gl's "
               f"{arr.shape[axis]} elements along {'bdrc'[axis]}")
        idx = [slice(None)] * 4
        idx[axis] = slice(s, s + max(n, 0))  # numpy clamps at the end, as the GPU's bounds
        part = arr[tuple(idx)].view(GLSlice)
        root, origin = whole(arr)
        part.whole, part.origin = root, tuple(o + (s if i == axis else 0) for i, o in enumerate(origin))
        env[out] = part
    return step


@handler("tk.dim")
def _dim(c, op):
    g, out, axis = c.slot(op.operands[0]), c.result_slot(op), _AXES[_attr(op, "axis")]

    def step(env, w):
        env[out] = env[g].shape[axis]
    return step
