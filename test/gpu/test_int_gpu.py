"""Integer tiles on the GPU (docs/dsl.md, "Integer tiles"): i32 register
tiles and vectors (arithmetic, conversions, comparisons, reductions, moves,
ragged loads and stores), one-element stores of index values (a work list,
a histogram, int64 elements), an argmax that writes i32 indices, and an
int64 gather. Each result is checked against torch (integer results
exactly). argmax and tile_map are test/python/int_kernels.py's, which the
interpreter tests run too."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, i32, i64, rt, rv
from tkc.ops import (abs, col_max, col_sum, iota, load, max, min, relu, row_max, row_sum, store, sum,
                     transpose, where)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from int_kernels import argmax, tile_map  # noqa: E402  (the interpreter tests' kernels)

pytestmark = pytest.mark.gpu

I32_MAX = 2 ** 31 - 1


@tkc.kernel(warps=1)
def int_ops(a: gl(i32, 1, 1, 32, 64), b: gl(i32, 1, 1, 32, 64), f: gl(f32, 1, 1, 32, 64),
            out: gl(i32, 1, 10, 32, 64), outf: gl(f32, 1, 3, 32, 64), t: gl(i32, 1, 1, 64, 32),
            red: gl(i32, 1, 4, 1, 64), n: gl(i32, 1, 1, 1, 16)):
    """Every elementwise op, conversion, reduction and move of an i32 tile."""
    x, y = load(rt(i32, 32, 64), a, (0, 0, 0, 0)), load(rt(i32, 32, 64), b, (0, 0, 0, 0))
    store(out, x + y, (0, 0, 0, 0))
    store(out, x - 7, (0, 1, 0, 0))
    store(out, x * y, (0, 2, 0, 0))                       # wraps modulo 2^32
    store(out, max(x, y), (0, 3, 0, 0))
    store(out, min(x, 3), (0, 4, 0, 0))
    store(out, abs(x), (0, 5, 0, 0))
    store(out, -x + relu(y), (0, 6, 0, 0))
    store(out, where((x < y) | (x == 5), iota(rt(i32, 32, 64), 1, start=10), iota(rt(i32, 32, 64), 0)),
          (0, 7, 0, 0))
    store(out, load(rt(f32, 32, 64), f, (0, 0, 0, 0)).to(i32), (0, 8, 0, 0))   # truncation, saturation
    store(out, where(x > y, x, -1), (0, 9, 0, 0))
    store(outf, x.to(f32), (0, 0, 0, 0))
    store(outf, x.to(bf16).to(f32), (0, 1, 0, 0))
    store(outf, where(x >= y, 1.0, 0.0), (0, 2, 0, 0))
    store(t, transpose(x), (0, 0, 0, 0))
    store(red, row_sum(x), (0, 0, 0, 0))
    store(red, row_max(x), (0, 1, 0, 0))
    store(red, col_sum(x), (0, 2, 0, 0))
    store(red, col_max(y), (0, 3, 0, 0))
    store(n, sum(row_sum(x)), at=(0, 0, 0, 0), clip=True)
    store(n, max(col_max(y)), at=(0, 0, 0, 1), clip=True)
    store(n, min(row_max(x)), at=(0, 0, 0, 2), clip=True)


@tkc.kernel(warps=2, grid=lambda x, y: (tkc.cdiv(x.c, 64), tkc.cdiv(x.r, 32)))
def int_ragged(x: gl(i32, 1, 1, "R", "C"), y: gl(i32, 1, 1, "R", "C")):
    """y = x + 1 on ragged edges (an integer fill past them, clipped stores)."""
    r = tkc.block_idx.y * 2 + tkc.warpid()
    v = load(rt(i32, 16, 64), x, (0, 0, r, tkc.block_idx.x), fill=-5)
    store(y, v + 1, (0, 0, r, tkc.block_idx.x), clip=True)


@tkc.kernel(warps=4, grid=lambda idx, *_: (tkc.cdiv(idx.c, 4),))
def gather64(idx: gl(i64, 1, 1, 1, "N"), src: gl(f32, 1, 1, "V", 64), out: gl(f32, 1, 1, "N", 64),
             big: gl(i64, 1, 1, 1, "N"), echo: gl(i64, 1, 1, 1, "N")):
    """out[i] = src[idx[i]] (int64 indices); echo[i] = big[i] * 3 + 1 in 64 bits."""
    i = tkc.block_idx.x * 4 + tkc.warpid()
    row = load(i64, idx, at=(0, 0, 0, i), fill=0)
    store(out, load(rv(f32, 64, "flat"), src, (0, 0, row, 0)), (0, 0, i, 0), clip=True)
    store(echo, load(i64, big, at=(0, 0, 0, i), fill=0) * 3 + 1, at=(0, 0, 0, i), clip=True)


KERNELS = [int_ops, int_ragged, argmax, tile_map, gather64]   # for `tkc build`


def _wrap32(x):
    """int64 -> int32 keeping the low 32 bits, as the GPU's i32 arithmetic."""
    import torch
    return ((x.long() + 2 ** 31) % 2 ** 32 - 2 ** 31).to(torch.int32)


