"""Statements of integer values (docs/dsl.md, "Integer tiles"): i32 tiles made
by the initialisers and iota, and index scalars (ids, element loads of i32 and
i64 gls). The arithmetic, comparisons, where, reductions, broadcasts and
conversions of i32 tiles are the float statements' (statements.py), which
pick int constants and leave out what integers do not do (exp, div, fma,
mma, shared tiles). Integers are exact on every side, so any of them may feed
a comparison; i32 arithmetic wraps modulo 2^32 (values.wrap).
"""
from __future__ import annotations

from .values import I32, Val

INT_INITS = ("zero", "ones", "fill", "iota", "neg_infty", "pos_infty")


def init_i32(g) -> Val:
    """zero/ones/fill/iota/neg_infty/pos_infty of an i32 tile."""
    r = g.rng
    t = Val(g.fresh(), "rt", "i32", (r.choice((16, 32)), r.choice((16, 32, 64))), r.choice(("row", "col")), 0.0, 0.0)
    which = r.choice(INT_INITS)
    if which == "iota":
        axis = r.randrange(2)
        n = t.shape[axis]
        g.emit(f"{t.name} = iota({t.type_text()}, {axis}, start={g.tile_row_expr()} * {n} - 3)", "iota_i32")
        return Val(t.name, "rt", "i32", t.shape, t.layout, -3.0, float(n * (g.warps * g.grid[1] + 4)))
    if which == "fill":
        c = r.choice((5, -9, 2 ** 30))
        g.emit(f"{t.name} = fill({t.type_text()}, {c})", "fill_i32")
        return Val(t.name, "rt", "i32", t.shape, t.layout, float(c), float(c))
    g.emit(f"{t.name} = {which}({t.type_text()})", which + "_i32")
    c = {"zero": 0.0, "ones": 1.0, "neg_infty": I32[0], "pos_infty": I32[1]}[which]
    return Val(t.name, "rt", "i32", t.shape, t.layout, c, c)


def index(g) -> Val | None:
    """An Index: one element of an i32 (or i64) gl, or of the ids."""
    r = g.rng
    how = r.random()
    v = Val(g.fresh(), "index", "i32", (), "", 0.0, 0.0)
    if how < 0.4 and g.int_inputs:
        x = r.choice(g.int_inputs)
        lo, hi = next(a.ints for a in g.args if a.name == x)
        fill = r.choice((0, -1, 5))
        g.emit(f"{v.name} = load(i32, {x}, at=(0, 0, {g.tile_row_expr()}, {g.tile_col_expr()} + {r.randrange(4)}), "
               f"fill={fill})", "load_i32_element")
        return Val(v.name, "index", "i32", (), "", float(min(lo, fill)), float(max(hi, fill)))
    if how < 0.55 and g.wide_input:
        # an int64 element: past i32's range, kept whole by index arithmetic; its
        # distance from the base is small (exact as f32, an i32 store's low bits differ)
        x, base = g.wide_input
        g.emit(f"{v.name} = load(i64, {x}, at=(0, 0, 0, {g.tile_col_expr()} + {r.randrange(4)}), fill={base}) "
               f"- {base}", "load_i64_element")
        return Val(v.name, "index", "i32", (), "", 0.0, 64.0)
    k = r.choice((1, 3, -2))
    g.emit(f"{v.name} = {g.tile_row_expr()} * {k} + tkc.block_idx.x", "index_arith")
    n = g.warps * g.grid[1] + 4
    return Val(v.name, "index", "i32", (), "", float(min(0, k * n)), float(max(0, k * n) + g.grid[0]))
