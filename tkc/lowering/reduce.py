"""Row/column reductions and vector broadcasts of register tiles.

In the row layout (fragments.py) lane (g, t) holds, per 16x16 base tile,
rows g and g+8 and columns 2t, 2t+1, 2t+8, 2t+9. So a row reduction first
combines the thread's own elements of each row, then combines across the 4
lanes of a quad (same g, t = 0..3) with butterfly shuffles xor 1, 2; a column
reduction combines across the 8 quads (same t) with xor 4, 8, 16. After the
butterflies every lane holds the full result, which is exactly the
replication the rv layouts promise. Arithmetic is in f32.

Broadcasts are shuffle-free: element k of base tile (i, j) meets the rv slot
of its own row (fragments.row_vec_slot) or column (col_vec_slot).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import nvvm

from ..diagnostics import error
from ..dialect.types import RT, RV
from . import fragments
from .compute import BINARY, from_f32, frag_arg, result_view, to_f32
from .core import Frag, rule

QUAD_XORS = (1, 2)          # lanes of a quad: same row g
COLUMN_XORS = (4, 8, 16)    # quads: same column pair t

_REDUCE = {"tk.row_max": "max", "tk.row_sum": "add", "tk.col_max": "max", "tk.col_sum": "add"}


def shuffle_xor(lw, v: ir.Value, mask: int) -> ir.Value:
    """The value of v held by lane (lane ^ mask): shfl.sync.bfly over the full warp."""
    return nvvm.shfl_sync(v.type, lw.const_i32(-1), v, lw.const_i32(mask), lw.const_i32(31),
                          nvvm.ShflKind.bfly)


def _tree(fn, vals):
    """Combine vals pairwise (a balanced tree: shorter dependency chains)."""
    while len(vals) > 1:
        vals = [fn(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i]
                for i in range(0, len(vals), 2)]
    return vals[0]


def _check_reduce(op, x, v, rows: bool):
    if not isinstance(x.view, RT) or x.view.layout != "row":
        raise error(op, f"{op.name} needs an rt in row layout, found {op.operands[0].type}")
    want = RV(v.dtype, x.view.rows if rows else x.view.cols, "col" if rows else "row")
    if v != want:
        raise error(op, f"{op.name} of {x.view.text()} gives {want.text()}, found {v.text()}")


@rule(*_REDUCE)
def _reduce(lw, op, args):
    x, v = frag_arg(op, args[0]), result_view(op)
    rows = op.name.startswith("tk.row")
    _check_reduce(op, x, v, rows)
    init = args[1] if len(args) > 1 else None
    if init is not None and (not isinstance(init, Frag) or init.view.with_(dtype=v.dtype) != v):
        raise error(op, f"{op.name}: init must be {v.with_(dtype='f32').text()}-shaped, found {op.operands[1].type}")
    fn = BINARY[_REDUCE[op.name]]
    groups = _row_groups(x.view) if rows else _col_groups(x.view)
    out = []
    for slot, members in enumerate(groups):
        acc = _tree(fn, [to_f32(x.vals[m], x.view.dtype) for m in members])
        for mask in (QUAD_XORS if rows else COLUMN_XORS):
            acc = fn(acc, shuffle_xor(lw, acc, mask))
        if init is not None:
            acc = fn(to_f32(init.vals[slot], init.view.dtype), acc)
        out.append(from_f32(acc, v.dtype))
    return [Frag(v, out)]


def _row_groups(t: RT) -> list[list[int]]:
    """For each slot of the "col" rv (2 per 16 rows), the flat fragment
    positions of the thread's elements in that row."""
    nj = t.cols // fragments.BASE
    return [[fragments.tile_index(t.rows, t.cols, i, j, k)
             for j in range(nj) for k in range(8) if fragments.row_vec_slot(k) == h]
            for i in range(t.rows // fragments.BASE) for h in range(2)]


def _col_groups(t: RT) -> list[list[int]]:
    """For each slot of the "row" rv (4 per 16 columns): the thread's elements in that column."""
    ni = t.rows // fragments.BASE
    return [[fragments.tile_index(t.rows, t.cols, i, j, k)
             for i in range(ni) for k in range(8) if fragments.col_vec_slot(k) == s]
            for j in range(t.cols // fragments.BASE) for s in range(4)]


# ---------------------------------------------------------------- broadcasts

def _broadcast_slot(t: RT, index: int, rows: bool) -> int:
    """The rv position element `index` of a row-layout tile reads."""
    blk, k = divmod(index, fragments.PER_BASE_TILE)
    i, j = divmod(blk, t.cols // fragments.BASE)
    return 2 * i + fragments.row_vec_slot(k) if rows else 4 * j + fragments.col_vec_slot(k)


@rule(*(f"tk.{o}_{d}" for o in ("add", "sub", "mul", "div") for d in ("row", "col")))
def _broadcast(lw, op, args):
    x, vec, out_view = frag_arg(op, args[0]), frag_arg(op, args[1], 1), result_view(op)
    rows = op.name.endswith("_row")
    if not isinstance(x.view, RT) or x.view.layout != "row" or out_view != x.view:
        raise error(op, f"{op.name} needs an rt in row layout and gives the same type, "
                        f"found {op.operands[0].type} -> {op.results[0].type}")
    want = RV(vec.view.dtype, x.view.rows if rows else x.view.cols, "col" if rows else "row")
    if vec.view != want:
        raise error(op, f"{op.name} of {x.view.text()} needs a vector {want.text()}, found {vec.view.text()}")
    fn = BINARY[op.name[3:6]]
    vs = [to_f32(e, vec.view.dtype) for e in vec.vals]
    out = [from_f32(fn(to_f32(e, x.view.dtype), vs[_broadcast_slot(x.view, n, rows)]), x.view.dtype)
           for n, e in enumerate(x.vals)]
    return [Frag(out_view, out)]
