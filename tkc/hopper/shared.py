"""Shared memory on Hopper: the budget of a block, the swizzled st layout,
and which views of an st are tiles (docs/tile-ir.md, "Shared tile memory
layout").

Inside an st the element (row, col) lives at the byte offset given by
`address`: column panels of S bytes per row, and 16-byte chunks XOR-permuted
within each group of 8 128-byte lines, the pattern of TMA's and wgmma's
swizzle modes. A subtile lives in its parent's panels: `address` takes the
panel layout's rows (`pitch`) apart from the tile's own. The lowering's
allocation plan (tkc/lowering/shared.py), tk-pipeline-staging's budget and
tk-bank-report's model all read these facts here.
"""
from __future__ import annotations

from ..dialect.kernel import blocks_per_sm
from ..dialect.types import RT, ST, SV, Barrier
from ..dtypes import itemsize


# ---------------------------------------------------------------- the budget

SHARED_LIMIT = 232448  # 227 KiB: the most dynamic shared memory one block of sm_90 may have
SHARED_PER_SM = 233472  # 228 KiB an SM, 1 KiB of it reserved per resident block


def shared_limit(func_op) -> int:
    """The shared memory one block may have: SHARED_LIMIT, or with
    `tk.blocks_per_sm = n` an n-th of the SM's (less the 1 KiB each block's
    reservation), so that n blocks fit side by side."""
    n = blocks_per_sm(func_op)
    return SHARED_LIMIT if n == 1 else (SHARED_PER_SM - 1024 * n) // n // 1024 * 1024


# ---------------------------------------------------------------- st layout

SWIZZLE_BYTES = {"none": 0, "32b": 32, "64b": 64, "128b": 128}


def swizzle_bytes(st: ST) -> int:
    """S of an st (0 = none). `auto` resolves as tk-layout-selection does:
    the widest of 128, 64, 32 that divides the row's bytes, so that a tile
    nobody selected a layout for still lowers consistently."""
    if st.swizzle != "auto":
        return SWIZZLE_BYTES[st.swizzle]
    width = st.cols * itemsize(st.dtype)
    return next((s for s in (128, 64, 32) if width % s == 0 and st.rows >= 8), 0)


BARRIER_BYTES = 8  # an mbarrier is one 8-byte-aligned 64-bit word


def alignment(t) -> int:
    """1024 for swizzled tiles (the XOR uses address bits 4-9), 8 for an
    mbarrier, else 128."""
    if isinstance(t, Barrier):
        return BARRIER_BYTES
    return 1024 if isinstance(t, ST) and swizzle_bytes(t) else 128


def stride(t) -> int:
    """Bytes between the slots of a ring of `t`: its size rounded up to its
    alignment, so that every slot is as aligned as a lone allocation."""
    return round_up(nbytes(t), alignment(t))


def nbytes(t) -> int:
    if isinstance(t, ST):
        return t.rows * t.cols * itemsize(t.dtype)
    if isinstance(t, SV):
        return t.length * itemsize(t.dtype)
    if isinstance(t, Barrier):
        return BARRIER_BYTES
    raise TypeError(f"not a shared type: {t}")


