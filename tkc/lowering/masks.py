"""Lowering of masks: tk.iota and tk.where.

iota: an element's coordinate is its lane-0 coordinate plus the lane's part
(hopper.lanes.lane_offset for tiles, the vector's lane part for vectors), so each
value is one f32 add of a constant to the lane's part, which is converted to
f32 once per kernel. With a start, the start is added to the lane's part
first: in a loop whose start changes, nothing per element is invariant (LLVM
would hoist an iota's per-element values out of the loop, into registers).

where: per element, one compare (fcmp in f32) and one select. A comparison
of two iotas (a causal mask: col <= row) compares their lanes' difference,
one value a thread, with each element's constant difference: no per-element
coordinate is kept. That value passes through a volatile asm at the where,
so LLVM cannot hoist the compares of a loop-invariant mask out of the loop
(their results would then live across it in registers, one per element).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from ..diagnostics import error
from ..dialect.types import RT, RV
from ..hopper import fragments
from .compute import from_f32, result_view, to_f32
from .core import Frag, rule
from .lanes import _lane_rc, _vec_lane

_CMPF = {"lt": "OLT", "le": "OLE", "gt": "OGT", "ge": "OGE", "eq": "OEQ", "ne": "UNE"}


def _as_f32(lw, key, index_value):
    """An index Value as f32, converted once per kernel."""
    return lw.once(("iota_lane", key), lambda: arith.uitofp(
        ir.F32Type.get(), arith.index_cast(ir.IntegerType.get_signless(32), index_value)))


def _iota_parts(lw, op, args):
    """(the lane's part with the start, as f32; each element's constant)."""
    v, axis = result_view(op), ir.IntegerAttr(op.attributes["axis"]).value
    if isinstance(v, RT) and axis in (0, 1):
        lane = _as_f32(lw, (v.layout, axis), _lane_rc(lw, v.layout)[axis])
        static = [fragments.tile_coord(v.rows, v.cols, v.layout, i, 0)[axis]
                  for i in range(fragments.tile_elems(v.rows, v.cols))]
    elif isinstance(v, RV) and axis == 0:
        lane = _as_f32(lw, (v.kind, v.length), _vec_lane(lw, v))
        static = [fragments.vec_coord(v.length, v.kind, i, 0)
                  for i in range(fragments.vec_elems(v.length, v.kind))]
    else:
        raise error(op, f"tk.iota: axis {axis} of {op.results[0].type} (0 or 1 for an rt, 0 for an rv)")
    if args:  # (lane + start) + s: one value per element would be loop-invariant
        lane = arith.addf(lane, args[0])  # and hoisted (registers); these are not
    return lane, static


@rule("tk.iota")
def _iota(lw, op, args):
    v, f32 = result_view(op), ir.F32Type.get()
    lane, static = _iota_parts(lw, op, args)
    return [Frag(v, [from_f32(arith.addf(lane, arith.constant(f32, float(s))) if s else lane, v.dtype)
                     for s in static])]


def _iota_of(lw, value):
    """(lane part, constants) of `value` if a tk.iota made it, else None."""
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.name == "tk.iota":
        return _iota_parts(lw, owner, [lw.lookup(x) for x in owner.operands])
    return None


def _opaque(value):
    """value through a volatile asm: computed here, never hoisted."""
    from mlir.dialects import llvm
    return llvm.inline_asm(value.type, [value], "mov.b32 $0, $1;", "=f,f", has_side_effects=True)


@rule("tk.where")
def _where(lw, op, args):
    v = result_view(op)
    n = fragments.tile_elems(v.rows, v.cols) if isinstance(v, RT) else fragments.vec_elems(v.length, v.kind)
    cols = [_operand(op, a, v, n, pos) for pos, a in enumerate(args)]
    pred = getattr(arith.CmpFPredicate, _CMPF[op.attributes["cmp"].value])
    iotas = [_iota_of(lw, x) for x in list(op.operands)[:2]]
    if all(iotas) and all(len(c) == n for _, c in iotas):
        # a_i op b_i  <=>  (lane_a - lane_b) op (s_b,i - s_a,i): exact (small integers)
        (la, sa), (lb, sb) = iotas
        f32 = ir.F32Type.get()
        d = _opaque(arith.subf(la, lb))
        conds = [arith.cmpf(pred, d, arith.constant(f32, float(j - i))) for i, j in zip(sa, sb)]
    else:
        conds = [arith.cmpf(pred, a, b) for a, b in zip(cols[0], cols[1])]
    out = [from_f32(arith.select(c, x, y), v.dtype) for c, x, y in zip(conds, cols[2], cols[3])]
    return [Frag(v, out)]


def _operand(op, a, v, n: int, pos: int) -> list:
    """Operand `pos` as n f32 values: a tile's elements, or a scalar repeated."""
    if isinstance(a, Frag) and a.view.with_(dtype=v.dtype) == v:
        return [to_f32(e, a.view.dtype) for e in a.vals]
    if isinstance(a, ir.Value) and str(a.type) == "f32":
        return [a] * n
    raise error(op, f"tk.where: operand {pos} must be a tile shaped like {v.text()} or an f32, "
                    f"found {op.operands[pos].type}")
