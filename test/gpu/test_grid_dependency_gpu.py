"""Back-to-back kernels with programmatic stream serialization (every launch
allows it, every kernel first waits for the grid before it: docs/tile-ir.md).
A chain of dependent launches, each reading what the one before wrote, where
a launch's first blocks read the rows the previous launch's last blocks
write, adds up every step: no block reads before the grid before it is done."""
import pytest

import tkc
from tkc import f32, gl, rt
from tkc.ops import load, store

pytestmark = pytest.mark.gpu
try:  # the kernels below must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None

ROWS = 64  # a block's rows: 4 warps of 16
G = gl(f32, 1, 1, "R", 64)


def _add_one(x, y, block):
    r = block * 4 + tkc.warpid()
    store(y, load(rt(f32, 16, 64), x, (0, 0, r, 0)) + 1.0, (0, 0, r, 0))


@tkc.kernel(warps=4, grid=lambda x, y: (tkc.cdiv(x.r, ROWS),))
def add_one(x: G, y: G):
    """y = x + 1, block b on rows 64b.. 64b + 63."""
    _add_one(x, y, tkc.block_idx.x)


@tkc.kernel(warps=4, grid=lambda x, y: (tkc.cdiv(x.r, ROWS),))
def add_one_reversed(x: G, y: G):
    """The same, block b on the rows add_one's last block takes when b is 0."""
    _add_one(x, y, tkc.cdiv(x.r, ROWS) - 1 - tkc.block_idx.x)


def test_dependent_launches_read_what_the_one_before_wrote():
    a = torch.zeros(64 * 1024, 64, device="cuda")   # 1024 blocks: several waves a launch
    b = torch.empty_like(a)
    steps = 400
    for i in range(steps):
        (add_one if i % 2 == 0 else add_one_reversed)(a.view(1, 1, -1, 64), b.view(1, 1, -1, 64))
        a, b = b, a
    torch.cuda.synchronize()
    assert torch.equal(a, torch.full_like(a, steps))


def test_a_captured_chain_replays_in_order():
    """The same chain captured in a CUDA graph (programmatic edges) and replayed."""
    a = torch.zeros(64 * 256, 64, device="cuda")
    b = torch.empty_like(a)
    add_one(a.view(1, 1, -1, 64), b.view(1, 1, -1, 64))   # loaded and planned outside the capture
    add_one_reversed(b.view(1, 1, -1, 64), a.view(1, 1, -1, 64))
    a.zero_()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(10):
            add_one(a.view(1, 1, -1, 64), b.view(1, 1, -1, 64))
            add_one_reversed(b.view(1, 1, -1, 64), a.view(1, 1, -1, 64))
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(a, torch.full_like(a, 60))