def swizzle(offset: int, s: int) -> int:
    """The swizzle of an S-byte mode applied to a byte offset in the tile."""
    if not s:
        return offset
    return offset ^ (((offset >> 7) & (s // 16 - 1)) << 4)


def address(st: ST, row, col, pitch: int | None = None):
    """Byte offset of element (row, col) inside `st`.

    `pitch` is the rows of the panel layout the tile lives in (default: its
    own rows); a row subtile of a multi-panel st passes its parent's, whose
    panels are pitch*S bytes apart. With Python ints this is a pure function
    (the tests' reference); with `index` ir.Values (either or both) it emits
    arith at the current insertion point and returns an index Value.
    """
    pitch = st.rows if pitch is None else pitch
    if isinstance(row, int) and isinstance(col, int):
        return _address_int(st, row, col, pitch)
    return _address_ir(st, row, col, pitch)


def _address_int(st: ST, row: int, col: int, pitch: int) -> int:
    e, s = itemsize(st.dtype), swizzle_bytes(st)
    if not s:
        return (row * st.cols + col) * e
    p = s // e  # columns per panel
    linear = (col // p) * (pitch * s) + row * s + (col % p) * e
    return swizzle(linear, s)


def _address_ir(st: ST, row, col, pitch: int):
    from mlir.dialects import arith
    from mlir import ir

    idx = ir.IndexType.get()

    def c(n):
        return arith.constant(idx, n)

    def v(x):
        return c(x) if isinstance(x, int) else x

    row, col = v(row), v(col)
    e, s = itemsize(st.dtype), swizzle_bytes(st)
    if not s:
        return arith.muli(arith.addi(arith.muli(row, c(st.cols)), col), c(e))
    p = s // e  # a power of two: shifts and masks
    panel = arith.shrui(col, c(p.bit_length() - 1))
    in_panel = arith.andi(col, c(p - 1))
    linear = arith.addi(arith.addi(arith.muli(panel, c(pitch * s)), arith.muli(row, c(s))),
                        arith.muli(in_panel, c(e)))
    chunk = arith.andi(arith.shrui(linear, c(7)), c(s // 16 - 1))
    return arith.xori(linear, arith.shli(chunk, c(4)))


def round_up(n: int, a: int) -> int:
    """n rounded up to a multiple of a (an alignment)."""
    return (n + a - 1) // a * a


AFTER_RING = "after_ring"   # the tk.alloc attribute of a tile that may lie over the ring (layout)


def footprint(t, slots: int = 1, padded: bool = False) -> int:
    """Bytes an allocation of `slots` slots of t takes: its size, or a ring's
    slots strides (padded: a lone tile's stride too)."""
    return nbytes(t) if slots == 1 and not padded else slots * stride(t)


def layout(items, padded: bool = False) -> tuple[list[int], int]:
    """(each allocation's byte offset, the bytes in all) of the shared tiles
    `items`, (type, slots, role) in program order: a bump allocator, each at
    its alignment, a ring taking slots strides. Role "after" (tk.after_ring:
    st(after_loop=True), checked by tk-pipeline-staging) is a tile used only
    after the kernel's pipelined loop, whose ring (role "ring": the loop's
    loads) is dead by then: such tiles lie over the ring's slots, laid out
    from its start, when the ring allocations sit together and the tiles fit
    within them. Otherwise (or without any) every tile bumps in program
    order, as it always did. padded: footprint's (tk-pipeline-staging's
    budget, which stays at or above the plan's bytes)."""
    def bump(which, end=0):
        offsets = {}
        for i in which:
            t, n, _ = items[i]
            offsets[i] = round_up(end, alignment(t))
            end = offsets[i] + footprint(t, n, padded)
        return offsets, end
    after = [i for i, x in enumerate(items) if x[2] == "after"]
    rings = [i for i, x in enumerate(items) if x[2] == "ring"]
    if after and rings:
        offsets, end = bump([i for i, x in enumerate(items) if x[2] != "after"])
        start = min(offsets[i] for i in rings)
        stop = max(offsets[i] + footprint(*items[i][:2], padded=True) for i in rings)   # whole slots
        between = any(items[i][2] != "ring" and start <= offsets[i] < stop for i in offsets)
        over, over_end = bump(after, start)
        if not between and over_end <= stop:
            offsets.update(over)
            return [offsets[i] for i in range(len(items))], end
    offsets, end = bump(range(len(items)))
    return [offsets[i] for i in range(len(items))], end


# ---------------------------------------------------------------- views of an st

def _short(v) -> str:
    return "a non-tk value" if v is None else v.text().removeprefix("!tk.").replace(" : i64", "")


def subtile_problems(x, out) -> list[str]:
    """Why `out` is not a subtile view of `x` (st or rt); [] when it is."""
    if isinstance(x, RT):
        if not isinstance(out, RT) or out.dtype != x.dtype or out.layout != x.layout:
            return [f"subtile of {_short(x)} must be an rt of its dtype and layout, got {_short(out)}"]
    elif isinstance(x, ST):
        if not isinstance(out, ST) or out.dtype != x.dtype:
            return [f"subtile of {_short(x)} must be an st of its dtype, got {_short(out)}"]
        if "auto" not in (x.swizzle, out.swizzle) and out.swizzle != x.swizzle:
            return [f"subtile: a view keeps the tile's {x.swizzle} layout, got {_short(out)}"]
    else:
        return [f"subtile: x must be an st or rt, got {_short(x)}"]
    if x.rows % out.rows or x.cols % out.cols:
        return [f"subtile: {_short(out)} does not divide {_short(x)}"]
    if isinstance(x, ST) and out.cols != x.cols:
        s = swizzle_bytes(x)
        panel = s // itemsize(x.dtype) if s else 0
        if not panel:
            return [f"subtile: a column part of the unswizzled {_short(x)} is not a tile "
                    "(its rows would not be contiguous): take whole rows"]
        if out.cols % panel:
            return [f"subtile: a column part of {_short(x)} must be whole {s}-byte swizzle "
                    f"panels ({panel} columns), got {out.cols} columns"]
    return []
