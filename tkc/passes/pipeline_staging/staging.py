"""The rewrite of one kernel: Staging splits the warps into producer and
consumers and writes the barriers; its mixins hold each side (budget.py,
consumer.py, stores.py, producer.py).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from ...diagnostics import error, where
from ...dialect import ops as tk
from ...dialect.attrs import pipeline_options
from ...dialect.kernel import cluster_shape
from ...dialect.types import Barrier, view
from ...hopper.warpgroup import WARPGROUP_WARPS as WARPGROUP
from ..rewrite import (PURE_TK, WARP_IDS, backward_slice, defining_op, entry, hoist_prologue, i64, index,
                       is_prologue, located)
from .analysis import Found
from .budget import Budget
from .consumer import Consumer
from .ir_helpers import alloc_of, for_view, ring_root, sharers, span, terminator, tile_bytes
from .producer import Producer
from .reuse import check_after_ring
from .stores import Stores

OUTPUT_STAGES = 2      # a tile stored in the pipelined loop is double-buffered


class Staging(Budget, Consumer, Stores, Producer):
    """The producer/consumer form of one kernel's pipeline (Found)."""

    def __init__(self, f: Found):
        self.f, self.fn = f, f.fn
        self.cw = f.warps                                   # consumer warps
        self.whole = self.cw % WARPGROUP == 0               # consumers are warpgroups
        self.total = self.cw + (WARPGROUP if self.whole else 1)
        self.opts = pipeline_options(f.loop) if f.loop is not None else {}
        self.persistent = f.items is not None
        self.has_producer = bool(f.ring_loads or f.once_loads)
        self.once_slots = 2 if self.persistent else 1   # a once-loaded tile's slots
        self.loc = f.loop.location if f.loop is not None else self.fn.location
        self.bands = {}   # stored tile -> band rows, when every warp stores its own band
        self.drain = []   # the ops that end the consumers' pipelined loop
        self.once_releases = []  # the consumers' arrivals handing once-loaded tiles back
        self.freed = {}   # such an arrival -> the tile it hands back (a TMA store may still read it)
        self.ring_reads = None  # stores after the last one reading a ring slot (consumer.py)
        self.issues = []  # the branches issuing TMA stores (a store right after one joins it)
        self.drained = None  # the store warp's "writes completed" barrier (tk.atomic_add)
        self.store_warp = self._store_warp_choice()
        self.out_slots = self.opts.get("store_slots") or OUTPUT_STAGES   # a stored tile's slots
        self.cluster, self.multicast = self._multicast_loads()   # (cx, cy); {load: axes shared along}

    def _multicast_loads(self) -> tuple[tuple, dict]:
        """((cx, cy), {ring load: the cluster axes it is shared along}). In a
        kernel of clusters along x and/or y, a ring load whose coordinates do
        not follow block_idx.x (.y) loads the same tile in every CTA of a
        cluster's row (column): each of those n CTAs loads a 1/n slice of its
        rows and multicasts it to all of them (the L2 serves the tile once
        a row or column: a GEMM's A tile along x, its B tile along y), and
        a slot is free only when the consumers of every CTA writing into it
        have released it."""
        cx, cy, cz = cluster_shape(self.fn)
        if cx * cy == 1 or cz != 1:
            return (cx, cy), {}
        # a loop's variable is the same in each CTA only when its bounds are (a split-K
        # loop's start follows the CTA: each loads other k tiles)
        loops = {}
        for axis, n in (("x", cx), ("y", cy)):
            loops[axis] = []
            for x in (self.f.loop, self.f.items):
                if x is not None:
                    f = for_view(x)
                    if _same_in_cluster([f.lowerBound, f.upperBound, f.step], loops[axis], axis, n):
                        loops[axis].append(f.induction_variable)
        shared = {}
        for op in self.f.ring_loads:
            rows = view(op.operands[0].type).rows
            # its source too: a slice of a gl at an offset that follows the axis is another
            # tile in each CTA, whatever its coordinates
            along = tuple(a for a, n in (("x", cx), ("y", cy))
                          if n > 1 and _same_in_cluster(list(op.operands)[1:], loops[a], a, n))
            # the slices are whole 16-row tiles; a tile shared along both axes that does not
            # split cx * cy ways is shared along the one that it does
            for choice in (along, *((a,) for a in along)):
                if choice and rows % (16 * span(choice, (cx, cy))) == 0:
                    shared[op] = choice
                    break
        return (cx, cy), shared

    def build(self) -> None:
        self.peer_stores = self._peer_stores()   # before the rewrite replaces the stores
        check_after_ring(self.f, {ring_root(op.operands[0]) for op in self.f.ring_loads})
        first = hoist_prologue(self.fn)
        if not self.has_producer:
            self._stores_only()
            return
        self._once_loads_slots()
        self.stages = self._choose_stages()
        self.registers = self._split_registers()
        leading, closing, rest = _author_cluster_syncs(self.fn)
        with ir.InsertionPoint(first), self.loc:
            self._barriers()   # before the author's leading cluster syncs: peers may signal them
        with ir.InsertionPoint(rest), self.loc:
            branch = self._split(keep=set(leading) | set(closing))
        if self.multicast:   # no CTA signals a peer's barrier before the peer has made it, nor
            if not leading:   # exits while a peer may still write to it or arrive on its barriers
                with ir.InsertionPoint(branch.operation), self.loc:
                    tk.cluster_sync()
            if not closing:
                with ir.InsertionPoint(terminator(entry(self.fn))), self.loc:
                    tk.cluster_sync()
        self._producer(branch)  # first: it reads the loads the consumers' rewrite removes
        self._consumers(branch)
        self.fn.attributes["tk.warps"] = i64(self.total)
        self.fn.attributes["tk.consumer_warps"] = i64(self.cw)   # who runs group ops (group_warps)

    def _stores_only(self) -> None:
        """No loads: every warp stays a consumer; stores use the block barrier."""
        self.sync = {}
        self._publish()
        self._epilogue(self.f.body)
        with ir.InsertionPoint(terminator(entry(self.fn))), self.loc:
            if self.peer_stores:   # stores into a pgl: their writes land before the block exits
                self._store_wait(0, writes=True)
            else:
                self._store_wait(0)

    def _store_warp_choice(self) -> bool:
        """Whether the loop's stores go through a store warp: where the author
        asks (tkc.range(store_warp=True)); where it cannot be, a located error
        saying why. Not the default: it measured faster for the attention
        backward's dQ and slower for the linear attention's outputs."""
        if not self.opts.get("store_warp"):
            return False
        why = None
        ring = {ring_root(op.operands[0]) for op in self.f.ring_loads}
        if not self.f.loop_stores:
            why = "this loop has no tma.store"
        elif not self.whole:
            why = ("the consumers are not whole warpgroups, so the producer is a single warp "
                   "and has no warp to spare")
        elif self.persistent:
            why = "the kernel is persistent (the store warp walks one work item's loop)"
        elif any(op.operands[1] in ring for op in self.f.loop_stores):
            op = next(op for op in self.f.loop_stores if op.operands[1] in ring)
            why = (f"the store at {where(op)} reads a tile this loop loads (a slot of its input "
                   "ring, which the consumers hand back to the producer): write it to a tile of "
                   "its own first, or leave the store to the consumers")
        else:
            known = [*entry(self.fn).arguments, for_view(self.f.loop).induction_variable]
            for op in self.f.loop_stores:
                try:
                    backward_slice([op.operands[0], *list(op.operands)[2:]], stop=lambda v: v in known)
                except ValueError as e:
                    culprit, what = e.args[0]
                    why = (f"the store at {where(op)} has coordinates the store warp cannot "
                           f"compute: they depend on {what}{located(culprit)}")
                    break
        if why:
            raise error(self.f.loop, f"store_warp=True cannot be honoured: {why}")
        return True

    def _barriers(self) -> None:
        b = Barrier().mlir()
        self.full = self.empty = None
        if self.stages:
            self.full = tk.alloc(b, self.stages)
            self.empty = tk.alloc(b, self.stages)
            tk.init_barrier(self.full, 1)
            tk.init_barrier(self.empty, self.cw * (self._peer_count() if self.multicast else 1))
            for op in self.f.ring_loads:
                alloc_of(ring_root(op.operands[0])).attributes["stages"] = i64(self.stages)
        self.once = {}
        for op in self.f.once_loads:
            full, empty = (tk.alloc(b, self.once_slots) if self.once_slots > 1 else tk.alloc(b)
                           for _ in range(2))
            tk.init_barrier(full, 1)
            tk.init_barrier(empty, self.cw)
            self.once[op] = (full, empty)
        self.stage_bytes = sum(tile_bytes(view(op.operands[0].type)) for op in self.f.ring_loads)
        if self.store_warp:  # rings over the output slots: written (per store), read
            self.store_full = [tk.alloc(b, self.out_slots) for _ in self.f.loop_stores]
            for bar in self.store_full:
                tk.init_barrier(bar, self.cw)
            self.store_empty = tk.alloc(b, self.out_slots)
            tk.init_barrier(self.store_empty, 1)
            if any(op in self.f.loop_stores for op in self._published()):
                self.drained = tk.alloc(b)   # the store warp's writes have completed
                tk.init_barrier(self.drained, 1)

    def _release(self, empty_slot) -> None:
        """The consumers hand a ring slot back: to every CTA of the cluster
        that writes multicast slices into it (each of those CTAs' producers
        writes into all of them)."""
        if not self.multicast:
            tk.arrive(empty_slot)
            return
        for r in self._peers():
            tk.arrive_cta(empty_slot, r)

    def _peers(self) -> list:
        """The ranks (index values) of the CTAs whose producers write slices
        into this CTA's ring slots, itself included (ir_helpers.sharers).
        Ranks run x fastest (%cluster_ctarank)."""
        (cx, cy), group = self.cluster, sharers(set(self.multicast.values()), self.cluster)
        if group == "row":      # rank - rx + i
            rank = tk.cluster_ctarank()
            first = arith.subi(rank, arith.remui(rank, index(cx)))
            return [arith.addi(first, index(i)) for i in range(cx)]
        if group == "column":   # rx + j * cx
            rx = arith.remui(tk.cluster_ctarank(), index(cx))
            return [arith.addi(rx, index(j * cx)) for j in range(cy)]
        return [index(r) for r in range(cx * cy)]

    def _peer_count(self) -> int:
        """len(self._peers()), without making its ops."""
        (cx, cy), group = self.cluster, sharers(set(self.multicast.values()), self.cluster)
        return {"row": cx, "column": cy}.get(group, cx * cy)

    def _split(self, keep=frozenset()):
        """scf.if warpid >= cw {producer} else {consumers}, with every
        non-prologue op of the entry block moved into the else branch but
        those in `keep` (the author's leading and closing cluster syncs)."""
        ops = [o.operation for o in entry(self.fn).operations]
        is_producer = arith.cmpi(arith.CmpIPredicate.uge, tk.worker_id("warpid"), index(self.cw))
        branch = scf.IfOp(is_producer, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            y = scf.YieldOp([])
        for o in ops[:-1]:
            if not is_prologue(o) and o not in keep:
                o.move_before(y)
        if not self.persistent:
            self.f.body = branch.else_block  # the per-item code now lives there
        return branch


def _author_cluster_syncs(fn) -> tuple[list, list, object]:
    """The author's tk.cluster_syncs that open the kernel's body (after the
    allocations and barrier inits, only index arithmetic before them: peers
    may then signal the barriers) and that close it (no CTA leaves while a
    peer may still reach its shared memory). They stay whole-block syncs
    around the producer / consumer split: every warp of every CTA meets
    there, the producer's too (inside the consumers' branch the producer
    warps would never arrive). Also the op after the last opening one, where
    the split goes."""
    ops = [o.operation for o in entry(fn).operations]
    body = [o for o in ops[:-1] if not is_prologue(o)]
    leading, start = [], 0
    for i, o in enumerate(body):
        if o.name == "tk.cluster_sync":
            leading.append(o)
            start = i + 1
        elif not _pure(o):
            break
    closing = []
    for o in reversed(body[start:]):
        if o.name != "tk.cluster_sync":
            break
        closing.append(o)
    rest = body[start] if start < len(body) else ops[-1]
    return leading, closing, rest


def _pure(op) -> bool:
    """Index arithmetic and reads of where a block or warp is: nothing to
    order against a cluster sync."""
    return not len(op.regions) and (op.name.startswith(("arith.", "index.")) or op.name in PURE_TK
                                    or op.name in WARP_IDS or op.name in _CLUSTER_IDS)


_CLUSTER_IDS = ("tk.cluster_ctarank", "tk.cluster_idx")


# What a value may be computed from to be the same in every CTA of a cluster's row or column.
_CLUSTER_SAME = ("tk.grid_dim", "tk.gl_slice")   # (a slice: its source and offsets; tk.dim: _dim_source)


def _block_idx(op, axis: str) -> bool:
    return op.name == "tk.block_idx" and ir.StringAttr(op.attributes["dim"]).value == axis


def _cluster_index(op, axis: str, n: int) -> bool:
    """op is block_idx.axis divided by a constant multiple of n, the
    cluster's CTAs along it (clusters run consecutive blocks: x = cx *
    cluster + rank_x, and likewise y)."""
    if op.name not in ("arith.divui", "arith.floordivsi"):
        return False
    x, d = (defining_op(v) for v in op.operands)
    if x is None or d is None or not _block_idx(x, axis) or d.name != "arith.constant":
        return False
    k = ir.IntegerAttr(d.attributes["value"]).value
    return k > 0 and k % n == 0


def _dim_source(op):
    """What tk.dim op's value follows: its slice's size along the slice's
    axis, else (through slices along other axes) the gl it slices."""
    g, along = op.operands[0], ir.StringAttr(op.attributes["axis"]).value
    while (s := defining_op(g)) is not None and s.name == "tk.gl_slice":
        if ir.StringAttr(s.attributes["axis"]).value == along:
            return s.operands[2]
        g = s.operands[0]
    return g


def _same_in_cluster(values, loops, axis: str, n: int) -> bool:
    """Whether values are the same in every CTA of a cluster's row (axis
    "x": the n CTAs of one y) or column ("y"): computed by arith from
    constants, kernel arguments, slices of gls at such offsets, tk.dim,
    grid_dim, the other axes' block_idx, block_idx.axis divided by a
    multiple of n (the cluster's index: a persistent kernel's first work
    item, as tk-grid-ordering deals a cluster's CTAs the same items) and
    the pipeline's own loop variables where their bounds are such values
    (the k loop's, the work items' loop's). Anything else (block_idx.axis
    itself or its remainder, a value loaded from memory, another loop's
    variable) may differ: no multicast."""
    todo, seen = list(values), set()
    while todo:
        v = todo.pop()
        op = defining_op(v)
        if op is None:   # a block argument: the kernel's, or one of the pipeline's loops
            parent = v.owner.owner   # the block's op
            parent = getattr(parent, "operation", parent)
            if any(v == l for l in loops) or parent.name == "func.func":
                continue
            return False
        if op in seen:
            continue
        seen.add(op)
        if _cluster_index(op, axis, n):
            continue
        if op.name == "tk.dim":   # a slice's dim along another axis is its source's
            todo.append(_dim_source(op))
            continue
        if op.name == "tk.block_idx":
            if _block_idx(op, axis):
                return False
        elif op.name.startswith("arith.") or op.name in _CLUSTER_SAME:
            todo.extend(op.operands)
        else:
            return False
    return True
