"""Who runs: block and warp ids, grid size, and the block barrier.

`tkc.block_idx.x`, `tkc.grid_dim.y`, `tkc.warpid()`, `tkc.laneid()`,
`tkc.warpgroupid()` are Index values (one tk op each where used);
`tkc.sync()` is `tk.sync` (every warp of the block waits).
"""
from __future__ import annotations

from .trace import emitting
from .values import Index


class _Dims:
    """block_idx / grid_dim: attribute x, y or z emits the op."""

    def __init__(self, op: str):
        self._op = op

    def _get(self, dim: str) -> Index:
        from ..dialect import ops as tk
        with emitting():
            return Index(getattr(tk, self._op)(dim))

    x = property(lambda self: self._get("x"))
    y = property(lambda self: self._get("y"))
    z = property(lambda self: self._get("z"))

    def __repr__(self):
        return f"tkc.{self._op}"


block_idx = _Dims("block_idx")
grid_dim = _Dims("grid_dim")


def _worker(name: str) -> Index:
    from ..dialect import ops as tk
    with emitting():
        return Index(tk.worker_id(name))


def warpid() -> Index:
    """This warp's index in the block, 0 .. warps-1."""
    return _worker("warpid")


def laneid() -> Index:
    """This thread's lane in its warp, 0 .. 31."""
    return _worker("laneid")


def warpgroupid() -> Index:
    """warpid() // 4: the warpgroup (4 warps) this warp belongs to."""
    return _worker("warpgroupid")


def sync() -> None:
    """Block-wide barrier: every warp waits here (bar.sync 0)."""
    from ..dialect import ops as tk
    with emitting():
        tk.sync()
