"""A test kernel shared by the interpreter test (test_nan_max.py) and the
GPU's (test/gpu/test_nan_gpu.py): tiles' max, min, relu, row_max and col_max
on inputs with NaNs. Imports tkc only, so a GPU machine without MLIR imports
it too."""
import numpy as np

import tkc
from tkc import f32, gl, rt
from tkc.ops import col_max, load, max, min, relu, row_max, store


@tkc.kernel(warps=1, grid=lambda x, y, o, r, c: (1, 1))
def nan_maxes(x: gl(f32, 1, 1, 16, 32), y: gl(f32, 1, 1, 16, 32), o: gl(f32, 1, 3, 16, 32),
              r: gl(f32, 1, 1, 1, 16), c: gl(f32, 1, 1, 1, 32)):
    """o[0] = max(x, y), o[1] = min(x, y), o[2] = relu(x); r = row_max(x), c = col_max(x)."""
    a, b = load(rt(f32, 16, 32), x, (0, 0, 0, 0)), load(rt(f32, 16, 32), y, (0, 0, 0, 0))
    store(o, max(a, b), (0, 0, 0, 0))
    store(o, min(a, b), (0, 1, 0, 0))
    store(o, relu(a), (0, 2, 0, 0))
    store(r, row_max(a), (0, 0, 0, 0))
    store(c, col_max(a), (0, 0, 0, 0))


def inputs():
    """x, y with NaNs: single ones, a row and a column of NaNs only, and both NaN at a place."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    y = rng.standard_normal((16, 32)).astype(np.float32)
    x[0, 3] = x[5, 0] = x[9, 31] = np.nan
    y[2, 2] = y[5, 0] = np.nan
    x[7, :] = np.nan              # a row of NaNs: its max is NaN
    x[:, 20] = np.nan             # a column of NaNs
    return x, y


def reference(x, y):
    """The GPU's max.f32 / min.f32: a NaN gives the other operand; all-NaN gives NaN."""
    return (np.stack([np.fmax(x, y), np.fmin(x, y), np.fmax(x, np.float32(0))]),
            np.fmax.reduce(x, axis=1), np.fmax.reduce(x, axis=0))
