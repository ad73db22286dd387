"""Persistent kernels over ragged groups (tkc.kernel's ragged=) on the GPU,
against the Python reference: every live work item visited once, no dead one,
with more live items than SMs (blocks take several, across groups), empty
groups, counts past the grid's height and no live item at all; and the counts
changed on the device between two launches of one prepared launch (what a CUDA
graph replays). The interpreter twin: test/python/test_ragged_items.py."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from ragged_kernels import expected_visits, ragged_visits, ragged_visits_grouped, ragged_visits_zigzag  # noqa: E402,F401

pytestmark = pytest.mark.gpu
try:  # the kernels above the tests must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None

COUNTS = [[0, 0, 0], [5, 0, 9, 1], [120, 0, 77, 3, 0, 200, 61, 1], [1000, 2, 0, 13]]


@pytest.mark.parametrize("kernel", [ragged_visits, ragged_visits_grouped, ragged_visits_zigzag],
                         ids=lambda k: k.name)
@pytest.mark.parametrize("counts", COUNTS, ids=str)
def test_every_live_item_once_and_no_dead_one(kernel, counts):
    """Y 64 row blocks of 3 rows, X 32: up to 2,000 live items a launch over the SMs."""
    Y, X = 64, 32
    count = torch.tensor(counts, dtype=torch.int32, device="cuda").view(1, 1, 1, -1)
    o = torch.zeros(1, len(counts), Y, X, dtype=torch.int32, device="cuda")
    kernel(count, o)
    assert o[0].tolist() == expected_visits(counts, Y, X)


def test_counts_change_on_the_device_between_launches():
    """One prepared launch (fixed shapes, as a CUDA graph holds them); the counts
    rewritten on the device in between: the second launch follows the new counts."""
    Y, X = 16, 8
    count = torch.tensor([7, 0, 30], dtype=torch.int32, device="cuda").view(1, 1, 1, -1)
    o = torch.zeros(1, 3, Y, X, dtype=torch.int32, device="cuda")
    launch = ragged_visits.prepare(count, o)
    launch(count, o)
    count.copy_(torch.tensor([0, 48, 2], dtype=torch.int32, device="cuda").view(1, 1, 1, -1))
    launch(count, o)
    want = np.array(expected_visits([7, 0, 30], Y, X)) + np.array(expected_visits([0, 48, 2], Y, X))
    assert o[0].tolist() == want.tolist()