def test_int_ops():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-2 ** 31, 2 ** 31, (1, 1, 32, 64), generator=g, dtype=torch.int64)
    b = torch.randint(-2 ** 31, 2 ** 31, (1, 1, 32, 64), generator=g, dtype=torch.int64)
    a[0, 0, :4] = torch.randint(-8, 9, (4, 64), generator=g)   # small values: ties, x == 5
    b[0, 0, :4] = torch.randint(-8, 9, (4, 64), generator=g)
    a[0, 0, 4, 0] = -2 ** 31                                    # abs and neg wrap
    f = torch.randn(1, 1, 32, 64, generator=g) * 1e3
    f[0, 0, 0, :4] = torch.tensor([3e9, -3e9, float("nan"), -2.5])
    a32, b32 = a.to(torch.int32).cuda(), b.to(torch.int32).cuda()
    out = torch.full((1, 10, 32, 64), 7, dtype=torch.int32, device="cuda")
    outf = torch.full((1, 3, 32, 64), float("nan"), device="cuda")
    t = torch.zeros(1, 1, 64, 32, dtype=torch.int32, device="cuda")
    red = torch.zeros(1, 4, 1, 64, dtype=torch.int32, device="cuda")
    n = torch.zeros(1, 1, 1, 16, dtype=torch.int32, device="cuda")
    int_ops(a32, b32, f.cuda(), out, outf, t, red, n)
    torch.cuda.synchronize()
    x, y = a[0, 0], b[0, 0]
    cols, rows = torch.arange(64).expand(32, 64), torch.arange(32)[:, None].expand(32, 64)
    want = [x + y, x - 7, x * y, torch.maximum(x, y), torch.minimum(x, torch.tensor(3)), x.abs(),
            -x + y.clamp(min=0), torch.where((x < y) | (x == 5), cols + 10, rows),
            torch.nan_to_num(f[0, 0].double().trunc(), nan=0.0).clamp(-2 ** 31, I32_MAX).long(),
            torch.where(x > y, x, -1)]
    for k, w in enumerate(want):
        assert torch.equal(out[0, k].cpu(), _wrap32(w)), k
    x32 = x.to(torch.int32)
    assert torch.equal(outf[0, 0].cpu(), x32.float())
    assert torch.equal(outf[0, 1].cpu(), x32.float().bfloat16().float())   # through f32, as documented
    assert torch.equal(outf[0, 2].cpu(), (x >= y).float())
    assert torch.equal(t[0, 0].cpu(), x32.T)
    assert torch.equal(red[0, 0, 0, :32].cpu(), _wrap32(x.sum(1)))
    assert torch.equal(red[0, 1, 0, :32].cpu(), _wrap32(x.max(1).values))
    assert torch.equal(red[0, 2, 0].cpu(), _wrap32(x.sum(0)))
    assert torch.equal(red[0, 3, 0].cpu(), _wrap32(y.max(0).values))
    assert n[0, 0, 0, :3].tolist() == _wrap32(torch.stack([x.sum(), y.max(), x.max(1).values.min()])).tolist()


