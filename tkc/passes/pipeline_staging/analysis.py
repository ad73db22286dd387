"""What is there: a kernel's pipeline structure (the pipelined loop, the
loads it stages, the loads once per work item, the stores), found and
checked before anything is rewritten; every refusal names the author's line.
"""
from __future__ import annotations

from ...diagnostics import error, where
from ...dialect import walk
from ...dialect.attrs import constant
from ...dialect.types import view
from ...dialect.kernel import kernel_warps
from ..rewrite import entry, inside
from .flags import producer_waits
from .ir_helpers import alloc_of, ring_root

class Found:
    """The kernel's pipeline structure, checked."""

    def __init__(self, fn):
        self.fn = fn
        self.items = next((o.operation for o in entry(fn).operations
                           if o.operation.name == "scf.for"
                           and "tk.work_items" in o.operation.attributes), None)
        self.body = self.items.regions[0].blocks[0] if self.items is not None else entry(fn)
        self.loop = None
        self.ring_loads, self.once_loads, self.stores, self.loop_stores = [], [], [], []
        self.prefetches = []   # top-level tk.tma_prefetch: the producer issues them after its once-loads
        self.warps = kernel_warps(fn) or 1
        self.waits = {}        # flag waits the producer runs -> whether the consumers keep them (flags.py)


def find(fn) -> Found | None:
    f = Found(fn)
    loops = [op for op in walk(fn) if op.name == "scf.for" and "tk.pipeline" in op.attributes]
    loads = [op for op in walk(fn) if op.name == "tk.pipeline_load"]
    stores = [op for op in walk(fn) if op.name == "tk.pipeline_store"]
    if not (loops or loads or stores):
        return None
    if len(loops) > 1:
        raise error(loops[1], "one pipelined loop per kernel: another is at " + where(loops[0]))
    if loops:
        f.loop = loops[0]
        if f.loop.parent != f.body.owner and f.loop.parent.operation != f.body.owner:
            raise error(f.loop, "a pipelined loop must be at the kernel's top level (or directly "
                                "in its work-item loop): the producer warp walks it on its own")
    once_tiles = {}   # tile -> its once-load (one a work item: it waits and releases once)
    for op in loads:
        if f.loop is not None and _parent(op) == f.loop:
            f.ring_loads.append(op)
        elif _parent(op) == _block_owner(f):
            first = once_tiles.setdefault(op.operands[0], op)   # (disjoint subtiles: a gather's rows)
            if first is not op:
                again = ("the Python loop around this load unrolls it" if where(first) == where(op)
                         else f"it is loaded at {where(first)} too")
                raise error(op, "tma.load: a shared tile is loaded at most once a work item outside "
                                f"the pipelined loop (its barrier waits and releases once), and {again}: "
                                "load into a tile of its own, read the memory into registers "
                                "(tkc.ops.load), or load in the loop")
            f.once_loads.append(op)
        else:
            raise error(op, "tma.load must be at the kernel's top level or directly in the "
                            "pipelined loop's body: the producer issues every load in order, "
                            "so it cannot be conditional or in another loop")
    for op in stores:
        if f.loop is not None and _parent(op) == f.loop:
            f.loop_stores.append(op)
        elif _parent(op) == _block_owner(f):
            f.stores.append(op)
        else:
            raise error(op, "tma.store must be at the kernel's top level or directly in the "
                            "pipelined loop's body: warp 0 issues every store and counts them "
                            "to know when a tile may be written again")
    f.prefetches = [op for op in walk(fn) if op.name == "tk.tma_prefetch" and _parent(op) == _block_owner(f)]
    _check_loop_outputs(f)
    if f.loop is not None and not f.ring_loads:
        raise error(f.loop, "this loop is pipelined (stages=...) but has no tma.load to run ahead")
    _check_ring_tiles(f)
    f.waits = producer_waits(f)
    return f


def _parent(op):
    p = op.parent
    return p.operation if p is not None else None


def _block_owner(f: Found):
    return f.items if f.items is not None else f.fn


