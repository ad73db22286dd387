"""Scalars on the GPU (issue 41), against numpy: comparisons of f32 and index
values (NaNs included), scalars carried through tkc.range loops (a plain and
a pipelined one) and out of tkc.if_ branches, and atomic_add after gls of
different shapes and dtypes (register stores, and a pipelined loop's TMA
stores with the store warp). One block per row of inputs: many cases a
launch."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import tkc
from tkc import f32, gl, i32, rt, st, tma, warpgroup
from tkc.ops import atomic_add, col_max, load, max, store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from atomic_kernels import atomic_after_two  # noqa: E402  (the interpreter tests' kernels)
from scalar_kernels import (expected_comparisons, expected_sv_element, scalar_branches,  # noqa: E402
                            scalar_compare, scalar_running, sv_element)

pytestmark = pytest.mark.gpu
try:  # the kernels above the tests must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None

NAN = float("nan")


def test_an_element_of_an_sv():
    """load(tkc.f32, s, at=(i,)): every lane of warp w reads element 7w + 3 of the sv."""
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    y = torch.zeros(1, 1, 1, 128, device="cuda")
    sv_element(torch.from_numpy(x).cuda().view(1, 1, 1, 64), y)
    np.testing.assert_array_equal(y.cpu().numpy().reshape(-1), expected_sv_element(x))


def test_scalar_comparisons():
    rng = np.random.default_rng(0)
    R = 64
    x = rng.integers(-3, 4, (R, 16)).astype(np.float32) * 0.5
    n = rng.integers(-3, 4, (R, 16)).astype(np.int32)
    x[:4, 0], x[4:8, 1], x[8, :2] = NAN, NAN, NAN
    y = torch.full((R, 32), -1.0, device="cuda")
    scalar_compare(torch.from_numpy(x).cuda(), torch.from_numpy(n).cuda(), y)
    y = y.cpu().numpy()
    for r in range(R):
        a, b, i, j = x[r, 0], x[r, 1], int(n[r, 0]), int(n[r, 1])
        want = expected_comparisons(a, b, i, j)
        np.testing.assert_array_equal(y[r, :len(want)], np.array(want, np.float32), err_msg=f"row {r}")
        assert y[r, 31] == ([k for k, t in enumerate(want) if t] or [-1])[-1], r
        np.testing.assert_array_equal(y[r, 20:23], [np.fmax(a, b), np.fmin(np.fmin(a, i), 0.5),
                                                    np.max([i, j, 1])], err_msg=f"row {r}")


@pytest.mark.parametrize("n", [0, 1, 100])
def test_scalars_carried_through_a_loop(n):
    x = np.random.default_rng(n).random((32, 100)).astype(np.float32)
    y = torch.zeros(32, 16, device="cuda")
    scalar_running(torch.from_numpy(x).cuda(), y, n)
    y = y.cpu().numpy()
    p = x[:, :n]
    if n:
        want = np.stack([p.max(1), p.argmax(1), (p > 0.5).sum(1), x[:, 0] * (n + 1), x[:, 0],
                         (p > 0.9).any(1)], 1)
    else:
        want = np.stack([np.full(32, -np.inf), np.full(32, -1), np.zeros(32), x[:, 0], x[:, 0],
                         np.zeros(32)], 1)
    np.testing.assert_allclose(y[:, :6], want.astype(np.float32), rtol=1e-5)


def test_scalars_carried_out_of_ifs():
    x = (np.random.default_rng(1).random((64, 16)) * 4).astype(np.float32)
    y = torch.zeros(64, 16, device="cuda")
    scalar_branches(torch.from_numpy(x).cuda(), y)
    a, b = x[:, 0], x[:, 1]
    n = np.where((a > 0.5) & (b > 0.5), 2, 0) + np.where(b > a, np.trunc(a), 0)
    want = np.stack([np.maximum(a, b), np.minimum(a, b), np.where(a > 0.5, 7.0, -1.0), n], 1)
    np.testing.assert_array_equal(y.cpu().numpy()[:, :4], want.astype(np.float32))


@tkc.kernel(warps=4, grid=lambda x, y: (1, 1))
def scalar_pipelined_max(x: gl(f32, 1, 1, None, 64), y: gl(f32, 1, 1, 1, 64)):
    """A pipelined loop (TMA loads in a producer warpgroup) carrying an f32
    max and a tile count; warp w writes the max of its 16 rows of every tile."""
    x_s = st(f32, 64, 64)
    m, c = tkc.f32(-math.inf), tkc.i32(0)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2):
        tma.load(x_s, x, (0, 0, i, 0))
        m = max(m, max(col_max(warpgroup.load(rt(f32, 16, 64), x_s))))
        c = c + 1
    store(y, m, at=(0, 0, 0, tkc.warpid()), clip=True)
    store(y, c.to(f32), at=(0, 0, 0, 4 + tkc.warpid()), clip=True)


def test_scalars_carried_through_a_pipelined_loop():
    x = torch.randn(64 * 5, 64, device="cuda")
    y = torch.zeros(1, 64, device="cuda")
    scalar_pipelined_max(x, y)
    want = x.cpu().numpy().reshape(5, 4, 16, 64).max(axis=(0, 2, 3))
    np.testing.assert_array_equal(y.cpu().numpy()[0, :8], np.concatenate([want, np.full(4, 5.0)]))


def test_atomic_add_after_two_outputs():
    blocks = 264   # more than the SMs: blocks finish in any order
    x = torch.randint(-8, 8, (blocks * 32, 16), device="cuda").float()
    o1, o2 = torch.zeros(32, 16, device="cuda"), torch.zeros(blocks * 32, 16, device="cuda", dtype=torch.bfloat16)
    count, y = torch.zeros(1, 1, device="cuda", dtype=torch.int32), torch.zeros(32, 16, device="cuda")
    atomic_after_two(x, o1, o2, count, y)
    assert count.item() == blocks
    np.testing.assert_array_equal(y.cpu().numpy(), 2 * x.cpu().numpy().reshape(blocks, 32, 16).sum(0))


@tkc.kernel(warps=4, grid=lambda x, acc, o, count, out: (x.r // 64, 1, 1))
def atomic_after_two_tma(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 64, 64), o: gl(f32, None, 1, None, 64),
                         count: gl(i32, 1, 1, 1, 16), out: gl(f32, 1, 1, 64, 64)):
    """A pipelined loop per block with the store warp: TMA reduce-adds of x's
    tiles into acc and TMA copies of them into o[block] (two gls of different
    shapes); the last block to count itself adds acc and every copy into out."""
    x_s, a_s, b_s = st(f32, 64, 64), st(f32, 64, 64), st(f32, 64, 64)
    for i in tkc.range(x.r // 64, stages=2, store_warp=True):
        tma.load(x_s, x, (0, 0, i, 0))
        t = warpgroup.load(rt(f32, 16, 64), x_s)
        warpgroup.store(a_s, t, (0, 0))
        tma.store_add(acc, a_s, (0, 0, 0, 0))
        warpgroup.store(b_s, t, (0, 0))
        tma.store(o, b_s, (tkc.block_idx.x, 0, i, 0))
    with tkc.if_(atomic_add(count, 1, at=(0, 0, 0, 0), after=[acc, o]) == x.r // 64 - 1):
        w = tkc.warpid()
        t = load(rt(f32, 16, 64), acc, (0, 0, w, 0))
        for k in tkc.range(x.r // 64):
            for i in tkc.range(x.r // 64):
                t = t + load(rt(f32, 16, 64), o, (k, 0, 4 * i + w, 0))
        store(out, t, (0, 0, w, 0))


def test_atomic_add_after_tma_stores_to_two_gls():
    tiles = 6
    x = torch.randint(-8, 8, (64 * tiles, 64), device="cuda").float()
    acc, o = torch.zeros(64, 64, device="cuda"), torch.zeros(tiles, 1, 64 * tiles, 64, device="cuda")
    count, out = torch.zeros(1, 16, device="cuda", dtype=torch.int32), torch.zeros(64, 64, device="cuda")
    atomic_after_two_tma(x, acc, o, count, out)
    xs = x.cpu().numpy()
    assert count[0, 0].item() == tiles
    np.testing.assert_array_equal(o.cpu().numpy()[:, 0], np.stack([xs] * tiles))
    np.testing.assert_array_equal(out.cpu().numpy(), 2 * tiles * xs.reshape(tiles, 64, 64).sum(0))
