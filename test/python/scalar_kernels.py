"""The scalar test kernels (issue 41), shared by the interpreter tests
(test_scalars.py, one row) and the GPU's (test/gpu/test_scalars_gpu.py, a
block per row of inputs: many cases a launch): imports tkc only, so a GPU
machine without MLIR imports it too (and numpy, for the expected values)."""
import math

import numpy as np

import tkc
from tkc import f32, gl, i32, rv, sv
from tkc.ops import ge, group_load, load, lt, max, min, ne, store, where


@tkc.kernel(warps=1, grid=lambda x, n, y: (x.r, 1))
def scalar_compare(x: gl(f32, 1, 1, "R", 16), n: gl(i32, 1, 1, "R", 16), y: gl(f32, 1, 1, "R", 32)):
    """Row r: a, b = x[r, :2], i, j = n[r, :2]; every comparison of f32 and
    index values (mixed ones compare as f32) as 1.0 / 0.0 through where, the
    last true one's number through tkc.if_, max, min."""
    r = tkc.block_idx.x
    a, b = load(f32, x, at=(0, 0, r, 0), fill=0.0), load(f32, x, at=(0, 0, r, 1), fill=0.0)
    i, j = load(i32, n, at=(0, 0, r, 0), fill=0), load(i32, n, at=(0, 0, r, 1), fill=0)
    conds = [a < b, a <= b, a > b, a >= b, a == b, a != b,
             i < j, i <= j, i > j, i >= j, i == j, i != j,
             i < a, a <= i, i == 2.5, lt(a, b), ge(i, j), ne(a, 1.0)]
    for k, c in enumerate(conds):
        store(y, where(c, 1.0, 0.0), at=(0, 0, r, k), clip=True)
        with tkc.if_(c):
            store(y, tkc.f32(k), at=(0, 0, r, 31), clip=True)   # the last true one stays
    store(y, max(a, b), at=(0, 0, r, 20), clip=True)
    store(y, min(a, i, 0.5), at=(0, 0, r, 21), clip=True)
    store(y, max(i, j, 1).to(f32), at=(0, 0, r, 22), clip=True)


def expected_comparisons(a, b, i, j):
    """scalar_compare's conds in numpy (lt, ge, ne as the operators)."""
    return [a < b, a <= b, a > b, a >= b, a == b, a != b,
            i < j, i <= j, i > j, i >= j, i == j, i != j,
            i < a, a <= i, i == 2.5, a < b, i >= j, a != 1.0]


@tkc.kernel(warps=1, grid=lambda x, y, n: (x.r, 1))
def scalar_running(x: gl(f32, 1, 1, "R", "N"), y: gl(f32, 1, 1, "R", 16), n: i32):
    """Scalars carried through a loop over row r's first n elements: a running
    max, its index, a sum, a count through a tkc.if_, a flag, and two names
    holding one value at the start (each keeps its own)."""
    r = tkc.block_idx.x
    m, best, c = tkc.f32(-math.inf), tkc.i32(-1), tkc.i32(0)
    s = load(f32, x, at=(0, 0, r, 0), fill=0.0)
    first = s                            # not changed in the loop: keeps x[r, 0]
    seen = x.c < 0                       # a Bool, false
    for i in tkc.range(n):
        v = load(f32, x, at=(0, 0, r, i), fill=0.0)
        best = where(v > m, i, best)
        m = max(m, v)
        with tkc.if_(v > 0.5):
            c = c + 1
        s = s + first
        seen = seen | (v > 0.9)
    for k, value in enumerate((m, best.to(f32), c.to(f32), s, first, where(seen, 1.0, 0.0))):
        store(y, value, at=(0, 0, r, k), clip=True)


@tkc.kernel(warps=1, grid=lambda x, y: (x.r, 1))
def scalar_branches(x: gl(f32, 1, 1, "R", 16), y: gl(f32, 1, 1, "R", 16)):
    """Scalars carried out of ifs: with and without an else, read right after
    (the if is finished then), a number assigned in a branch, nested ifs, an
    f32 converted into an index."""
    r = tkc.block_idx.x
    a, b = load(f32, x, at=(0, 0, r, 0), fill=0.0), load(f32, x, at=(0, 0, r, 1), fill=0.0)
    hi, lo, n = tkc.f32(0.0), tkc.f32(0.0), tkc.i32(0)
    with tkc.if_(a > b):
        hi, lo = a, b
    with tkc.else_():
        hi, lo = b, a
    top = tkc.f32(-1.0)
    with tkc.if_(a > 0.5):
        top = 7.0                        # a number, materialised in the branch
        with tkc.if_(b > 0.5):
            n = n + 2
    store(y, top, at=(0, 0, r, 2), clip=True)   # read right after: the if's result
    with tkc.if_(b > a):
        n = n + a.to(i32)
    for k, value in enumerate((hi, lo)):
        store(y, value, at=(0, 0, r, k), clip=True)
    store(y, n.to(f32), at=(0, 0, r, 3), clip=True)


@tkc.kernel(warps=4, grid=lambda x, y: (1,))
def sv_element(x: gl(f32, 1, 1, 1, 64), y: gl(f32, 1, 1, 1, 128)):
    """One element of an sv a warp (load(tkc.f32, s, at=(i,))): warp w's 32
    outputs are x[:32] * x[7w + 3], the element read by every lane."""
    s = sv(f32, 64)
    group_load(s, x, (0, 0, 0, 0))
    tkc.sync()
    v = load(f32, s, at=(tkc.warpid() * 7 + 3,))
    store(y, load(rv(f32, 32, "row"), x, (0, 0, 0, 0)) * v, (0, 0, 0, tkc.warpid()))


def expected_sv_element(x):
    """sv_element's y for x [64]."""
    return np.concatenate([x[:32] * x[7 * w + 3] for w in range(4)])
