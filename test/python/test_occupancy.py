"""tkc.kernel(blocks_per_sm=n): several blocks an SM. The launch bound caps
registers (ptxas) and the shared-memory budget shrinks to an n-th of the
SM's, for the plain allocations and for tk-pipeline-staging's ring; bad
values are refused at the kernel's definition."""
from __future__ import annotations

import pytest

import tkc
from tkc import f32, gl, rt, st
from tkc.diagnostics import TkcError
from tkc.ops import group_load, load, store

pytest.importorskip("mlir")


def _kernel(blocks: int, tiles: int):
    @tkc.kernel(warps=4, grid=lambda a, o: (1,), blocks_per_sm=blocks)
    def copy(a: gl(f32, 1, 1, 128, 128), o: gl(f32, 1, 1, 128, 128)):
        s = [st(f32, 128, 128) for _ in range(tiles)]
        for x in s:
            group_load(x, a, (0, 0, 0, 0))
        tkc.sync()
        w = tkc.warpid()
        store(o, load(rt(f32, 16, 128), s[-1], (w, 0)), (0, 0, w, 0))
    return copy


def test_launch_bound_and_registers():
    art = _kernel(2, 1).build()
    assert ".minnctapersm 2" in art.ptx
    assert art.manifest["resources"]["registers"] <= 65536 // (2 * 128)


def test_shared_budget_is_shared():
    _kernel(1, 2).build()                       # 128 KiB: one block an SM has room
    with pytest.raises(TkcError, match="more than the 115712 bytes a block may use with tk.blocks_per_sm"):
        _kernel(2, 2).build()


def test_staging_ring_fits_the_smaller_budget():
    from tkc.kernels.linear_attention import linear_attention
    art = linear_attention(64, 64, False, consumers=1, blocks_per_sm=2).build()
    assert art.manifest["shared_bytes"] <= 115712 < linear_attention(64, 64, False, consumers=1).build() \
        .manifest["shared_bytes"]


@pytest.mark.parametrize("bad", [0, 33, True, 1.5])
def test_refusals(bad):
    with pytest.raises(TkcError, match="blocks_per_sm must be an int in 1..32"):
        tkc.kernel(warps=4, blocks_per_sm=bad)(lambda: None)
