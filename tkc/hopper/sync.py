"""Named barriers on Hopper: what a tk.sync's id and warp count may be.

bar.sync has 16 ids; barrier 0 is the whole block's. tk-verify, the lowering
(tkc/lowering/workers.py) and the interpreter apply the same rule here, so
a kernel gets one message wherever its mistake is caught.
"""
from __future__ import annotations

from ..diagnostics import error
from ..dialect.attrs import sync_group

BARRIER_IDS = 16   # bar.sync ids 0..15


def checked_sync_group(op, kernel_warps: int) -> tuple[int, int]:
    """sync_group, or a located error when the id or warp count is out of
    range (the interpreter and the lowering may run without tk-verify)."""
    problems = list(sync_problems(op, kernel_warps))
    if problems:
        raise error(op, f"tk.{problems[0]}")
    return sync_group(op, kernel_warps)


def sync_problems(op, total: int | None):
    """What is wrong with a tk.sync's attributes (total: the kernel's warps)."""
    i, w = sync_group(op, total)
    if i is None or not 0 <= i < BARRIER_IDS:
        yield f"sync: id must be an integer in 0..{BARRIER_IDS - 1}, got {op.attributes['id']}"
    if "warps" in op.attributes and (w is None or w < 1 or (total is not None and w > total)):
        yield (f"sync: warps must be an integer in 1..{total} (the kernel's warps), "
               f"got {op.attributes['warps']}")
    if "arrive" in op.attributes and (i == 0 or "warps" not in op.attributes or w == 1):
        # bar.arrive on barrier 0 would complete a later block-wide bar.sync early; one warp's
        # sync is bar.warp.sync, which nothing can arrive on
        yield (f"sync {{arrive}}: needs a named barrier, an id in 1..{BARRIER_IDS - 1} and warps "
               ">= 2 (the warps that arrive and the warps that wait, together)")
