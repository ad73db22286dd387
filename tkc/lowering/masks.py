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

An i32 iota is the same in i32 (the lane's part as an i32, i32 adds); a
where comparing i32 tiles compares with icmp (signed), else in f32.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from ..diagnostics import error
from ..dialect.types import RT, RV, view
from ..hopper import fragments
from .compute import from_f32, result_view, to_f32
from .core import Frag, rule
from .lanes import _lane_rc, _vec_lane

_CMPF = {"lt": "OLT", "le": "OLE", "gt": "OGT", "ge": "OGE", "eq": "OEQ", "ne": "UNE"}
_CMPI = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}


def _as_f32(lw, key, index_value, ints: bool = False):
    """An index Value as f32 (as i32 for an i32 iota), converted once per kernel."""
    i32 = ir.IntegerType.get_signless(32)
    if ints:
        return lw.once(("iota_lane_i32", key), lambda: arith.index_cast(i32, index_value))
    return lw.once(("iota_lane", key), lambda: arith.uitofp(
        ir.F32Type.get(), arith.index_cast(i32, index_value)))


def _iota_parts(lw, op, args):
    """(the lane's part with the start, as f32 or i32; each element's constant)."""
    v, axis = result_view(op), ir.IntegerAttr(op.attributes["axis"]).value
    ints = v.dtype == "i32"
    if isinstance(v, RT) and axis in (0, 1):
        lane = _as_f32(lw, (v.layout, axis), _lane_rc(lw, v.layout)[axis], ints)
        static = [fragments.tile_coord(v.rows, v.cols, v.layout, i, 0)[axis]
                  for i in range(fragments.tile_elems(v.rows, v.cols))]
    elif isinstance(v, RV) and axis == 0:
        lane = _as_f32(lw, (v.kind, v.length), _vec_lane(lw, v), ints)
        static = [fragments.vec_coord(v.length, v.kind, i, 0)
                  for i in range(fragments.vec_elems(v.length, v.kind))]
    else:
        raise error(op, f"tk.iota: axis {axis} of {op.results[0].type} (0 or 1 for an rt, 0 for an rv)")
    if args:  # (lane + start) + s: one value per element would be loop-invariant
        lane = (arith.addi if ints else arith.addf)(lane, args[0])  # and hoisted (registers); these are not
    return lane, static


def _const(t, s: int):
    return arith.constant(t, s if isinstance(t, ir.IntegerType) else float(s))


@rule("tk.iota")
def _iota(lw, op, args):
    v = result_view(op)
    lane, static = _iota_parts(lw, op, args)
    add = arith.addi if v.dtype == "i32" else arith.addf
    return [Frag(v, [from_f32(add(lane, _const(lane.type, s)) if s else lane, v.dtype) for s in static])]


def _iota_of(lw, value):
    """(lane part, constants) of `value` if a tk.iota made it, else None."""
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.name == "tk.iota":
        return _iota_parts(lw, owner, [lw.lookup(x) for x in owner.operands])
    return None


def _opaque(value):
    """value through a volatile asm: computed here, never hoisted."""
    from mlir.dialects import llvm
    reg = "r" if isinstance(value.type, ir.IntegerType) else "f"
    return llvm.inline_asm(value.type, [value], "mov.b32 $0, $1;", f"={reg},{reg}", has_side_effects=True)


@rule("tk.where")
def _where(lw, op, args):
    v = result_view(op)
    n = fragments.tile_elems(v.rows, v.cols) if isinstance(v, RT) else fragments.vec_elems(v.length, v.kind)
    ints = _ints(op)
    cols = [_operand(op, a, v, n, pos, ints if pos < 2 else v.dtype == "i32") for pos, a in enumerate(args)]
    cmp = op.attributes["cmp"].value
    if ints:
        pred, compare, sub = getattr(arith.CmpIPredicate, _CMPI[cmp]), arith.cmpi, arith.subi
    else:
        pred, compare, sub = getattr(arith.CmpFPredicate, _CMPF[cmp]), arith.cmpf, arith.subf
    iotas = [_iota_of(lw, x) for x in list(op.operands)[:2]]
    if all(iotas) and all(len(c) == n for _, c in iotas) and iotas[0][0].type == iotas[1][0].type:
        # a_i op b_i  <=>  (lane_a - lane_b) op (s_b,i - s_a,i): exact (small integers)
        (la, sa), (lb, sb) = iotas
        d = _opaque(sub(la, lb))
        conds = [compare(pred, d, _const(d.type, j - i)) for i, j in zip(sa, sb)]
    else:
        conds = [compare(pred, a, b) for a, b in zip(cols[0], cols[1])]
    out = [from_f32(arith.select(c, x, y), v.dtype) for c, x, y in zip(conds, cols[2], cols[3])]
    return [Frag(v, out)]


def _ints(op) -> bool:
    """Whether a where compares i32 tiles (tk-verify: then both sides are i32)."""
    return any(str(x.type).startswith("!tk.") and view(x.type).dtype == "i32" for x in list(op.operands)[:2])


def _operand(op, a, v, n: int, pos: int, ints: bool) -> list:
    """Operand `pos` as n values of its compute type (f32, or i32 where
    `ints`): a tile's elements, or a scalar repeated."""
    scalar = "i32" if ints else "f32"
    if isinstance(a, Frag) and a.view.with_(dtype=v.dtype) == v and (a.view.dtype == "i32") == ints:
        return [to_f32(e, a.view.dtype) for e in a.vals]
    if isinstance(a, ir.Value) and str(a.type) == scalar:
        return [a] * n
    raise error(op, f"tk.where: operand {pos} must be a tile shaped like {v.text()} or an {scalar}, "
                    f"found {op.operands[pos].type}")
