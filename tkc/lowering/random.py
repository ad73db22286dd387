"""Lowering of tk.rand: Philox4x32-10, as tkc/philox.py computes it.

Each run of a lane's adjacent elements (hopper.lanes.runs / vec_runs) draws its
numbers from aligned groups of 4 (one Philox call each, counter n = e // 4):
a wide tile's 8 and a flat vector's chunks of 4 or 8 use every word of
their calls, a row-layout pair picks 2 of 4 (by e % 4, a lane's bit), a
col-layout element 1 of 4. A round is two 32-bit multiplies for
each of the low and high words (mul.lo/mul.hi.u32) and two 3-input xors; the key schedule depends
only on the seed, so it is computed once. The word becomes (u >> 8) * 2^-24.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm

from .. import philox
from ..dialect.types import RT
from ..hopper import fragments
from .compute import from_f32, result_view
from .core import Frag, rule
from ..hopper.lanes import runs, vec_runs
from .access import _add, _idx, _mul
from .lanes import _lane_rc, _vec_lane


def _i32(v):
    return arith.index_cast(ir.IntegerType.get_signless(32), v)


def _c32(n: int):
    i32 = ir.IntegerType.get_signless(32)
    return arith.constant(i32, ir.IntegerAttr.get(i32, n - (1 << 32) if n >= 1 << 31 else n))


def philox4x32(counter: list, keys: list) -> list:
    """The 4 output words (i32 Values) for counter words and the per-round keys."""
    c0, c1, c2, c3 = counter
    m0, m1 = _c32(philox.M0), _c32(philox.M1)
    for k0, k1 in keys:
        lo0, hi0 = _mulhilo(c0, m0)
        lo1, hi1 = _mulhilo(c2, m1)
        c0, c1, c2, c3 = (arith.xori(arith.xori(hi1, c1), k0), lo1,
                          arith.xori(arith.xori(hi0, c3), k1), lo0)
    return [c0, c1, c2, c3]


def _mulhilo(a, b):
    """(low, high) words of the 64-bit product: mul.lo.u32 and mul.hi.u32
    (LLVM's own mului_extended goes through i64 and keeps the rounds there)."""
    i32 = ir.IntegerType.get_signless(32)
    return arith.muli(a, b), llvm.call_intrinsic(i32, "llvm.nvvm.mulhi.ui", [a, b], [], [])


def _round_keys(seed) -> list:
    """(k0, k1) of every round: (seed, 0) bumped by (W0, W1) after each."""
    return [(arith.addi(seed, _c32(r * philox.W0 & philox.MASK)) if r else seed,
             _c32(r * philox.W1 & philox.MASK)) for r in range(philox.ROUNDS)]


def _to_unit(word, dtype: str):
    f32 = ir.F32Type.get()
    u = arith.uitofp(f32, arith.shrui(word, _c32(8)))
    return from_f32(arith.mulf(u, arith.constant(f32, 2.0 ** -24)), dtype)


def _pick(words: list, k):
    """words[k] for an i32 Value k in 0..3 (three selects)."""
    def eq(n):
        return arith.cmpi(arith.CmpIPredicate.eq, k, _c32(n))
    return arith.select(eq(0), words[0], arith.select(eq(1), words[1],
                        arith.select(eq(2), words[2], words[3])))


@rule("tk.rand")
def _rand(lw, op, args):
    v = result_view(op)
    seed, offset, base, stride = args
    if isinstance(v, RT):
        lr, lc = _lane_rc(lw, v.layout)
        lane_e = _add(base, _add(_mul(lr, stride), lc))
        places = [(i, _add(_mul(r, stride), c), n) for i, r, c, n in runs(v)]
    else:
        lane_e = _add(base, _vec_lane(lw, v))
        places = list(vec_runs(v))
    keys, c2, zero = _round_keys(_i32(seed)), _i32(offset), _c32(0)
    i64 = ir.IntegerType.get_signless(64)
    vals = [None] * (fragments.tile_elems(v.rows, v.cols) if isinstance(v, RT)
                     else fragments.vec_elems(v.length, v.kind))
    for i, at, n in places:
        for g in range(0, n, 4):
            e = _add(lane_e, _add(at, g))
            group = arith.index_cast(i64, arith.shrui(e, _idx(2)))
            words = philox4x32([arith.trunci(ir.IntegerType.get_signless(32), group),
                                arith.trunci(ir.IntegerType.get_signless(32),
                                             arith.shrui(group, arith.constant(i64, 32))),
                                c2, zero], keys)
            m = min(4, n - g)
            if m < 4:  # a run shorter than a group: its words sit at e % 4
                k = _i32(arith.andi(e, _idx(3)))
                words = [_pick(words, arith.addi(k, _c32(j)) if j else k) for j in range(m)]
            for j in range(m):
                vals[i + g + j] = _to_unit(words[j], v.dtype)
    return [Frag(v, vals)]
