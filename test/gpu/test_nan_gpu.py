"""Tiles' max, min, relu and row/col max with NaNs on the GPU, against the
interpreter's (NaN-skipping, max.f32) results: test/python/nan_kernels.py."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from nan_kernels import inputs, nan_maxes, reference  # noqa: E402  (the interpreter test's kernel)

pytestmark = pytest.mark.gpu
try:  # the kernel must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None


def test_gpu_skips_nans_as_the_interpreter():
    x, y = inputs()
    t = lambda a: torch.tensor(a, device="cuda")  # noqa: E731
    o, r, c = t(np.zeros((3, 16, 32), np.float32)), t(np.zeros(16, np.float32)), t(np.zeros(32, np.float32))
    nan_maxes(t(x), t(y), o.view(1, 3, 16, 32), r.view(1, 1, 1, 16), c.view(1, 1, 1, 32))
    want_o, want_r, want_c = reference(x, y)
    np.testing.assert_array_equal(o.cpu().numpy(), want_o)
    np.testing.assert_array_equal(r.cpu().numpy(), want_r)
    np.testing.assert_array_equal(c.cpu().numpy(), want_c)
