"""warpgroup.load / warpgroup.store: each warp moves its 16 rows of the
warpgroup's 64-row tile (numbers through the interpreter)."""
import numpy as np
import pytest

import tkc
from tkc import f32, gl, rt, st, warpgroup
from tkc.diagnostics import TkcError

pytest.importorskip("mlir")


@tkc.kernel(warps=8, grid=lambda a, o: (a.c // 32, a.r // 128))
def copy_through_warpgroups(a: gl(f32, 1, 1, "M", "N"), o: gl(f32, 1, 1, "M", "N")):
    """Warpgroup g of block (x, y) copies the 64 x 32 tile (2y + g, x), the
    upper warpgroup through shared memory."""
    x, y, g = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
    s = st(f32, 128, 32)
    t = warpgroup.load(rt(f32, 16, 32), a, (0, 0, y * 2 + g, x))
    warpgroup.store(s, t, (g, 0))
    tkc.sync()
    u = warpgroup.load(rt(f32, 16, 32), s, (g, 0))
    warpgroup.store(o, u * 2.0, (0, 0, y * 2 + g, x))


def test_each_warp_moves_its_rows():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 64)).astype(np.float32)
    o = np.full_like(a, np.nan)
    copy_through_warpgroups.interpret(a, o)
    np.testing.assert_array_equal(o, 2 * a)


def test_register_side_must_have_16_rows():
    @tkc.kernel(warps=4)
    def k(a: gl(f32, 1, 1, 64, 32)):
        warpgroup.load(rt(f32, 32, 32), a, (0, 0, 0, 0))
    with pytest.raises(TkcError, match="16 rows"):
        k.trace()
