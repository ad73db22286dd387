"""The integer-tile test kernels shared by the interpreter tests
(test_int_tiles.py) and the GPU's (test/gpu/test_int_gpu.py): imports tkc
only, so a GPU machine without MLIR imports it too."""
import math

import tkc
from tkc import f32, gl, i32, i64, rt, rv
from tkc.ops import col_sum, iota, load, max, neg_infty, ones, row_max, row_sum, store, sub_row, sum, where, zero

I32_MAX = 2 ** 31 - 1


@tkc.kernel(warps=4, grid=lambda x, idx: (tkc.cdiv(x.r, 64),))
def argmax(x: gl(f32, 1, 1, "R", "C"), idx: gl(i32, 1, 1, 1, "R")):
    """idx[r] = the first column of row r's largest value (x.c a multiple of
    64): a running max and argmax (i32 vectors carried through the loop) over
    64-column tiles."""
    row = tkc.block_idx.x * 4 + tkc.warpid()
    best, arg = neg_infty(rv(f32, 16)), zero(rv(i32, 16))
    for j in tkc.range(x.c // 64):
        s = load(rt(f32, 16, 64), x, (0, 0, row, j), fill=-math.inf)
        m = row_max(s)
        col = iota(rt(i32, 16, 64), 1, start=j * 64)
        first = -row_max(-where(sub_row(s, m) == 0.0, col, I32_MAX))   # the first column holding m
        arg = where(m > best, first, arg)
        best = max(best, m)
    store(idx, arg, (0, 0, 0, row), clip=True)


@tkc.kernel(warps=1, grid=lambda m, *_: (tkc.cdiv(m.c, 64), tkc.cdiv(m.r, 16)))
def tile_map(m: gl(i32, 1, 1, "R", "C"), counts: gl(i32, 1, 1, "TR", "TC"), work: gl(i32, 1, 1, "TR", "TC"),
             hist: gl(i32, 1, 1, "T", 8), big: gl(i64, 1, 1, 1, "E"), echo: gl(i64, 1, 1, 1, "E")):
    """Per 16 x 64 tile of m: its nonzeros (counts), its number or -1 when
    empty (work: a tile map), and how many of its elements hold 0..7 (hist,
    a row per tile); and int64 elements: echo[c] = big[c] * 2 - 1 in 64 bits
    (by row 0's blocks), as index values are."""
    bx, by = tkc.block_idx.x, tkc.block_idx.y
    tile = by * tkc.grid_dim.x + bx
    t = load(rt(i32, 16, 64), m, (0, 0, by, bx), fill=-1)
    n = sum(row_sum(where(t > 0, ones(rt(i32, 16, 64)), 0)))
    store(counts, n, at=(0, 0, by, bx), clip=True)
    store(work, where(n > 0, tile, -1), at=(0, 0, by, bx), clip=True)
    for k in range(8):
        store(hist, sum(col_sum(where(t == k, ones(rt(i32, 16, 64)), 0))), at=(0, 0, tile, k), clip=True)
    v = load(i64, big, at=(0, 0, 0, bx), fill=-1)
    with tkc.if_((by == 0) & (tkc.warpid() == 0)):
        store(echo, v * 2 - 1, at=(0, 0, 0, bx), clip=True)