def test_int_ragged():
    torch = pytest.importorskip("torch")
    x = torch.randint(-100, 100, (1, 1, 40, 68), dtype=torch.int32, device="cuda")
    y = torch.full_like(x, 12345)
    int_ragged(x, y)
    torch.cuda.synchronize()
    assert torch.equal(y, x + 1)


def test_argmax():
    torch = pytest.importorskip("torch")
    x = torch.randn(1, 1, 200, 320, device="cuda")
    idx = torch.full((1, 1, 1, 200), -7, dtype=torch.int32, device="cuda")
    argmax(x, idx)
    torch.cuda.synchronize()
    want = np.argmax(x[0, 0].cpu().numpy(), axis=1)   # the first maximum
    assert np.array_equal(idx[0, 0, 0].cpu().numpy(), want)


def test_tile_map():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(1)
    m = torch.randint(0, 8, (1, 1, 40, 150), generator=g, dtype=torch.int32)
    m[0, 0, 16:32, 64:128] = 0                                   # an empty tile
    TR, TC = math.ceil(40 / 16), math.ceil(150 / 64)
    counts = torch.full((1, 1, TR, TC), -9, dtype=torch.int32, device="cuda")
    work = torch.full_like(counts, -9)
    hist = torch.full((1, 1, TR * TC, 8), -9, dtype=torch.int32, device="cuda")
    big = torch.tensor([[[[2 ** 40 + 3, -2 ** 50, 5, 7]]]], dtype=torch.int64, device="cuda")   # one past the grid
    echo = torch.zeros_like(big)
    tile_map(m.cuda(), counts, work, hist, big, echo)
    torch.cuda.synchronize()
    padded = torch.full((TR * 16, TC * 64), -1, dtype=torch.int32)
    padded[:40, :150] = m[0, 0]
    tiles = padded.reshape(TR, 16, TC, 64).permute(0, 2, 1, 3).reshape(TR, TC, -1)
    want_counts = (tiles > 0).sum(-1).int()
    assert torch.equal(counts[0, 0].cpu(), want_counts)
    numbers = torch.arange(TR * TC, dtype=torch.int32).reshape(TR, TC)
    assert torch.equal(work[0, 0].cpu(), torch.where(want_counts > 0, numbers, -1))
    want_hist = torch.stack([(tiles == k).sum(-1).int().reshape(-1) for k in range(8)], 1)
    assert torch.equal(hist[0, 0].cpu(), want_hist)
    assert echo[0, 0, 0].tolist() == [2 ** 41 + 5, -2 ** 51 - 1, 9, 0]


def test_gather64():
    torch = pytest.importorskip("torch")
    N, V = 50, 300
    idx = torch.randint(0, V, (1, 1, 1, N), dtype=torch.int64, device="cuda")
    big = torch.randint(-2 ** 50, 2 ** 50, (1, 1, 1, N), dtype=torch.int64, device="cuda")
    src = torch.randn(1, 1, V, 64, device="cuda")
    out = torch.full((1, 1, N, 64), float("nan"), device="cuda")
    echo = torch.zeros_like(big)
    gather64(idx, src, out, big, echo)
    torch.cuda.synchronize()
    assert torch.equal(out[0, 0], src[0, 0][idx[0, 0, 0]])
    assert torch.equal(echo, big * 3 + 1)


def test_int64_tensors_are_refused_for_i32_gls():
    torch = pytest.importorskip("torch")
    with pytest.raises(tkc.diagnostics.TkcError, match="expected dtype i32, found i64"):
        int_ragged(torch.zeros(1, 1, 16, 64, dtype=torch.int64, device="cuda"),
                   torch.zeros(1, 1, 16, 64, dtype=torch.int32, device="cuda"))
