"""The tile operations, ThunderKittens style (`from tkc.ops import *`).

Every op has TK's in-place form, whose first argument is the destination
handle (rebound to the result and returned), and a functional form returning
a new handle; the forms are told apart by argument count or type:

    exp(dst, src)             exp(src)
    add(dst, a, b)            add(a, b)            b: tile, f32 value or number
    fma(dst, x, y, z)         fma(x, y, z)         x * y + z; y, z: tile or number
    row_max(dst, src[, acc])  row_max(src, init=None)
                              sum(v), max(v), min(v)   a whole vector -> f32
    row_pick(x, j), x[:, j]   col_pick(x, i), x[i, :]  one column / row as a vector
                              roll(x, shift, axis)     numpy.roll, a constant shift
                              rsqrt(x), fma(x, y, z)   math on f32 scalars too
    where(t < 0.5, t, 0.0)    where(lt(a, b) & (c >= 1), x, y)     masks (no bool tiles)
    sub_row(dst, src, vec)    sub_row(src, vec)
    mma_ABt(d, a, b, c)       mma_ABt(a, b, c)
    swap_layout(dst, src)     swap_layout(src)     (also transpose)
    copy(dst, src)            src.to(dtype)

Initialisers zero/ones/neg_infty/pos_infty/fill(dst[, value])/iota(dst, axis)
always take the destination. Memory ops: load(dst, src, coords), store(dst, src, coords),
group_load(st, gl, coords, warps=N), group_store(gl, st, coords, warps=N).

Types are checked by the ops where it is cheap, so mistakes point at the author's
line; tk-verify checks the rest.

The ops live in modules by concept, gathered here: operands.py (what every op
does with its operands and result), elementwise.py (initialisers, maps, fma,
masks and where), axes.py (reductions, picks, roll, broadcasts, mma, layout),
memory.py (loads, stores, group copies, atomic_add, subtiles), block.py (reductions
over the block's warps); operators.py
installs Reg's Python operators (x + y, t < 0.5, x.to(bf16)).
"""
from __future__ import annotations

from . import operators  # noqa: F401  (installs Reg's operators: x + y, t < 0.5, x[:, j], ...)
from .axes import (add_col, add_row, col_max, col_pick, col_sum, div_col, div_row, mma_AB,
                   mma_ABt, mma_AtB, mma_AtBt, mul_col, mul_row, roll, row_max, row_pick,
                   row_sum, sub_col, sub_row, swap_layout, transpose)
from .block import (block_col_max, block_col_sum, block_max, block_min, block_row_max, block_row_sum,
                    block_sum)
from .complex import partwise
from .elementwise import (abs, add, copy, div, eq, erf, exp, exp2, fill, fma, ge, gelu,
                          gelu_tanh, gt, iota, le, log, log2, lt, max, min, mul, ne, neg,
                          neg_infty, ones, pos_infty, rand, rcp, relu, rsqrt, sigmoid, silu,
                          sqrt, sub, sum, tanh, where, zero)
from .memory import (atomic_add, group_load, group_store, load, load_split, store, store_join,
                     subtile)

__all__ = [
    "zero", "ones", "neg_infty", "pos_infty", "fill", "iota", "rand",
    "copy", "exp", "exp2", "log", "log2", "abs", "relu", "neg",
    "sqrt", "rsqrt", "rcp", "sigmoid", "silu", "tanh", "erf", "gelu", "gelu_tanh", "fma",
    "add", "sub", "mul", "div", "max", "min", "sum",
    "lt", "le", "gt", "ge", "eq", "ne", "where",
    "row_max", "row_sum", "col_max", "col_sum", "row_pick", "col_pick", "roll",
    "add_row", "sub_row", "mul_row", "div_row", "add_col", "sub_col", "mul_col", "div_col",
    "mma_AB", "mma_ABt", "mma_AtB", "mma_AtBt",
    "swap_layout", "transpose",
    "load", "store", "load_split", "store_join", "group_load", "group_store", "subtile",
    "atomic_add",
    "block_sum", "block_max", "block_min", "block_row_sum", "block_row_max", "block_col_sum",
    "block_col_max",
]


# complex tiles (tkc.crt, tkc.cst, tkc.cgl): the data movers act on each part.
# Extended here, where authors get them, not where they are defined: complex.py's
# arithmetic uses elementwise.fma, so elementwise.py cannot import complex.py.
zero, copy, load, store, group_load, group_store, subtile = (
    partwise(f) for f in (zero, copy, load, store, group_load, group_store, subtile))
