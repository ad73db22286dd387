"""8-row tiles on the GPU (docs/dsl.md, "Tile shapes"): a grouped-query
attention decode step whose 8 query heads of a KV head are an 8-row tile
(through shared memory and TMA, and through registers alone), and the ops on
8-row tiles one by one, on ragged edges. Each result is compared with the
interpreter's on the same inputs (and the attention with numpy); the CPU
tests (test/python/test_rows8.py) run these kernels in the interpreter and,
those without shared memory, in the lane simulator."""
import math

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, rv, st, tma
from tkc.ops import (add_col, add_row, col_max, col_sum, copy, div_row, exp, exp2, group_store, iota, load, mma_AB, mma_ABt, mul_col,
                     mul_row, neg_infty, roll, row_max, row_sum, store, sub_row, subtile, where, zero)

pytestmark = pytest.mark.gpu
try:  # the kernels below must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None

D, KV = 64, 64          # head dim, keys per step
LOG2E = math.log2(math.e)


def _attend(q_r, k_r, v_r, j, n, m, l, o_r, c):
    """One 64-key step of online softmax attention for 8 query rows (keys
    from j * KV; those at n and past masked)."""
    s = zero(rt(f32, 8, KV))
    mma_ABt(s, q_r, k_r, s)                                  # S = Q K^T: 8 x 64
    s = where(iota(rt(f32, 8, KV), 1) + j * KV < n, s * c, -math.inf)
    m_prev = copy(rv(f32, 8), m)
    row_max(m, s, m)
    exp2(s, sub_row(s, m))
    alpha = exp2(m_prev - m)
    l = l * alpha
    row_sum(l, s, l)
    mul_row(o_r, o_r, alpha)
    mma_AB(o_r, s.to(bf16), v_r, o_r)                        # O += P V: 8 x D
    return m, l, o_r


@tkc.kernel(warps=1, grid=lambda q, k, v, o, scale: (q.d, q.b))
def gqa_decode(q: gl(bf16, "B", "H", 8, D), k: gl(bf16, "B", "H", "N", D),
               v: gl(bf16, "B", "H", "N", D), o: gl(bf16, "B", "H", 8, D), scale: tkc.f32):
    """softmax(Q K^T scale) V for the 8 query heads sharing KV head h: Q and O
    move as 8-row TMA boxes and ldmatrix/stmatrix .x2, K and V by pipelined
    TMA (zeros past N, masked)."""
    h, b = tkc.block_idx.x, tkc.block_idx.y
    q_s, o_s = st(bf16, 8, D), st(bf16, 8, D)
    k_s, v_s = st(bf16, KV, D), st(bf16, KV, D)
    tma.load(q_s, q, (b, h, 0, 0))
    q_r = load(rt(bf16, 8, D), q_s, (0, 0))
    o_r = zero(rt(f32, 8, D))
    m, l = neg_infty(rv(f32, 8)), zero(rv(f32, 8))
    for j in tkc.range(tkc.cdiv(k.r, KV), stages=2):
        tma.load(k_s, k, (b, h, j, 0))
        tma.load(v_s, v, (b, h, j, 0))
        k_r = load(rt(bf16, KV, D), k_s, (0, 0))
        v_r = load(rt(bf16, KV, D, "col"), v_s, (0, 0))
        m, l, o_r = _attend(q_r, k_r, v_r, j, k.r, m, l, o_r, scale * LOG2E)
    div_row(o_r, o_r, l)
    store(o_s, o_r.to(bf16), (0, 0))
    tma.store(o, o_s, (b, h, 0, 0))


