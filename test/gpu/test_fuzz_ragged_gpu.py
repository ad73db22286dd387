"""Ragged programs tkc fuzz generated (tkc/fuzz/ragged.py), pinned as text in
test/python/fuzz_ragged_cases.py, on the GPU: each against its all-items twin
(ragged= dropped: every item runs, persistent as before) on the GPU. A dead
item's rows must keep the initial fill, a live one's equal the twin's within
the fuzz bound (compare_gpu). Zigzag and not, "auto" and grouped orders, 2
consumer warpgroups, partly live groups, a count gl shorter than the groups,
every group empty, TMA stores, atomic_add counters. The interpreter twin:
test/python/test_fuzz_ragged.py; `tkc fuzz --seed 40 ... --gpu` runs the rest."""
import sys
from pathlib import Path

import pytest

from tkc.fuzz.checks import compare_gpu
from tkc.fuzz.program import arrays, kernel_of
from tkc.fuzz.ragged import all_items, expected, live_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from fuzz_ragged_cases import PROGRAMS  # noqa: E402

pytestmark = pytest.mark.gpu
try:  # the kernels below must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None

CASES = {p.name: p for p in PROGRAMS}
KERNELS = [kernel_of(q) for p in PROGRAMS for q in (p, all_items(p))]   # `tkc build` prebuilds them
_KERNEL = {q.name: k for q, k in zip((q for p in PROGRAMS for q in (p, all_items(p))), KERNELS)}


def _on_gpu(p) -> list:
    """p's outputs after one launch of its compiled kernel."""
    ints = ("i32", "i64")
    ts = [torch.from_numpy(x).cuda() if a.dtype in ints else
          torch.from_numpy(x).cuda().to(torch.bfloat16 if a.dtype == "bf16" else torch.float32)
          for a, x in zip(p.args, arrays(p))]
    _KERNEL[p.name](*ts)
    torch.cuda.synchronize()
    return [t.cpu().numpy() if a.dtype in ints else t.float().cpu().numpy()
            for a, t in zip(p.args, ts) if a.output]


@pytest.mark.parametrize("name", list(CASES))
def test_live_items_compute_and_dead_ones_leave_the_fill(name):
    p = CASES[name]
    got, full = _on_gpu(p), _on_gpu(all_items(p))
    f = compare_gpu(p, got, expected(p, full))
    assert f is None, f.message
    for a, x in zip([a for a in p.args if a.output], got):   # dead rows: the fill itself
        for z, h in enumerate(live_rows(p)):
            assert (x[0, z, h * a.block_rows:] == (7 if a.dtype in ("i32", "i64") else 0.5)).all(), (a.name, z)
