"""mbarriers and TMA on the GPU, against PyTorch: loads into swizzled shared
tiles (one and two 128-byte panels), read back through registers or stored
by TMA, and TMA store-add. Small shapes, one tile per block."""
import pytest

import tkc
from tkc import bf16, f32, gl, rt, st, tma
from tkc.ops import load, store

pytestmark = pytest.mark.gpu
try:  # the kernels above the tests must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None


@tkc.kernel(warps=4, grid=lambda a, o: (a.c // 64, a.r // 64))
def tma_load_64x64(a: gl(bf16, 1, 1, "M", "N"), o: gl(bf16, 1, 1, "M", "N")):
    """TMA into a 128b-swizzled st, then each warp moves 16 rows st -> rt -> gl."""
    x, y, w = tkc.block_idx.x, tkc.block_idx.y, tkc.warpid()
    s = st(bf16, 64, 64, "128b")
    bar = tkc.barrier()
    with tkc.if_(w == 0):
        tma.expect(bar, s)
        tma.load_async(s, a, (0, 0, y, x), bar)
    tkc.wait(bar, 0)
    t = load(rt(bf16, 16, 64), s, (w, 0))
    store(o, t, (0, 0, y * 4 + w, x))


@tkc.kernel(warps=1, grid=lambda a, o: (a.c // 128, a.r // 64))
def tma_roundtrip_64x128(a: gl(bf16, 1, 1, "M", "N"), o: gl(bf16, 1, 1, "M", "N")):
    """Two panels each way: TMA load, then TMA store of the same st."""
    x, y = tkc.block_idx.x, tkc.block_idx.y
    s = st(bf16, 64, 128, "128b")
    bar = tkc.barrier()
    tma.expect(bar, s)
    tma.load_async(s, a, (0, 0, y, x), bar)
    tkc.wait(bar, 0)
    tma.store_async(o, s, (0, 0, y, x))
    tma.store_async_wait()


@tkc.kernel(warps=1, grid=lambda a, o: (a.c // 32, a.r // 64))
def tma_accumulate(a: gl(f32, 1, 1, "M", "N"), o: gl(f32, 1, 1, "M", "N")):
    """o += a twice per tile with TMA store-add; the loop reuses the barrier:
    phase 0 then phase 1."""
    x, y = tkc.block_idx.x, tkc.block_idx.y
    s = st(f32, 64, 32, "128b")
    bar = tkc.barrier()
    for i in tkc.range(2):
        tma.expect(bar, s)
        tma.load_async(s, a, (0, 0, y, x), bar)
        tkc.wait(bar, i % 2)
        tma.store_add_async(o, s, (0, 0, y, x))
        tma.store_async_wait()  # s is overwritten by the next load


def test_tma_load_into_swizzled_tile():
    a = torch.randn(128, 192, device="cuda", dtype=torch.bfloat16)
    o = torch.full_like(a, float("nan"))
    tma_load_64x64(a, o)
    torch.cuda.synchronize()
    assert torch.equal(o, a)


def test_tma_two_panel_roundtrip():
    a = torch.randn(192, 256, device="cuda", dtype=torch.bfloat16)
    o = torch.full_like(a, float("nan"))
    tma_roundtrip_64x128(a, o)
    torch.cuda.synchronize()
    assert torch.equal(o, a)


def test_tma_store_add():
    a = torch.randn(128, 64, device="cuda", dtype=torch.float32).round()  # exact sums
    o = torch.randn(128, 64, device="cuda", dtype=torch.float32).round()
    want = o + 2 * a
    tma_accumulate(a, o)
    torch.cuda.synchronize()
    assert torch.equal(o, want)
