"""A kernel of filled loads from a gl shorter than its tile, down to an empty
one (test_fill.py interprets it, test/gpu/test_fill_gpu.py runs it)."""
import numpy as np

import tkc
from tkc import bf16, f32, gl
from tkc.ops import load, store

FILL = 0.5


@tkc.kernel(warps=4, grid=lambda v, y: (1, 1))
def filled(v: gl(bf16, 1, 1, 1, None), y: gl(f32, 1, 1, 4, 32)):
    """Row w of y: warp w's 16 elements of v from 16 w (one bf16 a lane,
    converted: the load that is not predicated), then at column 16 v[3] (a
    scalar)."""
    w = tkc.warpid()
    store(y, load(tkc.rv(f32, 16, "col"), v, (0, 0, 0, w), fill=FILL), (0, 0, w, 0))
    store(y, load(f32, v, at=(0, 0, 0, 3), fill=FILL), at=(0, 0, w, 16), clip=True)


def check(y: np.ndarray, n: int) -> None:
    """y [4, 32] as `filled` leaves it for v = 1, 2, ..., n."""
    want = np.full(80, FILL, np.float32)
    want[:n] = np.arange(1, n + 1)
    np.testing.assert_array_equal(y[:, :16].reshape(-1), want[:64])
    np.testing.assert_array_equal(y[:, 16], want[3])
