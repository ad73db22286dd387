"""Lane maps as IR: the lane-dependent part of fragment coordinates
(tkc/hopper/lanes.py says it in Python ints) emitted as index arithmetic,
computed once per kernel (`lw.once`) where the lane's value is needed.
"""
from __future__ import annotations

from mlir.dialects import arith

from ..dialect.types import RV
from ..hopper import fragments
from .access import _idx

def _lane_rc(lw, layout: str):
    """lane_offset as index Values (computed once per kernel)."""
    return lw.once(("lane_offset", layout), lambda: lane_offset_ir(layout, lw.lane()))


def lane_offset_ir(layout: str, lane):
    """lane_offset on an index Value: emits arith, returns (row, col)."""
    if layout == "wide":
        return arith.andi(lane, _idx(15)), arith.shli(arith.shrui(lane, _idx(4)), _idx(3))
    g = arith.shrui(lane, _idx(2))
    t2 = arith.shli(arith.andi(lane, _idx(3)), _idx(1))
    return (g, t2) if layout == "row" else (t2, g)


def _vec_lane(lw, view: RV):
    """The lane part of a vector element, as an index Value: lane * chunk
    ("flat"), g ("col") or 2t ("row")."""
    if view.kind == "flat":
        c = fragments.flat_chunk(view.length)
        return lw.once(("flat_lane", c), lambda: arith.muli(lw.lane(), _idx(c)))
    g, t2 = _lane_rc(lw, "row")
    return g if view.kind == "col" else t2


def _ldmatrix_lane(lw, layout: str, half: bool = False):
    """ldmatrix_row_col as index Values (computed once per kernel)."""
    return lw.once(("ldmatrix", layout, half), lambda: ldmatrix_row_col_ir(layout, lw.lane(), half))


def ldmatrix_row_col_ir(layout: str, lane, half: bool = False):
    """ldmatrix_row_col on an index Value: emits arith, returns (row, col)."""
    r = arith.andi(lane, _idx(7))
    lo = arith.shli(arith.andi(arith.shrui(lane, _idx(3)), _idx(1)), _idx(3))
    if half:
        return r, lo
    hi = arith.shli(arith.shrui(lane, _idx(4)), _idx(3))
    return (arith.addi(lo, r), hi) if layout == "row" else (arith.addi(hi, r), lo)
