"""Block reductions on the GPU against numpy and torch: the elementwise ones
must match numpy's float32 sums in warp order bit for bit, those after a
warp's own row/column reduction to rounding; a LayerNorm of rows split over
the warps against torch; a reduction in a run-time loop (its scratch reused)
and in a pipelined loop's consumers (their named barrier)."""
import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, rv, st, tma
from tkc.ops import (add_col, block_col_sum, block_max, block_min, block_row_max, block_row_sum, block_sum,
                     col_sum, load, mul_col, mul_row, rsqrt, store, sub_row, sum, zero)

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

W = 4
LN_WARPS, D = 8, 1024   # LayerNorm rows: 8 warps of 128 columns
EPS = 1e-5


@tkc.kernel(warps=W, grid=lambda x, o, c, r, s: (x.r // (16 * W),))
def block_tiles(x: gl(f32, 1, 1, "N", 64), o: gl(f32, 1, 3, "N", 64), c: gl(f32, 1, 3, "B", 64),
                r: gl(f32, 1, 1, "N", 64), s: gl(f32, 1, 3, 1, "N")):
    """Each block: its warps' 16 x 64 tiles of x reduced over the warps as a
    tile (o), after a column sum (c, a "row" vector), as a flat vector per
    row (r) and as a scalar (s), by sum, max and min."""
    w, blk = tkc.warpid(), tkc.block_idx.x
    t = load(rt(f32, 16, 64), x, (0, 0, blk * W + w, 0))
    for i, op in enumerate((block_sum, block_max, block_min)):
        store(o, op(t), (0, i, blk * W + w, 0))
        store(c, op(col_sum(t)), (0, i, blk, 0))
        store(s, op(sum(load(rv(f32, 64, "flat"), x, (0, 0, blk * 16 * W + w, 0)))),
              at=(0, i, 0, blk * W + w), clip=True)
    v = load(rv(f32, 64, "flat"), x, (0, 0, blk * 16 * W + 16 * w, 0))
    store(r, block_sum(v), (0, 0, blk * 16 * W + w, 0))


@tkc.kernel(warps=LN_WARPS, grid=lambda x, w, b, y: (x.r // 16,))
def block_layernorm(x: gl(f32, 1, 1, "N", D), w: gl(f32, 1, 1, 1, D), b: gl(f32, 1, 1, 1, D),
                    y: gl(f32, 1, 1, "N", D)):
    """16 rows a block, each split over the warps (warp i: columns 128i..)."""
    i, rows, L = tkc.warpid(), tkc.block_idx.x, D // LN_WARPS
    t = load(rt(f32, 16, L), x, (0, 0, rows, i))
    d = sub_row(t, block_row_sum(t) * (1.0 / D))
    r = rsqrt(block_row_sum(d * d) * (1.0 / D) + EPS)
    out = mul_col(mul_row(d, r), load(rv(f32, L, "row"), w, (0, 0, 0, i)))
    store(y, add_col(out, load(rv(f32, L, "row"), b, (0, 0, 0, i))), (0, 0, rows, i))


@tkc.kernel(warps=W, grid=lambda x, o: (1,))
def block_running(x: gl(f32, 1, 1, None, 64), o: gl(f32, 1, 1, 1, 64)):
    """A block_max and a block_row_max per iteration of a run-time loop."""
    m = load(rv(f32, 64, "flat"), x, (0, 0, tkc.warpid(), 0))
    rm = zero(rv(f32, 16, "col"))
    for k in tkc.range(1, x.r // W):
        m = block_max(m + load(rv(f32, 64, "flat"), x, (0, 0, k * W + tkc.warpid(), 0)))
        rm = rm + block_row_max(load(rt(f32, 16, 16), x, (0, 0, 0, tkc.warpid())))
    with tkc.if_(tkc.warpid() == 0):
        store(o, m + sum(rm), (0, 0, 0, 0))


@tkc.kernel(warps=W, grid=lambda x, o: (1,))
def block_pipelined(x: gl(bf16, 1, 1, None, 64), o: gl(f32, 1, 1, 1, 64)):
    """Column sums of a tall x through a TMA pipeline: the consumers' block
    sums meet on their own named barrier."""
    x_s = st(bf16, 64, 64)
    acc = zero(rv(f32, 64, "row"))
    for k in tkc.range(x.r // 64, stages=2):
        tma.load(x_s, x, (0, 0, k, 0))
        acc = acc + block_col_sum(load(rt(bf16, 16, 64), x_s, (tkc.warpid(), 0)).to(f32))
    with tkc.if_(tkc.warpid() == 0):
        store(o, acc, (0, 0, 0, 0))


def on_gpu(kernel, *arrays):
    """The kernel's outputs for numpy inputs (float32; bf16 where the gl is)."""
    gpu = [torch.from_numpy(a.copy()).cuda() for a in arrays]
    kernel(*gpu)
    torch.cuda.synchronize()
    return [g.cpu().numpy() for g in gpu]


def in_order(parts, fn=np.add):
    """The warps' values combined in warp order in float32, ((x0 + x1) + x2) + ...:
    what the GPU computes, bit for bit."""
    acc = parts[0]
    for p in parts[1:]:
        acc = fn(acc, p, dtype=np.float32)
    return acc


def test_tiles_vectors_scalars():
    rng = np.random.default_rng(0)
    n, blocks = 16 * W * 3, 3
    x = rng.standard_normal((1, 1, n, 64), dtype=np.float32)
    x[0, 0, 5, 7] = np.nan                      # max/min: a NaN loses to a number
    outs = [np.zeros((1, 3, n, 64), np.float32), np.zeros((1, 3, blocks, 64), np.float32),
            np.zeros((1, 1, n, 64), np.float32), np.zeros((1, 3, 1, n), np.float32)]
    _, o, c, r, s = on_gpu(block_tiles, x, *outs)
    for blk in range(blocks):
        rows = x[0, 0, blk * 16 * W:(blk + 1) * 16 * W]
        tiles = list(rows.reshape(W, 16, 64))
        for i, fn in enumerate((np.add, np.fmax, np.fmin)):
            want = in_order(tiles, fn)
            for w in range(W):                  # every warp: the same bits
                np.testing.assert_array_equal(o[0, i, (blk * W + w) * 16:(blk * W + w + 1) * 16], want)
            cols = [t.astype(np.float64).sum(0) for t in tiles]
            np.testing.assert_allclose(c[0, i, blk], in_order(cols, fn), rtol=1e-5, atol=1e-5)
            sums = [rows[w].astype(np.float64).sum() for w in range(W)]
            np.testing.assert_allclose(s[0, i, 0, blk * W:(blk + 1) * W], in_order(sums, fn), rtol=1e-5, atol=1e-5)
        want = in_order([rows[16 * w] for w in range(W)])
        for w in range(W):
            np.testing.assert_array_equal(r[0, 0, blk * 16 * W + w], want)


def test_layernorm_against_torch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 1, 96, D), dtype=np.float32) * 3 + 1
    w = rng.standard_normal((1, 1, 1, D), dtype=np.float32)
    b = rng.standard_normal((1, 1, 1, D), dtype=np.float32)
    xt, wt, bt = (torch.from_numpy(a).cuda() for a in (x, w, b))
    y = torch.zeros_like(xt)
    block_layernorm(xt, wt, bt, y)
    ref = torch.nn.functional.layer_norm(xt[0, 0].double(), (D,), wt[0, 0, 0].double(), bt[0, 0, 0].double(), EPS)
    assert float((y[0, 0].double() - ref).abs().max()) < 1e-3


def test_in_a_loop():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 1, 16 * W, 64), dtype=np.float32)
    (_, o) = on_gpu(block_running, x, np.zeros((1, 1, 1, 64), np.float32))
    m, rm = x[0, 0, :W], np.zeros(16)
    for k in range(1, 16):
        m = np.broadcast_to(in_order(list(m + x[0, 0, k * W:k * W + W]), np.fmax), (W, 64))
        rm = rm + x[0, 0, :16, :16 * W].max(1)
    np.testing.assert_allclose(o[0, 0, 0], m[0] + rm.sum(), rtol=1e-5, atol=1e-4)


def test_in_a_pipelined_loop():
    x = torch.randn(1, 1, 64 * 7, 64, dtype=torch.bfloat16, device="cuda")
    o = torch.zeros(1, 1, 1, 64, device="cuda")
    block_pipelined(x, o)
    torch.testing.assert_close(o[0, 0, 0], x[0, 0].float().sum(0), rtol=1e-4, atol=1e-4)
