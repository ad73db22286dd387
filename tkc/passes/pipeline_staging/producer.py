"""The producer's side: its one issuing warp walks the same loop (and the
same work items) with a ring counter, waits for each slot to be empty,
expects the stage's bytes and issues the TMA loads; once-loaded tiles and
prefetches are issued where they stand.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from ...dialect import ops as tk
from ...dialect.types import view
from ..rewrite import entry, index
from .ir_helpers import (for_view, if_then, recompute, remake_view, ring_root, root_alloc, sharers, span,
                         staged_attr, terminator, tile_bytes)


class Producer:
    """Staging's producer rewrite (a mixin of staging.Staging)."""

    def _producer(self, branch) -> None:
        block = branch.then_block
        y = terminator(block)
        with ir.InsertionPoint(y), self.loc:
            if self.registers:
                tk.set_registers(False, self.registers[0])
            w = tk.worker_id("warpid")
            with if_then(arith.cmpi(arith.CmpIPredicate.eq, w, index(self.cw))):
                mapping = {a: a for a in entry(self.fn).arguments}
                if self.persistent:
                    self._producer_items(mapping)
                else:
                    self._producer_block(self.f.body, mapping, index(0), index(0))
            if self.store_warp:
                with if_then(arith.cmpi(arith.CmpIPredicate.eq, w, index(self.cw + 1))):
                    self._store_warp_loop({a: a for a in entry(self.fn).arguments})

    def _producer_items(self, mapping) -> None:
        src = for_view(self.f.items)
        lb, ub, step = recompute(mapping, [src.lowerBound, src.upperBound, src.step], self.f.items)
        loop = scf.ForOp(lb, ub, step, [index(0)])
        with ir.InsertionPoint(loop.body), self.loc:
            inner = dict(mapping)
            inner[src.induction_variable] = loop.induction_variable
            j = arith.divui(arith.subi(loop.induction_variable, lb), step)
            out = self._producer_block(self.f.body, inner, loop.body.arguments[-1],
                                       arith.remui(j, index(2 * self.once_slots)))
            scf.YieldOp([out])
        loop.operation.attributes["tk.staged"] = staged_attr(self.stages, "producer")

    def _producer_block(self, block, mapping, it, parity):
        """The producer's walk of one work item: once-loads, then the ring
        (parity: the item counter modulo 2 * once_slots)."""
        for op in [o.operation for o in block.operations]:
            if op in self.once:
                self._producer_once(op, mapping, parity)
            elif op in self.f.prefetches:
                with op.location:
                    src, *coords = recompute(mapping, list(op.operands)[1:], op)
                    tk.tma_prefetch(op.operands[0], src, coords)
            elif op in self.f.waits:
                self._producer_wait(op, mapping)
            elif self.f.loop is not None and op == self.f.loop:
                it = self._producer_loop(mapping, it)
        return it

    def _producer_wait(self, op, mapping) -> None:
        """A flag wait the loads after it depend on (flags.py), as the producer computes it."""
        with op.location:
            values = recompute(mapping, list(op.operands), op)
            tk.wait_signal(values[0], values[1:5], values[5])

    def _producer_once(self, op, mapping, parity) -> None:
        full, empty = self.once[op]
        tile = root_alloc(op.operands[0])
        with op.location:
            src, *coords = recompute(mapping, list(op.operands)[1:], op)  # a slice: its offsets too
            slot, phase = self._once_slot(parity)
            if slot is not None:
                tile, full, empty = (tk.stage(x, slot) for x in (tile, full, empty))
            tile = remake_view(op.operands[0], tile, mapping, op)   # a subtile: of its slot
            if self.persistent:
                tk.wait(empty, arith.addi(phase, index(1)))
            tk.expect_bytes(full, tile_bytes(view(tile.type)))
            tk.tma_load(tile, src, coords, full)

    def _producer_loop(self, mapping, it):
        src = for_view(self.f.loop)
        with self.f.loop.location:
            lb, ub, step = recompute(mapping, [src.lowerBound, src.upperBound, src.step], self.f.loop)
            for op in self.f.ring_loads:  # what does not change with k: computed once, here
                recompute(mapping, list(op.operands)[1:], op, varying=src.induction_variable)
            loop = scf.ForOp(lb, ub, step, [it])
        body_map = dict(mapping)
        body_map[src.induction_variable] = loop.induction_variable
        cur = loop.body.arguments[-1]
        with ir.InsertionPoint(loop.body), self.f.ring_loads[0].location:
            s, ph = self._slot(cur)
            tk.wait(tk.stage(self.empty, s), arith.addi(ph, index(1)))
            for op in self.f.loop.regions[0].blocks[0].operations:   # the body's flag waits first
                if op.operation in self.f.waits:
                    self._producer_wait(op.operation, body_map)
            full = tk.stage(self.full, s)
            tk.expect_bytes(full, self.stage_bytes)
            slots = {}
            for op in self.f.ring_loads:
                with op.location:
                    src, *coords = recompute(body_map, list(op.operands)[1:], op)
                    root = ring_root(op.operands[0])
                    if root not in slots:
                        slots[root] = tk.stage(root, s)
                    dst = remake_view(op.operands[0], slots[root], body_map, op)  # a subtile: of the slot
                    if op in self.multicast:
                        self._multicast(dst, src, coords, full, self.multicast[op])
                    else:
                        tk.tma_load(dst, src, coords, full)
            scf.YieldOp([arith.addi(cur, index(1))])
        loop.operation.attributes["tk.staged"] = staged_attr(self.stages, "producer")
        return loop.results[0]

    def _multicast(self, dst, src, coords, full, along) -> None:
        """This CTA's 1/n slice of a tile the n CTAs of its cluster row
        (along x) or column (along y), or the whole cluster, load
        (staging.py): rows i * R/n .. of it, i its place among them,
        multicast to all of them; each one's full barrier expects the whole
        tile, as without. Ranks run x fastest: rank = rx + ry * cx."""
        (cx, cy), t = self.cluster, view(dst.type)
        n = span(along, self.cluster)
        rank = tk.cluster_ctarank()
        group = sharers({along}, self.cluster)
        if group == "row":        # rx among the row's ry * cx ..
            i, ry = arith.remui(rank, index(cx)), arith.divui(rank, index(cx))
            mask = arith.shli(index((1 << cx) - 1), arith.muli(ry, index(cx)))
        elif group == "column":   # ry among the column's rx, rx + cx, ..
            i, rx = arith.divui(rank, index(cx)), arith.remui(rank, index(cx))
            mask = arith.shli(index(sum(1 << (j * cx) for j in range(cy))), rx)
        else:
            i, mask = rank, index((1 << n) - 1)
        part = tk.subtile(t.with_(rows=t.rows // n).mlir(), dst, i, index(0))
        coords = list(coords)   # (.., row, col) in tiles of dst: in slices, row * n + i
        coords[-2] = arith.addi(arith.muli(coords[-2], index(n)), i)
        tk.tma_load_multicast(part, src, coords, full, mask)
