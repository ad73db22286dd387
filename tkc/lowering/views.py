"""Lowering of the view ops: tk.stage (a slot of a ring) and tk.subtile (a
part of a tile). No data moves: a view is the same memory or registers under
another type (docs/tile-ir.md, "Block level").

- `tk.stage(%ring, %i)`: the ring's `Shared` `i * stride` bytes further
  (smem.stride: the slot type's size rounded up to its alignment, as
  shared.plan lays rings out). A constant index folds into the static offset;
  a run-time one becomes the dynamic part, so the users' addresses add one
  register instead of a branch per slot.
- `tk.subtile` of an st<R, C> as st<R', C'> at (i, j): rows i*R' are
  i*R'*S bytes further inside every panel (S-byte rows; C*E when unswizzled),
  cols j*C' are j*C'/P whole panels further, pitch*S bytes each. The view
  keeps its parent's pitch: its panels stay where the parent's are.
  Constant indices fold; run-time ones are dynamic.
- `tk.subtile` of an rt: the part's scalars. A lane's element of the part
  is the tile's element at the part's origin plus its own coordinate, and
  the lane's share of both is the same (fragments.py), so each part scalar
  is the tile scalar whose lane-0 coordinate matches: whole base tiles, or
  for an 8-row part the top or bottom half of each (k = 0, 1, 4, 5 or
  2, 3, 6, 7). The indices must be constants.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from ..diagnostics import error
from ..dialect.types import RT, ST, view
from ..dtypes import itemsize
from ..dialect.attrs import constant, ring_stages
from ..hopper import fragments, shared as smem
from ..hopper.shared import subtile_problems
from .core import Frag, Shared, rule

_SWIZZLES = {0: "none", 32: "32b", 64: "64b", 128: "128b"}


# ---------------------------------------------------------------- offsets

def _index(n: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), n)


def _shifted(sh: Shared, view_, parts, pitch: int) -> Shared:
    """`sh` moved by `parts`: (index operand, its constant or None, bytes per
    unit). Constants fold into the static offset; the rest adds to `dynamic`."""
    offset, dynamic = sh.offset, sh.dynamic
    for value, const, unit in parts:
        if not unit:
            continue
        if const is not None:
            offset += const * unit
            continue
        term = arith.muli(value, _index(unit))
        dynamic = term if dynamic is None else arith.addi(dynamic, term)
    return Shared(view_, offset, dynamic, pitch)


def _check_index(op, what: str, const, count: int) -> None:
    if const is not None and not 0 <= const < count:
        raise error(op, f"{op.name}: {what} index {const} is out of range 0..{count - 1}")


# ---------------------------------------------------------------- tk.stage

@rule("tk.stage")
def _stage(lw, op, args):
    ring, i = args
    slots = ring_stages(op.operands[0])
    if slots is None or not isinstance(ring, Shared):
        raise error(op, "tk.stage: the ring must be a tk.alloc {stages = N} result")
    k = constant(op.operands[1])
    _check_index(op, "slot", k, slots)
    return [_shifted(ring, ring.view, [(i, k, smem.stride(ring.view))], ring.pitch)]


# ---------------------------------------------------------------- tk.subtile

@rule("tk.subtile")
def _subtile(lw, op, args):
    x, out = args[0], view(op.result.type)
    xv = x.view if isinstance(x, (Shared, Frag)) else None
    problems = subtile_problems(xv, out)
    if problems:
        raise error(op, "; ".join(problems))
    consts = [constant(v) for v in op.operands[1:3]]
    _check_index(op, "row", consts[0], xv.rows // out.rows)
    _check_index(op, "col", consts[1], xv.cols // out.cols)
    if isinstance(xv, RT):
        return [_rt_part(op, x, out, consts)]
    return [_st_part(op, x, _keep_swizzle(op, xv, out), args[1:3], consts)]


def _keep_swizzle(op, parent: ST, out: ST) -> ST:
    """The view with its parent's swizzle (tk-layout-selection sets it; an
    `auto` view resolves to the parent's, never to its own width's rule)."""
    s = smem.swizzle_bytes(parent)
    if out.swizzle == "auto":
        out = out.with_(swizzle=_SWIZZLES[s])
    if smem.swizzle_bytes(out) != s:
        raise error(op, f"tk.subtile: a view keeps its tile's layout ({_SWIZZLES[s]} swizzle), "
                        f"found {out.text()}")
    return out


def _st_part(op, x: Shared, out: ST, idx, consts) -> Shared:
    e, s = itemsize(out.dtype), smem.swizzle_bytes(out)
    if not s:  # row-major, whole rows (tk-verify): only the row index moves
        row_bytes, col_bytes = x.view.cols * e, 0
    else:
        row_bytes, col_bytes = s, (out.cols * e // s) * x.pitch * s
    return _shifted(x, out, [(idx[0], consts[0], out.rows * row_bytes),
                             (idx[1], consts[1], col_bytes)], x.pitch)


def _rt_part(op, x: Frag, out: RT, consts) -> Frag:
    if None in consts:
        raise error(op, "tk.subtile: the indices of a register tile must be constants "
                        "(registers cannot be indexed at run time)")
    t = x.view
    held = {fragments.tile_coord(t.rows, t.cols, t.layout, n, 0): n for n in range(len(x.vals))}
    r0, c0 = consts[0] * out.rows, consts[1] * out.cols
    coords = (fragments.tile_coord(out.rows, out.cols, out.layout, n, 0)
              for n in range(fragments.tile_elems(out.rows, out.cols)))
    return Frag(out, [x.vals[held[(r0 + r, c0 + c)]] for r, c in coords])
