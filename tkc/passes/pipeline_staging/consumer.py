"""The consumers' side: the pipelined loop waits for each ring slot to be
full, computes on it and releases it (at the iteration's end, or held
while its wgmma is in flight); once-loaded tiles are waited for where they
were loaded and released after their last reader; the finish's stores may
move into the next work item's loop (overlap.py).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from ...dialect import ops as tk
from ...dialect import walk
from ...hopper.registers import flat_types
from ...hopper.shared import AFTER_RING
from ..overlap import loop_accumulators, overlap_finish
from ..rewrite import add_iter_args, entry, extend_yield, i64, index, inside, uses_in
from .in_flight import after_last_read, carried_positions, held_until, relax_wgmma, trailing_positions
from .ir_helpers import (alloc_of, block_of, for_view, if_then, next_op, ring_div, ring_mod, ring_root, root_alloc,
                         staged_attr, terminator, walk_block, written_allocs)

MEETS = ("tk.sync", "tk.atomic_add", "tk.block_sum", "tk.block_max", "tk.block_min")
SYNC_ID = 1            # the consumers' named barrier (0 is the whole block's)
OVERHEAD_REGISTERS = 32  # a consumer's registers beside its tiles (addresses, counters)


class Consumer:
    """Staging's consumer rewrite (a mixin of staging.Staging)."""

    def _consumers(self, branch) -> None:
        block = branch.else_block
        y = terminator(block)
        with ir.InsertionPoint.at_block_begin(block), self.loc:
            if self.registers:
                tk.set_registers(True, self.registers[1])
            zero = index(0)
        self.sync = {"id": SYNC_ID, "warps": self.cw}
        for op, keep in self.f.waits.items():   # the producer waits; the ring orders the data
            if not keep:
                op.erase()
        self._rename_syncs(block)
        self._publish()
        self._release_stores(block)
        if self.persistent:
            items = add_iter_args(self.f.items, [zero])
            self.f.items = items.operation
            self.f.body = items.body
            ring_in = items.body.arguments[-1]
        else:
            ring_in = zero
        ring_out = self._consumer_loop(ring_in) if self.f.loop is not None else ring_in
        self._after_ring_meeting()
        self._consumer_once_loads()
        for op in self.f.prefetches:   # the producer issued them (a hint: no one waits)
            op.erase()
        if self.persistent:
            extend_yield(items, [ring_out])
        self._epilogue(self.f.body)
        if self.persistent and self.f.loop is not None and self.f.stores:
            self._overlap()
        if self.f.stores or (self.f.loop_stores and not self.store_warp):
            with ir.InsertionPoint(y), self.loc:
                if self.peer_stores:   # stores into a pgl: their writes land before the block exits
                    self._store_wait(0, writes=True)
                else:
                    self._store_wait(0)

    def _after_ring_meeting(self) -> None:
        """Tiles that lie over the ring (st(after_loop=True), reuse.py) are
        written after the loop by whichever warp gets there first, while
        another may still read the last slot by ld.shared (a 16-row tile's A
        rows into registers: the racecheck of split-K 16 x 128 tiles showed
        it) or by its part of the last wgmma: the consumers meet once after
        the drain, before any such write."""
        if self.f.loop is None or self.cw <= 1 or not any(
                o.name == "tk.alloc" and AFTER_RING in o.attributes
                for o in [o.operation for o in entry(self.f.fn).operations]):
            return
        with ir.InsertionPoint(self._drain_end or next_op(self.f.loop)), self.loc:
            tk.sync(**self.sync)

    def _overlap(self) -> None:
        """The finish's stores into the next item's loop (overlap.py), if
        the carried tiles fit beside the accumulators."""
        tops = [o.operation for o in self.f.body.operations]
        start = tops.index(self.f.loop) + 1
        if any(set(tops[start:tops.index(r)]) - set(self.drain) - set(self.once_releases)
               for r in self.once_releases):
            return  # the finish reads a once-loaded tile: it must not move past the next item's load
        have = self.registers[1] if self.registers else 255
        acc = sum(len(flat_types(a.type)) for a in list(self.f.loop.regions[0].blocks[0].arguments)[1:]) \
            + loop_accumulators(self.f.loop)
        drain = sorted(self.drain + self.once_releases, key=tops.index)  # both stay at the item's end
        new = overlap_finish(self.f.items, self.f.loop, drain, have - acc - OVERHEAD_REGISTERS)
        if new is not None:
            self.f.items = new.operation

    def _rename_syncs(self, block) -> None:
        """The author's block-wide tk.sync (and the meetings of tk.atomic_add
        and the block reductions): after the split, only the consumers reach it."""
        for op in walk_block(block):
            if op.name in MEETS and "id" not in op.attributes:
                op.attributes["id"] = i64(SYNC_ID)
                op.attributes["warps"] = i64(self.cw)

    def _consumer_loop(self, ring_in):
        loop = add_iter_args(self.f.loop, [ring_in])
        self.f.loop = loop.operation
        it = loop.body.arguments[-1]
        body = loop.body
        first = list(body.operations)[0].operation
        with ir.InsertionPoint(first), self.f.ring_loads[0].location:
            s, ph = self._slot(it)
            tk.wait(tk.stage(self.full, s), ph)
            slots = {}
            for op in self.f.ring_loads:
                root = ring_root(op.operands[0])
                if root not in slots:
                    slots[root] = tk.stage(root, s)
                    _sink_views(root, loop.operation)
        for tile, slot in slots.items():
            for user, i in uses_in(tile, loop.operation):
                if user != slot.owner.operation:
                    user.operands[i] = slot
        for op in self.f.ring_loads:
            op.erase()
        ring = set(slots.values())
        # a slot the loop's TMA stores read goes back once they have read it
        self.ring_reads = _stores_after_last(self.f.loop_stores, ring)
        self._loop_outputs(loop, it, ring)
        # Keeping an iteration's wgmma in flight holds its slot one iteration
        # longer: with a single slot the producer could never refill it.
        relaxed = relax_wgmma(body) if self.stages >= 2 else None
        held = held_until(body, self.stages) if relaxed is None else None
        with ir.InsertionPoint(terminator(body)), self.loc:
            if relaxed is None and held is None:
                self._ring_store_wait(0)
                self._release(tk.stage(self.empty, s))
            nxt = arith.addi(it, index(1))
        self.drain, self._drain_end = [], None
        if relaxed is not None or held is not None:
            wait = relaxed if relaxed is not None else held
            carried = carried_positions(loop, wait) if relaxed is not None else trailing_positions(body)
            self._delayed_release(loop, wait, it, s, carried)
            ops = [o.operation for o in block_of(loop.operation).operations]
            self.drain = ops[ops.index(loop.operation) + 1:ops.index(self._drain_end)]
        extend_yield(loop, [nxt])
        loop.operation.attributes["tk.staged"] = staged_attr(self.stages, "consumer")
        del loop.operation.attributes["tk.pipeline"]
        return loop.results[-1]

    def _loop_outputs(self, loop, it, ring) -> None:
        """Tiles stored every iteration: a ring of OUTPUT_STAGES slots; before
        writing slot it % 2, warp 0 waits for the store that read it two
        iterations ago (at most the m stores of the previous iteration and
        those of this one so far may stay in flight). A slot of the input
        ring (`ring`) stored as loaded is no output tile: its release waits
        for the store (_ring_store_wait)."""
        if not self.f.loop_stores:
            return
        body, m = loop.body, len(self.f.loop_stores)
        first = list(body.operations)[0].operation
        slots = {}
        with ir.InsertionPoint(first), self.f.loop_stores[0].location:
            s = arith.remui(it, index(self.out_slots))
            for op in self.f.loop_stores:
                tile = op.operands[1]
                if tile not in slots and tile not in ring:
                    alloc_of(tile).attributes["stages"] = i64(self.out_slots)
                    slots[tile] = tk.stage(tile, s)
        for tile, slot in slots.items():
            for user, i in uses_in(tile, loop.operation):
                if user != slot.owner.operation:
                    user.operands[i] = slot
        if self.store_warp:
            self._store_warp_consumer(body, it)
            return
        issued, waited, meeting = 0, set(), None
        for op in [o.operation for o in body.operations]:
            for root in written_allocs(op) & set(slots) - waited:
                waited.add(root)
                # the consumers already meet between the last store's issue
                # and this write (the author's tk.sync): the wait goes before
                # that barrier, which then orders it before every warp's write
                with ir.InsertionPoint(meeting or op), op.location:
                    self._store_wait(m + issued)
                    if meeting is None:
                        tk.sync(**self.sync)
            if op in self.f.loop_stores:
                issued, meeting = issued + 1, None
            elif self._meets(op) and not self.bands:
                meeting = op
        for op in self.f.loop_stores:
            self._issue_store(op)

    def _meets(self, op) -> bool:
        """op is a barrier of all the consumer warps (an author's tk.sync)."""
        return op.name == "tk.sync" and all(
            k in op.attributes and ir.IntegerAttr(op.attributes[k]).value == v for k, v in self.sync.items())

    def _slot(self, it):
        """(slot, phase parity) of ring counter `it`."""
        return ring_mod(it, self.stages), ring_mod(ring_div(it, self.stages), 2)

    def _delayed_release(self, loop, wait, it, s, carried) -> None:
        """After `wait` (a pending = 0 wait, or the relaxed one): release the
        previous iteration's slot (all its groups retired); after the loop:
        wait for all (the loop results at `carried` are the in-flight
        accumulators, rebound to the wait's results), release the last."""
        start = list(loop.operation.operands)[-1]
        tops = [o.operation for o in loop.body.operations]
        issued = sum(o.name == "tk.tma_store" for t in tops[:tops.index(wait)] for o in [t, *walk(t)])
        with ir.InsertionPoint(next_op(wait)), wait.location:
            later = arith.cmpi(arith.CmpIPredicate.ne, it, start)
            with if_then(later):
                self._ring_store_wait(issued)
                prev = ring_mod(arith.subi(it, index(1)), self.stages)
                self._release(tk.stage(self.empty, prev))
        after = next_op(loop.operation)
        self._drain_end = after
        with ir.InsertionPoint(after), loop.operation.location:
            results = [loop.results[i] for i in carried]
            done = tk.warpgroup_mma_wait(results, 0)
            for r, d in zip(results, done.results):
                for user, i in [(u.owner, u.operand_number) for u in list(r.uses)]:
                    user = user.operation if hasattr(user, "operation") else user
                    if user != done:
                        user.operands[i] = d
            end = loop.results[-1]
            with if_then(arith.cmpi(arith.CmpIPredicate.ne, end, start)):
                self._ring_store_wait(0)
                last = ring_mod(arith.subi(end, index(1)), self.stages)
                self._release(tk.stage(self.empty, last))

    def _ring_store_wait(self, issued: int) -> None:
        """Before a ring slot's release, where the loop's TMA stores read its
        slots: warp 0 waits until at most the stores issued after the last
        such one (in its iteration, plus `issued` since) may still read."""
        if self.ring_reads is not None:
            with if_then(self._is_issuer()):
                tk.tma_store_wait(self.ring_reads + issued)

    def _consumer_once_loads(self) -> None:
        """A once-per-item load: wait where it was, release after its last
        reader in the work item (so the producer loads the next item's tile
        during this one's finish: attention's Q under its O store)."""
        if not self.f.once_loads:
            return
        parity = self._item_parity()
        for op in self.f.once_loads:
            full, empty = self.once[op]
            tile = op.operands[0]
            with ir.InsertionPoint(op), op.location:
                slot, phase = self._once_slot(parity(op, 2 * self.once_slots))
                if slot is not None:      # every use in the item reads this item's slot
                    view_ = tk.stage(tile, slot)
                    for user, i in uses_in(tile, self.f.items):
                        if user not in (view_.owner.operation, op):
                            user.operands[i] = view_
                    full, empty = tk.stage(full, slot), tk.stage(empty, slot)
                tk.wait(full, phase)
            if self.persistent:
                with ir.InsertionPoint(after_last_read(self.f.body, root_alloc(tile))), op.location:
                    release = tk.arrive(empty).operation
                self.once_releases.append(release)
                self.freed[release] = root_alloc(tile)   # a store reading it: _simulate waits
            op.erase()

    def _once_slot(self, k):
        """(slot, phase) of a once-loaded tile from k, the work item's
        counter modulo 2 * slots: (None, k) with one slot, else (k % 2, k / 2)."""
        if self.once_slots == 1:
            return None, k
        return arith.remui(k, index(2)), arith.divui(k, index(2))

    def _item_parity(self):
        """parity(op, n=2) -> the work item counter modulo n at op (0 without
        items; n = 4 gives a two-slot tile its slot and phase)."""
        if not self.persistent:
            return lambda op, n=2: index(0)
        loop = for_view(self.f.items)

        def parity(op, n=2):
            with ir.InsertionPoint(op), op.location:
                j = arith.divui(arith.subi(loop.induction_variable, loop.lowerBound), loop.step)
                return arith.remui(j, index(n))
        return parity


def _stores_after_last(stores, tiles):
    """The stores (in issue order) after the last one of a tile in `tiles`;
    None when none stores one."""
    last = [i for i, op in enumerate(stores) if op.operands[1] in tiles]
    return len(stores) - 1 - last[-1] if last else None


def _sink_views(tile, loop) -> None:
    """Subtiles of a ring tile made before its loop (used only inside it,
    analysis.py checked): remade at the insertion point, in the loop, so
    that they view this iteration's slot."""
    for u in list(tile.uses):
        user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
        if user.name != "tk.subtile" or inside(user, loop):
            continue
        new = user.clone()
        for op, i in uses_in(user.results[0], loop):
            op.operands[i] = new.results[0]
        _sink_views(new.results[0], loop)   # views of the view (not yet in the loop)
        if not list(user.results[0].uses):
            user.erase()
