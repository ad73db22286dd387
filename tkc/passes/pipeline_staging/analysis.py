"""What is there: a kernel's pipeline structure (the pipelined loop, the
loads it stages, the loads once per work item, the stores), found and
checked before anything is rewritten; every refusal names the author's line.
"""
from __future__ import annotations

from ...diagnostics import error, where
from ...dialect import walk
from ...dialect.kernel import kernel_warps
from ..rewrite import entry, inside
from .ir_helpers import alloc_of

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
    for op in loads:
        if f.loop is not None and _parent(op) == f.loop:
            f.ring_loads.append(op)
        elif _parent(op) == _block_owner(f):
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
    return f


def _parent(op):
    p = op.parent
    return p.operation if p is not None else None


def _block_owner(f: Found):
    return f.items if f.items is not None else f.fn


def _check_ring_tiles(f: Found) -> None:
    seen = {}
    for op in f.ring_loads:
        dst = op.operands[0]
        owner = dst.owner.operation if hasattr(dst.owner, "operation") else dst.owner
        if getattr(owner, "name", "") != "tk.alloc" or "stages" in owner.attributes:
            raise error(op, "the destination of a pipelined tma.load must be a whole shared "
                            "tile from st(...) (not a view or a ring)")
        if dst in seen:
            raise error(op, f"this tile is loaded twice per iteration (also at {where(seen[dst])})")
        seen[dst] = op
        for u in dst.uses:
            user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
            if not inside(user, f.loop):
                raise error(user, f"{_short(dst)} is a pipelined tile (loaded at {where(op)}): "
                                  "it lives in a ring of stages and may only be used inside its loop")


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
