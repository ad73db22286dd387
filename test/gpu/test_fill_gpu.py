"""Filled loads of a gl shorter than the tile, down to an empty one: the
lanes off the gl read the fill, and none faults (they address the gl's first
element, which an empty tensor's null pointer lacks: the runtime passes
driver.zeros for it)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from fill_kernels import check, filled  # noqa: E402  (the interpreter test's kernel)

pytestmark = pytest.mark.gpu
try:  # the kernel must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None


@pytest.mark.parametrize("n", [0, 2, 37, 64])
def test_filled_loads_of_a_short_or_empty_gl(n):
    v = torch.arange(1, n + 1, device="cuda", dtype=torch.bfloat16)
    assert n or v.data_ptr() == 0   # (an empty CUDA tensor: a null pointer)
    y = torch.full((4, 32), -1.0, device="cuda")
    filled(v.view(1, 1, 1, n), y.view(1, 1, 4, 32))
    check(y.cpu().numpy(), n)
