"""The TMA stores: every consumer fences its writes, they meet, warp 0 (or
each warp, banded) issues the store, and waits before a tile a store may
still read is written again; or a store warp drains a ring of output slots.
A tk.atomic_add after the loop publishes the stores it lists in `after`.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from ...dialect import gl_root
from ...dialect import ops as tk
from ...dialect.attrs import after_gls
from ...dialect.kernel import lenient, parallel_args
from ...dialect.types import view
from ..rewrite import entry, index
from .bands import last_band, store_bands
from .ir_helpers import (for_view, gl_arg, if_then, prev_op, recompute, root_alloc, staged_attr, walk_block,
                         terminator, written_allocs)


class Stores:
    """Staging's store rewrite (a mixin of staging.Staging)."""

    def _published(self) -> list:
        """The TMA stores (pipeline_store ops) whose gl a tk.atomic_add after
        the loop lists in `after`: their writes must have completed before
        its add."""
        roots = {g for op in self._atomics() for g in after_gls(op)}
        return [op for op in self.f.loop_stores + self.f.stores if gl_arg(op.operands[0]) in roots]

    def _publish(self) -> None:
        """Before each tk.atomic_add: the stores it publishes have completed.
        Where they are the store warp's, the store warp itself waits for
        their writes and adds (one atomic round trip fewer on the consumers'
        way out: it overlaps their finish), leaves the old value in the
        scratch and arrives on self.drained; the consumers wait on it and
        read the value (the atomic becomes `delegated`). Stores of consumer
        warp 0 (or of each warp, banded) are awaited by a wait for writes
        before the add, which follows through the atomic's own meeting."""
        published = self._published()
        if not published:
            return
        for op in self._atomics():
            with ir.InsertionPoint(op), op.location:
                if self.drained is not None:   # the store warp added: read what it left
                    tk.wait(self.drained, index(0))
                    op.attributes["delegated"] = ir.UnitAttr.get()
                if any(p not in self.f.loop_stores or not self.store_warp for p in published):
                    if store_bands(self.f.stores, self.cw):
                        tk.tma_store_wait(0, writes=True)
                    else:
                        with if_then(self._is_issuer()):
                            tk.tma_store_wait(0, writes=True)

    def _release_stores(self, block) -> None:
        """Before each tk.signal of the consumers: the signalling warp's TMA
        stores have completed their writes, so the release covers them (a
        peer that waits on the flag reads what they wrote). The issuer is
        consumer warp 0: signal from it. Banded, every warp issued its own
        band: then every warp waits for its writes and the consumers meet
        before the if (or ifs) around the signal, so one warp's release
        covers every band."""
        if not (self.f.stores or self.f.loop_stores) or self.store_warp:
            return
        banded = bool(self.f.stores) and store_bands(self.f.stores, self.cw)
        for op in [o for o in walk_block(block) if o.name == "tk.signal"]:
            if banded:
                top = op
                while top.parent.name == "scf.if":
                    top = top.parent
                with ir.InsertionPoint(top), op.location:
                    tk.tma_store_wait(0, writes=True)
                    tk.sync(**self.sync)
            with ir.InsertionPoint(op), op.location:
                tk.tma_store_wait(0, writes=True)

    def _atomics(self) -> list:
        """The author's tk.atomic_add ops after the pipelined loop (at the top
        level of the work item: the frontend's rule). One before the loop
        follows no store; the store warp, which adds after its loop, must not
        take it over (the consumers would wait for it before the loop)."""
        ops = [o.operation for o in self.f.body.operations]
        start = next((i + 1 for i, o in enumerate(ops) if self.f.loop is not None and o == self.f.loop), 0)
        return [o for o in ops[start:] if o.name == "tk.atomic_add"]

    def _epilogue(self, block) -> None:
        """TMA stores: fence, meet, one warp issues; waits before rewriting a
        tile a store may still read (simulated over two work items). When
        every warp writes only its own band of rows of every stored tile,
        each warp stores its band instead: no barrier at all."""
        if not self.f.stores:
            return
        self.bands = store_bands(self.f.stores, self.cw)
        stores = set(self.f.stores)
        inflight = self._simulate(block, stores, [], insert=False) if self.persistent else []
        self._simulate(block, stores, inflight, insert=True)
        for op in self.f.stores:
            if self.bands:
                self._issue_band(op, block)
            else:
                self._issue_store(op)

    def _issue_store(self, op) -> None:
        """Every consumer fences its shared writes, they meet, warp 0 stores.
        A store right after another one's issue (nothing between them but
        pure index arithmetic and views: its coordinates and its tile's
        part, which move up before that issue) joins its branch: that
        meeting already follows both tiles' writes (a tile stored in
        pieces meets once, not once a piece)."""
        def store():
            tk.tma_store(op.operands[0], op.operands[1], list(op.operands)[2:], add="add" in op.attributes)
        prev, pure = prev_op(op), []
        while prev is not None and _pure(prev) and not any(prev == b for b in self.issues):
            pure.append(prev)
            prev = prev_op(prev)
        if prev is not None and any(prev == b for b in self.issues):
            for o in reversed(pure):   # (in order: each one's operands stay defined above it)
                o.move_before(prev)
            with ir.InsertionPoint(terminator(prev.regions[0].blocks[0])), op.location:
                store()
        else:
            with ir.InsertionPoint(op), op.location:
                tk.fence_async()
                tk.sync(**self.sync)
                with if_then(self._is_issuer()) as branch:
                    store()
            self.issues.append(branch.operation)
        op.erase()

    def _issue_band(self, op, block) -> None:
        """The warp fences its writes and stores its own band of the tile:
        rows band*R .. of it, at row tile r * (rows / R) + band of the gl."""
        tile = op.operands[1]
        rows, band = self.bands[tile], last_band(op, tile, block)
        t = view(tile.type)
        gl, (b, d, r, c) = op.operands[0], list(op.operands)[2:]
        with ir.InsertionPoint(op), op.location:
            tk.fence_async()
            tk.sync(warps=1)
            part = tk.subtile(t.with_(rows=rows).mlir(), tile, band, index(0))
            row = arith.addi(arith.muli(r, index(t.rows // rows)), band)
            tk.tma_store(gl, part, [b, d, row, c], add="add" in op.attributes)
        op.erase()

    def _is_issuer(self):
        w = tk.worker_id("warpid")
        return arith.cmpi(arith.CmpIPredicate.eq, w, index(0))

    def _simulate(self, block, stores, inflight, insert: bool) -> list:
        """Walk the block's top-level ops; return the stores in flight at its
        end. With insert, put a wait before each write to a tile in flight,
        and before the release of a once-loaded tile a store may still read
        (the producer's next load writes it). A release needs no meeting
        after the wait: its empty barrier completes only with the issuing
        warp's own arrival, which follows the wait."""
        inflight = list(inflight)
        for op in [o.operation for o in block.operations]:
            written = written_allocs(op) | ({self.freed[op]} if op in self.freed else set())
            hit = [i for i, t in enumerate(inflight) if t in written]
            if hit:
                pending = len(inflight) - 1 - hit[-1]
                if insert:
                    with ir.InsertionPoint(op), op.location:
                        self._store_wait(pending)
                        if not self.bands and op not in self.freed:
                            tk.sync(**self.sync)
                inflight = inflight[len(inflight) - pending:] if pending else []
            if op in stores:
                inflight.append(root_alloc(op.operands[1]))
        return inflight

    def _store_wait(self, pending: int, writes: bool = False) -> None:
        """The issuing warp (each warp, for banded stores) waits for reads
        (with `writes`: for their global writes)."""
        if self.bands:
            tk.tma_store_wait(pending, writes=writes)
            return
        with if_then(self._is_issuer()):
            tk.tma_store_wait(pending, writes=writes)

    def _peer_stores(self) -> bool:
        """Whether a TMA store writes a pgl's memory: the block then waits for
        its writes before it exits, so that what follows the kernel on the
        stream (a barrier across ranks) may release them to the peers."""
        pgls = [a for i, a in enumerate(entry(self.fn).arguments) if i in lenient(parallel_args, self.fn)]
        return any(gl_root(op.operands[0])[0] == a for op in self.f.stores + self.f.loop_stores for a in pgls)

    def _store_warp_consumer(self, body, it) -> None:
        """The output slots as a ring the consumers fill and the store warp
        drains (the input ring mirrored): at the top of the iteration, wait
        until slot it % 2 is empty, i.e. the stores of iteration it - 2 have
        read it (parity it / 2 + 1: the first round passes); at each store,
        fence, the warp's lanes converge, arrive on the store's full slot.
        (At the top, beside the ring's wait: the read it waits for was
        issued a whole iteration before, so it has long ended. With one
        slot (store_slots=1) the read is the last iteration's: the wait goes
        right before the first write to the slot, as late as it can.)"""
        at = list(body.operations)[0].operation
        if self.out_slots == 1:
            roots = {root_alloc(op.operands[1]) for op in self.f.loop_stores}
            at = next(o.operation for o in body.operations if written_allocs(o.operation) & roots)
        with ir.InsertionPoint(at), self.f.loop_stores[0].location:
            s, phase = self._output_slot(it)
            tk.wait(tk.stage(self.store_empty, s), arith.addi(phase, index(1)))
        for op, full in zip(self.f.loop_stores, self.store_full):
            with ir.InsertionPoint(op), op.location:
                tk.fence_async()
                tk.sync(warps=1)
                tk.arrive(tk.stage(full, s))
            op.erase()

    def _output_slot(self, it):
        """(slot, phase) of an output ring at iteration counter `it`."""
        n = index(self.out_slots)
        return arith.remui(it, n), arith.divui(it, n)

    def _store_warp_loop(self, mapping) -> None:
        """The store warp walks the pipelined loop: per iteration k, each
        store once the consumers have written its slot (full slot k % 2,
        phase k / 2), then, once the stores have read the slot
        (tma_store_wait), an arrival on that slot's empty barrier. Waiting
        here costs the consumers nothing: they refill the slot two
        iterations later."""
        src = for_view(self.f.loop)
        with self.f.loop.location:
            lb, ub, step = recompute(mapping, [src.lowerBound, src.upperBound, src.step], self.f.loop)
            for op in self.f.loop_stores:  # what does not change with k: computed once, here
                recompute(mapping, [op.operands[0], *list(op.operands)[2:]], op, varying=src.induction_variable)
            loop = scf.ForOp(lb, ub, step, [index(0)])
        body_map = dict(mapping)
        body_map[src.induction_variable] = loop.induction_variable
        k = loop.body.arguments[-1]
        with ir.InsertionPoint(loop.body), self.f.loop.location:
            s, phase = self._output_slot(k)
            for op, full in zip(self.f.loop_stores, self.store_full):
                with op.location:
                    gl, *coords = recompute(body_map, [op.operands[0], *list(op.operands)[2:]], op)
                    tk.wait(tk.stage(full, s), phase)
                    tk.tma_store(gl, tk.stage(root_alloc(op.operands[1]), s), coords,
                                 add="add" in op.attributes)
            tk.tma_store_wait(0)
            tk.arrive(tk.stage(self.store_empty, s))
            scf.YieldOp([arith.addi(k, index(1))])
        loop.operation.attributes["tk.staged"] = staged_attr(self.stages, "stores")
        if self.drained is not None:   # a tk.atomic_add publishes these stores' writes
            with self.f.loop.location:
                tk.tma_store_wait(0, writes=True)
            for op in self._atomics():     # added here, the old value left in its scratch
                with op.location:
                    mapping[op.operands[1]] = op.operands[1]   # the scratch (an entry-block alloc)
                    gl, scratch, *rest = recompute(mapping, list(op.operands), op)
                    tk.atomic_add(gl, scratch, rest, after_gls(op), ir.IntegerAttr(op.attributes["value"]).value,
                                  warps=1)
            with self.f.loop.location:
                tk.arrive(self.drained)


def _pure(op) -> bool:
    """Index arithmetic and shared views: ops a store's issue may move above (no effect)."""
    return op.name.startswith("arith.") or op.name in ("tk.subtile", "tk.dim")
