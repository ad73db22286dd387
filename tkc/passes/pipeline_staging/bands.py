"""Banded stores: when every consumer warp writes only its own band of rows
of each stored tile, each warp stores its band and waits for its own stores
(no barrier between warps). `store_bands` recognises the pattern by
evaluating the row index over the warp ids.
"""
from __future__ import annotations

from mlir import ir

from ...diagnostics import error
from ...dialect.types import RT, view
from ...hopper.warpgroup import WARPGROUP_WARPS as WARPGROUP
from .ir_helpers import alloc_of

def store_bands(stores, warps: int) -> dict:
    """{tile: band rows R} when each stored tile is written only by tk.store
    of a full-width rt<R, C> at a row index that gives every consumer warp
    its own band (a permutation of 0 .. warps-1 over the warp ids), at least
    once, and read by nothing but its stores; {} unless that holds for every stored tile
    (the warps' store counts must agree for tma_store_wait)."""
    out = {}
    for p in stores:
        tile = p.operands[1]
        t = view(tile.type)
        if getattr(alloc_of(tile), "name", "") != "tk.alloc" or t.rows % warps:
            return {}
        rows, written = t.rows // warps, False
        for u in tile.uses:
            user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
            if user.name == "tk.pipeline_store" and u.operand_number == 1:
                continue
            x = view(user.operands[1].type) if user.name == "tk.store" else None
            if not (u.operand_number == 0 and isinstance(x, RT) and x.rows == rows
                    and x.cols == t.cols and _band_of(user.operands[2], warps)
                    and _constant_index(user.operands[3]) == 0):
                return {}
            written = True
        if not written:   # stored, never written by a warp's rows: not banded (nothing to split)
            return {}
        out[tile] = rows
    return out


def _band_of(value, warps: int) -> bool:
    """Whether `value`, computed from the warp's id by index arithmetic, takes
    each of 0 .. warps-1 once over warps 0 .. warps-1."""
    return sorted(_eval_index(value, w) for w in range(warps)) == list(range(warps))


_EVAL = {"arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b,
         "arith.muli": lambda a, b: a * b, "arith.remsi": lambda a, b: a % b,
         "arith.remui": lambda a, b: a % b, "arith.divsi": lambda a, b: a // b,
         "arith.divui": lambda a, b: a // b, "arith.floordivsi": lambda a, b: a // b}


def _eval_index(value, w: int):
    """value for warp w, or None if it depends on anything but the warp id."""
    op = alloc_of(value)
    name = getattr(op, "name", "")
    if name == "tk.warpid":
        return w
    if name == "tk.warpgroupid":
        return w // WARPGROUP
    if name == "arith.constant":
        return ir.IntegerAttr(op.attributes["value"]).value
    if name in _EVAL:
        a, b = (_eval_index(v, w) for v in op.operands)
        return None if a is None or b is None or (b == 0 and "div" in name + "rem") \
            else _EVAL[name](a, b)
    return None


def _constant_index(value):
    op = alloc_of(value)
    return ir.IntegerAttr(op.attributes["value"]).value if getattr(op, "name", "") == "arith.constant" else None


def last_band(store, tile, block):
    """The row index of the last tk.store into `tile` before `store` in `block`."""
    ops = [o.operation for o in block.operations]
    for o in reversed(ops[:ops.index(store)]):
        if o.name == "tk.store" and o.operands[0] == tile:
            return o.operands[2]
    raise error(store, "internal: a banded store with no write before it")