@tkc.kernel(warps=1, grid=lambda q, k, v, o, scale: (q.d, q.b))
def gqa_decode_regs(q: gl(bf16, "B", "H", 8, D), k: gl(bf16, "B", "H", "N", D),
                    v: gl(bf16, "B", "H", "N", D), o: gl(f32, "B", "H", 8, D), scale: tkc.f32):
    """gqa_decode with every tile loaded from global memory into registers
    (K and V ragged: zeros past N)."""
    h, b = tkc.block_idx.x, tkc.block_idx.y
    q_r = load(rt(bf16, 8, D), q, (b, h, 0, 0))
    o_r = zero(rt(f32, 8, D))
    m, l = neg_infty(rv(f32, 8)), zero(rv(f32, 8))
    for j in tkc.range(tkc.cdiv(k.r, KV)):
        k_r = load(rt(bf16, KV, D), k, (b, h, j, 0), fill=0.0)
        v_r = load(rt(bf16, KV, D, "col"), v, (b, h, j, 0), fill=0.0)
        m, l, o_r = _attend(q_r, k_r, v_r, j, k.r, m, l, o_r, scale * LOG2E)
    div_row(o_r, o_r, l)
    store(o, o_r, (b, h, 0, 0))


@tkc.kernel(warps=1, grid=lambda x, w, out, vec: (tkc.cdiv(x.c, 64), tkc.cdiv(x.r, 8)))
def rows8_ops(x: gl(f32, 1, 1, "R", "C"), w: gl(bf16, 1, 1, 64, 32), out: gl(f32, 1, 8, "R", "C"),
              vec: gl(f32, 1, 3, "T", "C")):
    """Each op on an 8 x 64 tile of x (ragged: fill past the edges, clipped
    stores): math, row and column reductions and broadcasts, masks, picks,
    rolls, an 8-row subtile of a 16-row tile, and mma with an 8-row A and C."""
    bx, by = tkc.block_idx.x, tkc.block_idx.y
    at = (0, 0, by, bx)
    t = load(rt(f32, 8, 64), x, at, fill=0.5)
    store(out, exp(t) * 0.5 - t, (0, 0, by, bx), clip=True)
    store(out, sub_row(t, row_max(t)) + mul_col(t, col_sum(t)), (0, 1, by, bx), clip=True)
    store(out, where((t > 0.25) | (iota(rt(f32, 8, 64), 0) == 3.0), t, iota(rt(f32, 8, 64), 1)),
          (0, 2, by, bx), clip=True)
    store(out, roll(t, 3, 0) + roll(t, -5, 1), (0, 3, by, bx), clip=True)
    both = load(rt(f32, 16, 64), x, (0, 0, by // 2, bx), fill=-1.0)
    halves = subtile(both, 8, 64, (0, 0)) - subtile(both, 8, 64, (1, 0)) * 2.0
    store(out, add_col(add_row(halves, t[:, 9]), t[6, :]), (0, 4, by, bx), clip=True)
    p = zero(rt(f32, 8, 32))
    mma_AB(p, t.to(bf16), load(rt(bf16, 64, 32, "col"), w, (0, 0, 0, 0)), p)
    store(out, p, (0, 5, by, 2 * bx), clip=True)
    store(vec, row_sum(t), (0, 0, bx, by), clip=True)       # a "col" rv of 8
    store(vec, col_max(t), (0, 1, by, bx), clip=True)
    store(vec, row_max(exp2(t)), (0, 2, bx, by), clip=True)


@tkc.kernel(warps=2, grid=lambda a, o, f: (a.r // 16,))
def rows8_shared(a: gl(bf16, 1, 1, "R", 64), o: gl(bf16, 1, 1, "R", 64), f: gl(f32, 1, 2, "H", 64)):
    """8-row tiles through shared memory: a 16-row TMA box read as two 8-row
    subtiles (one a warp, ldmatrix .x2), written by stmatrix .x2 into 8-row
    sts that leave as 8-row TMA boxes; an f32 8-row st (element stores and
    loads) leaves by a group copy."""
    r, w = tkc.block_idx.x, tkc.warpid()
    s, f_s = st(bf16, 16, 64), st(f32, 8, 64)
    o_s = [st(bf16, 8, 64) for _ in range(2)]
    tma.load(s, a, (0, 0, r, 0))
    x = load(rt(bf16, 8, 64), subtile(s, 8, 64, (w, 0)), (0, 0))
    for i in range(2):
        with tkc.if_(w == i):
            store(o_s[i], x * 2.0, (0, 0))
    with tkc.if_(w == 1):
        store(f_s, load(rt(f32, 8, 64), s, (1, 0)) + 1.0, (0, 0))
    tkc.sync()
    for i in range(2):
        tma.store(o, o_s[i], (0, 0, 2 * r + i, 0))
    group_store(f, f_s, (0, 0, r, 0), warps=1)
    with tkc.if_(w == 0):
        store(f, load(rt(f32, 8, 64), f_s, (0, 0)) * 3.0, (0, 1, r, 0))


KERNELS = [gqa_decode, gqa_decode_regs, rows8_ops, rows8_shared]   # for `tkc build`


def gqa_reference(q, k, v, scale):
    """softmax(q k^T scale) v per (batch, KV head), in float64."""
    s = np.einsum("bhqd,bhnd->bhqn", q.astype(np.float64), k) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqn,bhnd->bhqd", p / p.sum(-1, keepdims=True), v)


def _interpreted(kernel, tensors, *scalars):
    """The interpreter's outputs for the kernel's inputs (every tensor copied
    to float32 numpy first: the interpreter holds bf16 values as float32)."""
    arrays = [t.float().cpu().numpy().copy() for t in tensors]
    kernel.interpret(*arrays, *scalars)
    return arrays


def _bf16(shape, g):
    return torch.randn(*shape, generator=g).to(torch.bfloat16).cuda()


@pytest.mark.parametrize("n", [64, 100, 7, 1000])
def test_gqa_decode(n):
    """Both GQA kernels against the interpreter and numpy, N ragged or whole."""
    g = torch.Generator().manual_seed(n)
    q, k, v = _bf16((2, 3, 8, D), g), _bf16((2, 3, n, D), g), _bf16((2, 3, n, D), g)
    want = gqa_reference(*(t.float().cpu().numpy() for t in (q, k, v)), 0.125)
    for kernel, dtype, tol in ((gqa_decode, torch.bfloat16, 2e-2), (gqa_decode_regs, torch.float32, 1e-2)):
        o = torch.full((2, 3, 8, D), float("nan"), device="cuda", dtype=dtype)
        kernel(q, k, v, o, 0.125)
        torch.cuda.synchronize()
        got = o.float().cpu().numpy()
        interpreted = _interpreted(kernel, [q, k, v, o], 0.125)[3]
        np.testing.assert_allclose(got, interpreted, atol=tol, rtol=tol, err_msg=kernel.name)
        np.testing.assert_allclose(got, want, atol=2 * tol, rtol=2 * tol, err_msg=kernel.name)


def test_rows8_ops_on_ragged_edges():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(21, 100, generator=g).cuda()
    w = _bf16((64, 32), g)
    out, vec = torch.zeros(8, 21, 100, device="cuda"), torch.zeros(3, 24, 100, device="cuda")
    rows8_ops(x, w, out, vec)
    torch.cuda.synchronize()
    _, _, want_out, want_vec = _interpreted(rows8_ops, [x, w, out, vec])
    np.testing.assert_allclose(out.cpu().numpy(), want_out, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(vec.cpu().numpy(), want_vec, rtol=1e-5, atol=1e-5)


def test_rows8_through_shared_memory():
    g = torch.Generator().manual_seed(2)
    a = _bf16((48, 64), g)
    o = torch.full((48, 64), float("nan"), device="cuda", dtype=torch.bfloat16)
    f = torch.full((2, 24, 64), float("nan"), device="cuda")
    rows8_shared(a, o, f)
    torch.cuda.synchronize()
    _, want_o, want_f = _interpreted(rows8_shared, [a, o, f])
    np.testing.assert_array_equal(o.float().cpu().numpy(), want_o)
    np.testing.assert_array_equal(f.cpu().numpy(), want_f)