def _check_ring_tiles(f: Found) -> None:
    """Each tile the loop loads becomes a ring, loaded whole or in subtiles
    at constant coordinates that fill it once per iteration: a slot comes
    back `stages` iterations later, so a part left unloaded (or a piece
    chosen at run time) would hold another iteration's data than the loop
    as written reads."""
    pieces = {}
    for op in f.ring_loads:
        root = ring_root(op.operands[0])
        if getattr(alloc_of(root), "name", "") != "tk.alloc" or "stages" in alloc_of(root).attributes:
            raise error(op, "the destination of a pipelined tma.load must be a shared tile from "
                            "st(...) or a subtile of one (not a ring)")
        pieces.setdefault(root, []).append((op, _piece(op)))
    for root, loads in pieces.items():
        _check_filled(root, loads)
        for u in root.uses:
            user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
            if not inside(user, f.loop) and not _view_used_inside(user, f.loop):
                raise error(user, f"{_short(root)} is a pipelined tile (loaded at {where(loads[0][0])}): "
                                  "it lives in a ring of stages and may only be used inside its loop")


def _piece(op) -> tuple:
    """(row, col, rows, cols): the elements of its root a load's destination
    is, through subtiles at constant coordinates (else a located error)."""
    dst = op.operands[0]
    t = view(dst.type)
    row = col = 0
    while getattr(alloc_of(dst), "name", "") == "tk.subtile":
        sub = alloc_of(dst)
        i, j = (constant(x) for x in list(sub.operands)[1:3])
        if i is None or j is None:
            raise error(op, "a pipelined tma.load into a subtile at run-time coordinates: the "
                            "ring already gives each iteration its own slot (stages=2 is a double "
                            "buffer), and a piece chosen at run time may leave part of the slot "
                            "holding another iteration's data; load the whole tile, or subtiles "
                            "at constant coordinates that fill it")
        part = view(dst.type)
        row, col = row + i * part.rows, col + j * part.cols
        dst = sub.operands[0]
    return row, col, t.rows, t.cols


def _check_filled(root, loads) -> None:
    """The pieces loaded into `root` in one iteration fill it, once each
    (checked in cells of 8 rows x 16 columns, 8-row tiles being the
    smallest; an sv is one row)."""
    t, owner = view(root.type), {}
    for op, (row, col, rows, cols) in loads:
        for cell in ((r, c) for r in range(row // 8, -(-(row + rows) // 8))
                     for c in range(col // 16, (col + cols) // 16)):
            if cell in owner:
                what = "this tile is loaded twice per iteration" if rows * cols == t.rows * t.cols \
                    else f"this load overlaps another piece of {_short(root)}"
                raise error(op, f"{what} (also at {where(owner[cell])})")
            owner[cell] = op
    cells = -(-t.rows // 8) * (t.cols // 16)
    if len(owner) < cells:
        r, c = next((r, c) for r in range(-(-t.rows // 8)) for c in range(t.cols // 16)
                    if (r, c) not in owner)
        raise error(loads[-1][0], f"the pipelined tma.loads into {_short(root)} leave part of it "
                                  f"unloaded (the 8 x 16 piece at row {r * 8}, column {c * 16}): "
                                  "a ring slot comes back stages iterations later, "
                                  "so a pipelined tile must be filled whole every iteration")


def _view_used_inside(op, loop) -> bool:
    """op is a subtile (of a subtile ...) made before the loop and used only
    inside it: the consumers' rewrite remakes it there, on the slot."""
    if op.name != "tk.subtile":
        return False
    for u in op.results[0].uses:
        user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
        if not inside(user, loop) and not _view_used_inside(user, loop):
            return False
    return True


def _check_loop_outputs(f: Found) -> None:
    """A tile stored in the pipelined loop is double-buffered there: it may not
    be used outside the loop."""
    for op in f.loop_stores:
        tile = op.operands[1]
        if getattr(alloc_of(tile), "name", "") != "tk.alloc" or "stages" in alloc_of(tile).attributes:
            raise error(op, "the source of a tma.store in a pipelined loop must be a whole shared "
                            "tile from st(...) (not a view or a ring)")
        for u in tile.uses:
            user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
            if not inside(user, f.loop):
                raise error(user, f"{_short(tile)} is stored in the pipelined loop (at {where(op)}): "
                                  "it is double-buffered there and may only be used inside the loop")


def _short(v) -> str:
    return str(v.type).removeprefix("!tk.").replace(" : i64", "")
