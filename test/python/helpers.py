"""Reference numerics shared by the CPU tests (no test file imports another)."""
from __future__ import annotations

import numpy as np


def ref_bf16(x):
    """Round to nearest-even bf16 in float64 (an independent algorithm):
    bf16 keeps 8 significant bits, so scale by the ulp and np.round (ties to even)."""
    x = np.asarray(x, np.float64)
    _, e = np.frexp(x)  # |x| = m * 2**e, 0.5 <= m < 1
    ulp = np.exp2(np.maximum(e - 8, -133).astype(np.float64))
    r = np.round(x / ulp) * ulp
    r = np.where(np.abs(r) >= 2.0 ** 128, np.copysign(np.inf, x), r)
    return np.where(np.isfinite(x), r, x).astype(np.float32)
