"""Block reductions (docs/dsl.md, "Block reductions"): block_sum/max/min of an
f32 tile, vector or F32, and block_row_*/block_col_* of a tile, across the
block's warps. Every warp must call one (it synchronises like tkc.sync), so
they are not written under a tkc.if_. A sum adds the warps' values in warp
order in f32: its error bound is the warps' bounds added, plus a rounding
each add.
"""
from __future__ import annotations

from . import statements as S
from . import values as V
from .values import Val


def block(g) -> Val | None:
    if g.in_if:
        return None
    r = g.rng
    x = g.pick(kinds=("rt", "rv", "f32"), dtype="f32")
    if x is None:
        return None
    w = g.warps
    if x.kind == "rt" and r.random() < 0.5:
        op = r.choice(("block_row_sum", "block_row_max", "block_col_sum", "block_col_max"))
        row = op.startswith("block_row")
        n, axis = (x.shape[0], x.shape[1]) if row else (x.shape[1], x.shape[0])
        x = S.as_row(g, x)
        k = w * axis
        if op.endswith("sum"):
            v = Val(g.fresh(), "rv", "f32", (n,), "col" if row else "row", 0, 0).derive(
                g.fresh(), k * x.lo, k * x.hi, k * x.err + V.EPS["f32"] * k * x.bound)
        else:
            v = Val(g.fresh(), "rv", "f32", (n,), "col" if row else "row", x.lo, x.hi, x.err)
    else:
        op = r.choice(("block_sum", "block_max", "block_min"))
        if op == "block_sum":
            v = x.derive(g.fresh(), w * x.lo, w * x.hi, w * x.err + V.EPS["f32"] * w * x.bound)
        else:
            v = x.derive(g.fresh(), x.lo, x.hi, x.err, exact_op=True)
    if not v.sane():
        return None
    g.emit(f"{v.name} = {op}({x.name})", op)
    return v
