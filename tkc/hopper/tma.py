"""TMA boxes on Hopper: how a shared tile moves by TMA, and which tiles can.

A swizzled st is stored as column panels of S bytes (shared.py), and a TMA
box with an S-byte swizzle may be at most S bytes wide, so the box is one
panel (rows x S/E) and a tile takes one instruction per panel. A box is at
most 256 elements a side, its rows a multiple of 16 bytes. tk-verify, the
lowering (tkc/lowering/tma.py) and the interpreter apply these rules.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dialect.types import ST, SV
from ..dtypes import itemsize
from .shared import swizzle_bytes

BOX_LIMIT = 256  # elements per box dimension (cuTensorMapEncodeTiled)
SWIZZLE_NAMES = {0: "none", 32: "32b", 64: "64b", 128: "128b"}


@dataclass(frozen=True)
class Box:
    """How an st moves by TMA: the box, its swizzle and the panel count."""
    rows: int
    cols: int
    swizzle: str
    panels: int
    panel_bytes: int  # shared bytes between consecutive panels


TMA_LOADS = ("tk.tma_load", "tk.tma_load_multicast", "tk.pipeline_load", "tk.tma_prefetch")


def shared_kinds(op_name: str) -> tuple:
    """The shared types a TMA op moves: loads also fill an sv (a one-row
    box), stores take an st."""
    return (ST, SV) if op_name in TMA_LOADS else (ST,)


def box(st: ST | SV) -> Box:
    """The TMA box of an st: one swizzle panel (the whole tile when
    unswizzled); of an sv: its one row."""
    if isinstance(st, SV):
        return Box(1, st.length, SWIZZLE_NAMES[0], 1, st.length * itemsize(st.dtype))
    s, e = swizzle_bytes(st), itemsize(st.dtype)
    cols = s // e if s else st.cols
    return Box(st.rows, cols, SWIZZLE_NAMES[s], st.cols // cols, st.rows * cols * e)


def box_problem(st: ST | SV) -> str | None:
    """Why an st (or sv) cannot be a TMA box (None when it can)."""
    b = box(st)
    if b.rows > BOX_LIMIT or b.cols > BOX_LIMIT:
        hint = "a shorter sv" if isinstance(st, SV) else "a swizzled or smaller st"
        return (f"a TMA box is at most {BOX_LIMIT} x {BOX_LIMIT} elements; {st.text()} "
                f"needs a {b.rows} x {b.cols} box (use {hint})")
    if (b.cols * itemsize(st.dtype)) % 16:
        return f"a TMA box row must be a multiple of 16 bytes, {st.text()} has {b.cols * itemsize(st.dtype)}"
    return None
