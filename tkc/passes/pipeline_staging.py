"""tk-pipeline-staging: the block level (the paper's load-compute-store-finish
template as a pass; docs/pipelining.md says what an author writes).

Input: a kernel whose warps all run the same code, with compiler-synchronised
copies (tk.pipeline_load / tk.pipeline_store, docs/tile-ir.md "Block level")
and at most one loop marked `tk.pipeline = {stages = N}` (0 = auto), at the
kernel's top level or directly inside tk-grid-ordering's work-item loop.
Output: the producer/consumer form, written only with the Hopper primitives
(mbarriers, TMA, setmaxnreg, named barriers), so the interpreter checks it for
races and deadlocks like any hand-written kernel:

- The kernel's warps become the consumers; a producer warpgroup is added after
  them (a single warp when the consumers are not whole warpgroups). Consumers
  get registers from it with setmaxnreg when there are two or more consumer
  warpgroups (ThunderKittens' 40 / 232 split for two), or one at two or more
  blocks an SM (40 / 216 at two).
- Each tile a `tk.pipeline_load` in the pipelined loop fills becomes a ring
  of S slots (tk.alloc {stages = S}); `full` and `empty` mbarrier rings hand
  the slots over. The producer's one issuing warp walks the same loop (and
  the same work items) with a ring counter `it`: wait for slot it % S to be
  empty (parity (it / S + 1) % 2, so the first round passes), expect the
  stage's bytes, issue the TMA loads. The consumers wait for the slot to be
  full (parity (it / S) % 2), compute on it and release it.
- Release, and wgmma kept in flight: when the loop body's warpgroup mmas only
  feed their accumulators to the next iteration's mmas, the body's final
  `warpgroup_mma_wait {pending = 0}` becomes `pending = g` (g: the mma groups
  one iteration issues), the slot of the previous iteration is released after
  it, and a `pending = 0` wait plus the last release follow the loop: the
  release waits for the wgmma reads it would otherwise race with (the
  interpreter checks this). When the body ends with mmas issued after its
  last top-level `pending = 0` wait (an accumulation read only after the
  loop, left to run under the next iteration's work), the slot is held into
  the next iteration and released after that iteration's first top-level
  `pending = 0` wait, which retires them (Mosaic GPU's delayed release; a
  wait-all and the last release follow the loop). Otherwise the slot is
  released at the end of the iteration. A body that cannot hold its slot (a
  single stage, which the consumers cannot hold on to while the producer
  refills it; no top-level wait-all; an mma in flight from inside an if) is
  refused at the mma.
- A `tk.pipeline_load` outside the loop (loaded once per work item) gets its
  own full / empty barrier pair: the producer loads it before the loop's
  stages, the consumers wait where the load was and release it after its last
  reader in the work item, once no wgmma may still read it (so the next
  item's load overlaps this one's finish; a finish that reads it is then not
  moved into the next item's loop). In a persistent kernel the tile and its
  pair have two slots, by the item's parity, where the ring still fits at
  the depth asked for (auto: two stages): the producer loads the next item's
  tile right after this item's last stage, under the end of its loop.
- A `tk.tma_prefetch` at the top level (an L2 hint) is issued by the
  producer where it stands among the once-loads, and leaves the consumers.
- A `tk.pipeline_store` becomes: every consumer fences its shared writes
  (fence.proxy.async), the consumers meet at a named barrier, consumer warp 0
  issues the TMA store. Before a later write to a tile whose store may still
  be reading it (in the next work item too), warp 0 waits with
  `tma_store_wait {pending = n}` (n: the stores issued since) and the
  consumers meet again; the store of one work item thus overlaps the next
  item's main loop. When every warp writes only its own band of rows of
  each stored tile (a full-width tk.store at a row index that is a
  permutation of the warp ids, as `warpgroup.store` gives), each warp
  stores its band and waits for its own stores: no barrier between warps.
  A tile stored every iteration of the pipelined loop is double-buffered.
  Warp 0 of the consumers issues its stores after a meeting, as the
  finish's; where a barrier of the author's (tk.sync) already separates the
  last store's issue from the write, warp 0's wait goes before that barrier
  and the consumers do not meet again.
- With `tkc.range(store_warp=True)` a store warp issues them instead
  (FlashAttention-3's dQ writer): the producer warpgroup's second warp walks
  the loop too, and the output slots become a ring the consumers fill and
  it drains, with `full` and `empty` mbarrier rings (the input ring
  mirrored). Each consumer warp fences its writes, arrives on the store's
  full slot and goes on: the consumers never meet for the store. The store
  warp waits for it, issues the store, waits for the store's read and
  arrives on the slot's empty barrier, which the consumers wait for at the
  top of the iteration that refills the slot, two iterations later. It
  needs whole consumer warpgroups (a producer warpgroup with a warp to
  spare), a kernel that is not persistent, and store coordinates the store
  warp can compute; asked for elsewhere, a located error says which. With
  `store_slots=1` the output tiles have one slot: the consumers wait for
  the last iteration's store to have read it right before writing it.
- A tk.atomic_add after the loop publishes the TMA stores to its `after`
  gls: their writes complete before the add. The store warp's: it waits
  for their writes after its loop, adds for the block (the old value in the
  atomic's scratch) and arrives on a barrier the consumers wait on, where
  their atomic becomes a read of the scratch (`delegated`). Consumer warp
  0's: it waits for their writes before the atomic's meeting.
- In a persistent kernel the finish's stores then move into the next work
  item's pipelined loop, one chunk per iteration right after its wgmma issue
  (overlap.py), when the tiles they carry fit the registers.
- The author's block-wide tk.sync in consumer code becomes a named barrier of
  the consumer warps (the producer never reaches it).

Stages: N as asked, or (auto) the deepest ring, up to AUTO_STAGES, that fits
227 KiB of shared memory beside the kernel's other tiles, as ThunderKittens
sizes its input pipe. Every refusal names the author's line and says why: a
load coordinate the producer cannot compute, a pipelined tile used outside its
loop, a shared-memory budget, a loop not at the top level, ...
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from ..diagnostics import error, where
from ..dialect import ops as tk
from ..dialect import walk
from ..dialect.types import RT, ST, Barrier, view
from ..dtypes import itemsize
from .registry import register
from .rewrite import (add_iter_args, backward_slice, clone_ops, entry, extend_yield,
                      hoist_prologue, i64, index, inside, is_prologue, kernels, located, uses_in)
from .verify import kernel_warps
from .verify_block import pipeline_options
from .verify_warpgroup import kernel_blocks, register_budget

AUTO_STAGES = 8        # auto never makes a deeper ring (deeper hides no more latency)
SYNC_ID = 1            # the consumers' named barrier (0 is the whole block's)
OUTPUT_STAGES = 2      # a tile stored in the pipelined loop is double-buffered
OVERHEAD_REGISTERS = 32  # a consumer's registers beside its tiles (addresses, counters)
WARPGROUP = 4
WGMMA = ("tk.warpgroup_mma_ab", "tk.warpgroup_mma_abt", "tk.warpgroup_mma_atb",
         "tk.warpgroup_mma_atbt")
SHARED_WRITES = ("tk.store", "tk.group_load", "tk.tma_load", "tk.pipeline_load")


@register("tk-pipeline-staging",
          "turn tk.pipeline loops and tma.load/tma.store into a warp-specialised "
          "producer/consumer pipeline: TMA ring, full/empty mbarriers, setmaxnreg, "
          "wgmma kept in flight, TMA-store finish overlapped with the next work item")
def run(module_op) -> None:
    for fn in kernels(module_op.operation):
        found = find(fn)
        if found is not None:
            Staging(found).build()


# ---------------------------------------------------------------- what is there

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
        if getattr(_alloc_of(tile), "name", "") != "tk.alloc" or "stages" in _alloc_of(tile).attributes:
            raise error(op, "the source of a tma.store in a pipelined loop must be a whole shared "
                            "tile from st(...) (not a view or a ring)")
        for u in tile.uses:
            user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
            if not inside(user, f.loop):
                raise error(user, f"{_short(tile)} is stored in the pipelined loop (at {where(op)}): "
                                  "it is double-buffered there and may only be used inside the loop")


def _short(v) -> str:
    return str(v.type).removeprefix("!tk.").replace(" : i64", "")


def _bytes(t) -> int:
    return t.rows * t.cols * itemsize(t.dtype)


# ---------------------------------------------------------------- the rewrite

class Staging:
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
        self.issues = []  # the branches issuing TMA stores (a store right after one joins it)
        self.drained = None  # the store warp's "writes completed" barrier (tk.atomic_add)
        self.store_warp = self._store_warp_choice()
        self.out_slots = self.opts.get("store_slots") or OUTPUT_STAGES   # a stored tile's slots

    # -- the whole kernel
    def build(self) -> None:
        first = hoist_prologue(self.fn)
        if not self.has_producer:
            self._stores_only()
            return
        self._once_loads_slots()
        self.stages = self._choose_stages()
        self.registers = self._split_registers()
        with ir.InsertionPoint(first), self.loc:
            self._barriers()
            branch = self._split()
        self._producer(branch)  # first: it reads the loads the consumers' rewrite removes
        self._consumers(branch)
        self.fn.attributes["tk.warps"] = i64(self.total)

    def _stores_only(self) -> None:
        """No loads: every warp stays a consumer; stores use the block barrier."""
        self.sync = {}
        self._publish()
        self._epilogue(self.f.body)
        with ir.InsertionPoint(_terminator(entry(self.fn))), self.loc:
            self._store_wait(0)

    def _store_warp_choice(self) -> bool:
        """Whether the loop's stores go through a store warp: where the author
        asks (tkc.range(store_warp=True)); where it cannot be, a located error
        saying why. Not the default: it measured faster for the attention
        backward's dQ and slower for the linear attention's outputs."""
        if not self.opts.get("store_warp"):
            return False
        why = None
        if not self.f.loop_stores:
            why = "this loop has no tma.store"
        elif not self.whole:
            why = ("the consumers are not whole warpgroups, so the producer is a single warp "
                   "and has no warp to spare")
        elif self.persistent:
            why = "the kernel is persistent (the store warp walks one work item's loop)"
        else:
            known = [*entry(self.fn).arguments, _for(self.f.loop).induction_variable]
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

    # -- stages and shared memory
    def _choose_stages(self) -> int:
        if not self.f.ring_loads:
            return 0
        asked = self.opts.get("stages", 0)
        if asked:
            self._check_budget(asked, fixed=True)
            return asked
        for s in range(AUTO_STAGES, 0, -1):
            if self._check_budget(s, fixed=False):
                return s
        self._check_budget(1, fixed=True)  # raises, with the breakdown
        return 1

    def _once_loads_slots(self) -> None:
        """Two slots for the once-loaded tiles of a persistent kernel when the
        ring still fits beside them at the depth asked for (auto: two stages),
        else one."""
        if self.once_slots == 1 or not self.f.once_loads:
            return
        tiles = [_alloc_of(op.operands[0]) for op in self.f.once_loads]
        for t in tiles:
            t.attributes["stages"] = i64(self.once_slots)
        if self.f.ring_loads and not self._check_budget(self.opts.get("stages", 0) or 2, fixed=False):
            self.once_slots = 1
            for t in tiles:
                del t.attributes["stages"]

    def _check_budget(self, stages: int, fixed: bool) -> bool:
        """Whether `stages` slots of the ring fit beside the other shared
        buffers (the shared plan's bump layout); with `fixed`, a located error
        with every buffer's bytes instead of False."""
        from ..lowering.shared import alignment, nbytes, shared_limit
        limit = shared_limit(self.fn)
        end, lines = 0, []
        ring = {op.operands[0] for op in self.f.ring_loads}
        outputs = {op.operands[1] for op in self.f.loop_stores}
        allocs = [o.operation for o in entry(self.fn).operations if o.operation.name == "tk.alloc"]
        extra = [(Barrier(), 2 * stages)] + [(Barrier(), 2 * self.once_slots)] * len(self.f.once_loads)
        for t, n in [(view(a.results[0].type),
                      stages if a.results[0] in ring else self.out_slots if a.results[0] in outputs
                      else _stages_of(a)) for a in allocs] + extra:
            stride = _round_up(nbytes(t), alignment(t))
            end = _round_up(end, alignment(t)) + stride * n
            lines.append(f"  {t.text().removeprefix('!tk.').replace(' : i64', '')}"
                         + (f" x {n} stages" if n > 1 else "") + f": {stride * n} bytes")
        if end <= limit:
            return True
        if fixed:
            raise error(self.f.loop or self.fn,
                        f"a {stages}-stage pipeline needs {end} bytes of shared memory, more than "
                        f"the {limit} a block may use: use fewer stages, smaller tiles or "
                        "stages=\"auto\":\n" + "\n".join(lines))
        return False

    # -- barriers: full/empty rings and one-off pairs, initialised up front
    def _barriers(self) -> None:
        b = Barrier().mlir()
        self.full = self.empty = None
        if self.stages:
            self.full = tk.alloc(b, self.stages)
            self.empty = tk.alloc(b, self.stages)
            tk.init_barrier(self.full, 1)
            tk.init_barrier(self.empty, self.cw)
            for op in self.f.ring_loads:
                _alloc_of(op.operands[0]).attributes["stages"] = i64(self.stages)
        self.once = {}
        for op in self.f.once_loads:
            full, empty = (tk.alloc(b, self.once_slots) if self.once_slots > 1 else tk.alloc(b)
                           for _ in range(2))
            tk.init_barrier(full, 1)
            tk.init_barrier(empty, self.cw)
            self.once[op] = (full, empty)
        self.stage_bytes = sum(_bytes(view(op.operands[0].type)) for op in self.f.ring_loads)
        if self.store_warp:  # rings over the output slots: written (per store), read
            self.store_full = [tk.alloc(b, self.out_slots) for _ in self.f.loop_stores]
            for bar in self.store_full:
                tk.init_barrier(bar, self.cw)
            self.store_empty = tk.alloc(b, self.out_slots)
            tk.init_barrier(self.store_empty, 1)
            if any(op in self.f.loop_stores for op in self._published()):
                self.drained = tk.alloc(b)   # the store warp's writes have completed
                tk.init_barrier(self.drained, 1)

    # -- the role split
    def _split(self):
        """scf.if warpid >= cw {producer} else {consumers}, with every
        non-prologue op of the entry block moved into the else branch."""
        ops = [o.operation for o in entry(self.fn).operations]
        is_producer = arith.cmpi(arith.CmpIPredicate.uge, tk.worker_id("warpid"), index(self.cw))
        branch = scf.IfOp(is_producer, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            y = scf.YieldOp([])
        for o in ops[:-1]:
            if not is_prologue(o):
                o.move_before(y)
        if not self.persistent:
            self.f.body = branch.else_block  # the per-item code now lives there
        return branch

    # ---------------------------------------------------------------- consumers

    def _consumers(self, branch) -> None:
        block = branch.else_block
        y = _terminator(block)
        with ir.InsertionPoint.at_block_begin(block), self.loc:
            if self.registers:
                tk.set_registers(True, self.registers[1])
            zero = index(0)
        self.sync = {"id": SYNC_ID, "warps": self.cw}
        self._rename_syncs(block)
        self._publish()
        if self.persistent:
            items = add_iter_args(self.f.items, [zero])
            self.f.items = items.operation
            self.f.body = items.body
            ring_in = items.body.arguments[-1]
        else:
            ring_in = zero
        ring_out = self._consumer_loop(ring_in) if self.f.loop is not None else ring_in
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
                self._store_wait(0)

    def _overlap(self) -> None:
        """The finish's stores into the next item's loop (overlap.py), if
        the carried tiles fit beside the accumulators."""
        from .overlap import overlap_finish
        from ..lowering.core import flat_types
        tops = [o.operation for o in self.f.body.operations]
        start = tops.index(self.f.loop) + 1
        if any(set(tops[start:tops.index(r)]) - set(self.drain) - set(self.once_releases)
               for r in self.once_releases):
            return  # the finish reads a once-loaded tile: it must not move past the next item's load
        have = self.registers[1] if self.registers else 255
        acc = sum(len(flat_types(a.type)) for a in list(self.f.loop.regions[0].blocks[0].arguments)[1:])
        drain = sorted(self.drain + self.once_releases, key=tops.index)  # both stay at the item's end
        new = overlap_finish(self.f.items, self.f.loop, drain, have - acc - OVERHEAD_REGISTERS)
        if new is not None:
            self.f.items = new.operation

    def _split_registers(self):
        """(producer, consumer) setmaxnreg counts, or None: setmaxnreg needs
        whole warpgroups, and pays only when two or more consumer warpgroups
        share the SM (one consumer warpgroup alone already has 255 registers;
        two blocks of one each launch with 128 a thread, which the producer
        does not need)."""
        consumers = self.cw // WARPGROUP
        blocks = kernel_blocks(self.fn)
        if not self.whole or consumers * blocks < 2:
            return None
        budget = register_budget(consumers + 1, blocks)
        per_sm = f" ({blocks} an SM)" if blocks > 1 else ""
        p = self.opts.get("producer_registers") or (40 if consumers < 3 else 24)
        c = self.opts.get("consumer_registers") or min(256, (budget - p) // consumers // 8 * 8)
        if p + consumers * c > budget:
            raise error(self.f.loop or self.fn,
                        f"registers=({p}, {c}) need {p + consumers * c} per thread slot over "
                        f"{consumers + 1} warpgroups; a block of them{per_sm} launches with {budget}")
        return p, c

    def _published(self) -> list:
        """The TMA stores (pipeline_store ops) whose gl a tk.atomic_add after
        the loop lists in `after`: their writes must have completed before
        its add."""
        roots = {_gl_root(g) for op in self._atomics() for g in list(op.operands)[6:]}
        return [op for op in self.f.loop_stores + self.f.stores if _gl_root(op.operands[0]) in roots]

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
                    if _bands(self.f.stores, self.cw):
                        tk.tma_store_wait(0, writes=True)
                    else:
                        with _if(self._is_issuer()):
                            tk.tma_store_wait(0, writes=True)

    def _rename_syncs(self, block) -> None:
        """The author's block-wide tk.sync (and tk.atomic_add's meeting): after
        the split, only the consumers reach it."""
        for op in _walk_block(block):
            if op.name in ("tk.sync", "tk.atomic_add") and "id" not in op.attributes:
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
                slots[op.operands[0]] = tk.stage(op.operands[0], s)
        for tile, slot in slots.items():
            for user, i in uses_in(tile, loop.operation):
                if user != slot.owner.operation:
                    user.operands[i] = slot
        for op in self.f.ring_loads:
            op.erase()
        self._loop_outputs(loop, it)
        # Keeping an iteration's wgmma in flight holds its slot one iteration
        # longer: with a single slot the producer could never refill it.
        relaxed = _relax_wgmma(body) if self.stages >= 2 else None
        held = _held_until(body, self.stages) if relaxed is None else None
        with ir.InsertionPoint(_terminator(body)), self.loc:
            if relaxed is None and held is None:
                tk.arrive(tk.stage(self.empty, s))
            nxt = arith.addi(it, index(1))
        self.drain = []
        if relaxed is not None or held is not None:
            wait = relaxed if relaxed is not None else held
            carried = _carried_positions(loop, wait) if relaxed is not None else _trailing_positions(body)
            self._delayed_release(loop, wait, it, s, carried)
            ops = [o.operation for o in _block_of(loop.operation).operations]
            self.drain = ops[ops.index(loop.operation) + 1:ops.index(self._drain_end)]
        extend_yield(loop, [nxt])
        loop.operation.attributes["tk.staged"] = _staged(self.stages, "consumer")
        del loop.operation.attributes["tk.pipeline"]
        return loop.results[-1]

    def _loop_outputs(self, loop, it) -> None:
        """Tiles stored every iteration: a ring of OUTPUT_STAGES slots; before
        writing slot it % 2, warp 0 waits for the store that read it two
        iterations ago (at most the m stores of the previous iteration and
        those of this one so far may stay in flight)."""
        if not self.f.loop_stores:
            return
        body, m = loop.body, len(self.f.loop_stores)
        first = list(body.operations)[0].operation
        slots = {}
        with ir.InsertionPoint(first), self.f.loop_stores[0].location:
            s = arith.remui(it, index(self.out_slots))
            for op in self.f.loop_stores:
                tile = op.operands[1]
                if tile not in slots:
                    _alloc_of(tile).attributes["stages"] = i64(self.out_slots)
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
            for root in _writes(op) & set(slots) - waited:
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
            roots = {_root(op.operands[1]) for op in self.f.loop_stores}
            at = next(o.operation for o in body.operations if _writes(o.operation) & roots)
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

    def _meets(self, op) -> bool:
        """op is a barrier of all the consumer warps (an author's tk.sync)."""
        return op.name == "tk.sync" and all(
            k in op.attributes and ir.IntegerAttr(op.attributes[k]).value == v for k, v in self.sync.items())

    def _slot(self, it):
        """(slot, phase parity) of ring counter `it`."""
        s = arith.remui(it, index(self.stages))
        ph = arith.remui(arith.divui(it, index(self.stages)), index(2))
        return s, ph

    def _delayed_release(self, loop, wait, it, s, carried) -> None:
        """After `wait` (a pending = 0 wait, or the relaxed one): release the
        previous iteration's slot (all its groups retired); after the loop:
        wait for all (the loop results at `carried` are the in-flight
        accumulators, rebound to the wait's results), release the last."""
        start = list(loop.operation.operands)[-1]
        with ir.InsertionPoint(_next_op(wait)), wait.location:
            later = arith.cmpi(arith.CmpIPredicate.ne, it, start)
            with _if(later):
                prev = arith.remui(arith.subi(it, index(1)), index(self.stages))
                tk.arrive(tk.stage(self.empty, prev))
        after = _next_op(loop.operation)
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
            with _if(arith.cmpi(arith.CmpIPredicate.ne, end, start)):
                last = arith.remui(arith.subi(end, index(1)), index(self.stages))
                tk.arrive(tk.stage(self.empty, last))

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
                with ir.InsertionPoint(_after_last_read(self.f.body, _root(tile))), op.location:
                    self.once_releases.append(tk.arrive(empty).operation)
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
        loop = _for(self.f.items)

        def parity(op, n=2):
            with ir.InsertionPoint(op), op.location:
                j = arith.divui(arith.subi(loop.induction_variable, loop.lowerBound), loop.step)
                return arith.remui(j, index(n))
        return parity

    # ---------------------------------------------------------------- epilogue

    def _epilogue(self, block) -> None:
        """TMA stores: fence, meet, one warp issues; waits before rewriting a
        tile a store may still read (simulated over two work items). When
        every warp writes only its own band of rows of every stored tile,
        each warp stores its band instead: no barrier at all."""
        if not self.f.stores:
            return
        self.bands = _bands(self.f.stores, self.cw)
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
        A store right after another one's issue (nothing between them)
        joins its branch: that meeting already follows both tiles' writes."""
        def store():
            tk.tma_store(op.operands[0], op.operands[1], list(op.operands)[2:], add="add" in op.attributes)
        prev = _prev_op(op)
        if prev is not None and any(prev == b for b in self.issues):
            with ir.InsertionPoint(_terminator(prev.regions[0].blocks[0])), op.location:
                store()
        else:
            with ir.InsertionPoint(op), op.location:
                tk.fence_async()
                tk.sync(**self.sync)
                with _if(self._is_issuer()) as branch:
                    store()
            self.issues.append(branch.operation)
        op.erase()

    def _issue_band(self, op, block) -> None:
        """The warp fences its writes and stores its own band of the tile:
        rows band*R .. of it, at row tile r * (rows / R) + band of the gl."""
        tile = op.operands[1]
        rows, band = self.bands[tile], _last_band(op, tile, block)
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
        end. With insert, put a wait before each write to a tile in flight."""
        inflight = list(inflight)
        for op in [o.operation for o in block.operations]:
            written = _writes(op)
            hit = [i for i, t in enumerate(inflight) if t in written]
            if hit:
                pending = len(inflight) - 1 - hit[-1]
                if insert:
                    with ir.InsertionPoint(op), op.location:
                        self._store_wait(pending)
                        if not self.bands:
                            tk.sync(**self.sync)
                inflight = inflight[len(inflight) - pending:] if pending else []
            if op in stores:
                inflight.append(_root(op.operands[1]))
        return inflight

    def _store_wait(self, pending: int) -> None:
        """The issuing warp (each warp, for banded stores) waits for reads."""
        if self.bands:
            tk.tma_store_wait(pending)
            return
        with _if(self._is_issuer()):
            tk.tma_store_wait(pending)

    # ---------------------------------------------------------------- producer

    def _producer(self, branch) -> None:
        block = branch.then_block
        y = _terminator(block)
        with ir.InsertionPoint(y), self.loc:
            if self.registers:
                tk.set_registers(False, self.registers[0])
            w = tk.worker_id("warpid")
            with _if(arith.cmpi(arith.CmpIPredicate.eq, w, index(self.cw))):
                mapping = {a: a for a in entry(self.fn).arguments}
                if self.persistent:
                    self._producer_items(mapping)
                else:
                    self._producer_block(self.f.body, mapping, index(0), index(0))
            if self.store_warp:
                with _if(arith.cmpi(arith.CmpIPredicate.eq, w, index(self.cw + 1))):
                    self._store_warp_loop({a: a for a in entry(self.fn).arguments})

    def _store_warp_loop(self, mapping) -> None:
        """The store warp walks the pipelined loop: per iteration k, each
        store once the consumers have written its slot (full slot k % 2,
        phase k / 2), then, once the stores have read the slot
        (tma_store_wait), an arrival on that slot's empty barrier. Waiting
        here costs the consumers nothing: they refill the slot two
        iterations later."""
        src = _for(self.f.loop)
        with self.f.loop.location:
            lb, ub, step = _need(mapping, [src.lowerBound, src.upperBound, src.step], self.f.loop)
            for op in self.f.loop_stores:  # what does not change with k: computed once, here
                _need(mapping, [op.operands[0], *list(op.operands)[2:]], op, varying=src.induction_variable)
            loop = scf.ForOp(lb, ub, step, [index(0)])
        body_map = dict(mapping)
        body_map[src.induction_variable] = loop.induction_variable
        k = loop.body.arguments[-1]
        with ir.InsertionPoint(loop.body), self.f.loop.location:
            s, phase = self._output_slot(k)
            for op, full in zip(self.f.loop_stores, self.store_full):
                with op.location:
                    gl, *coords = _need(body_map, [op.operands[0], *list(op.operands)[2:]], op)
                    tk.wait(tk.stage(full, s), phase)
                    tk.tma_store(gl, tk.stage(_root(op.operands[1]), s), coords,
                                 add="add" in op.attributes)
            tk.tma_store_wait(0)
            tk.arrive(tk.stage(self.store_empty, s))
            scf.YieldOp([arith.addi(k, index(1))])
        loop.operation.attributes["tk.staged"] = _staged(self.stages, "stores")
        if self.drained is not None:   # a tk.atomic_add publishes these stores' writes
            with self.f.loop.location:
                tk.tma_store_wait(0, writes=True)
            for op in self._atomics():     # added here, the old value left in its scratch
                with op.location:
                    mapping[op.operands[1]] = op.operands[1]   # the scratch (an entry-block alloc)
                    gl, scratch, *rest = _need(mapping, list(op.operands), op)
                    tk.atomic_add(gl, scratch, rest[:4], rest[4:], ir.IntegerAttr(op.attributes["value"]).value,
                                  warps=1)
            with self.f.loop.location:
                tk.arrive(self.drained)

    def _atomics(self) -> list:
        """The author's tk.atomic_add ops after the pipelined loop (at the top
        level of the work item: the frontend's rule). One before the loop
        follows no store; the store warp, which adds after its loop, must not
        take it over (the consumers would wait for it before the loop)."""
        ops = [o.operation for o in self.f.body.operations]
        start = next((i + 1 for i, o in enumerate(ops) if self.f.loop is not None and o == self.f.loop), 0)
        return [o for o in ops[start:] if o.name == "tk.atomic_add"]

    def _producer_items(self, mapping) -> None:
        src = _for(self.f.items)
        lb, ub, step = _need(mapping, [src.lowerBound, src.upperBound, src.step], self.f.items)
        loop = scf.ForOp(lb, ub, step, [index(0)])
        with ir.InsertionPoint(loop.body), self.loc:
            inner = dict(mapping)
            inner[src.induction_variable] = loop.induction_variable
            j = arith.divui(arith.subi(loop.induction_variable, lb), step)
            out = self._producer_block(self.f.body, inner, loop.body.arguments[-1],
                                       arith.remui(j, index(2 * self.once_slots)))
            scf.YieldOp([out])
        loop.operation.attributes["tk.staged"] = _staged(self.stages, "producer")

    def _producer_block(self, block, mapping, it, parity):
        """The producer's walk of one work item: once-loads, then the ring
        (parity: the item counter modulo 2 * once_slots)."""
        for op in [o.operation for o in block.operations]:
            if op in self.once:
                self._producer_once(op, mapping, parity)
            elif op in self.f.prefetches:
                with op.location:
                    src, *coords = _need(mapping, list(op.operands)[1:], op)
                    tk.tma_prefetch(op.operands[0], src, coords)
            elif self.f.loop is not None and op == self.f.loop:
                it = self._producer_loop(mapping, it)
        return it

    def _producer_once(self, op, mapping, parity) -> None:
        full, empty = self.once[op]
        tile = op.operands[0]
        with op.location:
            src, *coords = _need(mapping, list(op.operands)[1:], op)  # a slice: its offsets too
            slot, phase = self._once_slot(parity)
            if slot is not None:
                tile, full, empty = (tk.stage(x, slot) for x in (tile, full, empty))
            if self.persistent:
                tk.wait(empty, arith.addi(phase, index(1)))
            tk.expect_bytes(full, _bytes(view(tile.type)))
            tk.tma_load(tile, src, coords, full)

    def _producer_loop(self, mapping, it):
        src = _for(self.f.loop)
        with self.f.loop.location:
            lb, ub, step = _need(mapping, [src.lowerBound, src.upperBound, src.step], self.f.loop)
            for op in self.f.ring_loads:  # what does not change with k: computed once, here
                _need(mapping, list(op.operands)[1:], op, varying=src.induction_variable)
            loop = scf.ForOp(lb, ub, step, [it])
        body_map = dict(mapping)
        body_map[src.induction_variable] = loop.induction_variable
        cur = loop.body.arguments[-1]
        with ir.InsertionPoint(loop.body), self.f.ring_loads[0].location:
            s, ph = self._slot(cur)
            tk.wait(tk.stage(self.empty, s), arith.addi(ph, index(1)))
            full = tk.stage(self.full, s)
            tk.expect_bytes(full, self.stage_bytes)
            for op in self.f.ring_loads:
                with op.location:
                    src, *coords = _need(body_map, list(op.operands)[1:], op)
                    tk.tma_load(tk.stage(op.operands[0], s), src, coords, full)
            scf.YieldOp([arith.addi(cur, index(1))])
        loop.operation.attributes["tk.staged"] = _staged(self.stages, "producer")
        return loop.results[0]


# ---------------------------------------------------------------- helpers

def _need(mapping, values, op, varying=None) -> list:
    """values as the producer sees them: their pure computation cloned here.
    With `varying` (a loop variable), only the part that does not depend on
    it is cloned (hoisted out of that loop)."""
    try:
        ops = backward_slice(values, stop=lambda v: v in mapping or (varying is not None and v == varying))
    except ValueError as e:
        culprit, why = e.args[0]
        raise error(op, "the producer cannot compute this load's coordinates or loop bounds: "
                        f"they depend on {why}{located(culprit)}") from None
    if varying is not None:
        ops = [o for o in ops if not _depends(o, varying, ops)]
    clone_ops(ops, mapping)
    return [mapping.get(v) for v in values]


def _depends(op, value, among) -> bool:
    """Whether op's result depends on `value` through the ops `among`."""
    producers = {r: o for o in among for r in o.results}
    todo, seen = list(op.operands), set()
    while todo:
        v = todo.pop()
        if v == value:
            return True
        o = producers.get(v)
        if o is not None and o not in seen:
            seen.add(o)
            todo.extend(o.operands)
    return False


def _for(op):
    """The scf.ForOp view of an scf.for Operation."""
    return op.opview if hasattr(op, "opview") else op


def _alloc_of(value):
    owner = value.owner
    return owner.operation if hasattr(owner, "operation") else owner


def _stages_of(alloc) -> int:
    a = alloc.attributes["stages"] if "stages" in alloc.attributes else None
    return ir.IntegerAttr(a).value if a is not None else 1


def _round_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _terminator(block):
    return list(block.operations)[-1].operation


def _next_op(op):
    ops = [o.operation for o in _block_of(op).operations]
    return ops[ops.index(op) + 1]


def _prev_op(op):
    """The op before `op` in its block, or None."""
    ops = [o.operation for o in _block_of(op).operations]
    i = ops.index(op)
    return ops[i - 1] if i else None


def _block_of(op):
    parent = op.parent
    for region in parent.regions:
        for block in region.blocks:
            if any(o.operation == op for o in block.operations):
                return block
    raise ValueError("op not found in its parent")


class _if:
    """`with _if(cond):` builds an scf.if without results at the insertion point."""

    def __init__(self, cond):
        self.cond = cond

    def __enter__(self):
        self.op = scf.IfOp(self.cond, [], has_else=False)
        self.ip = ir.InsertionPoint(self.op.then_block)
        self.ip.__enter__()
        return self.op

    def __exit__(self, *exc):
        if exc[0] is None:
            scf.YieldOp([])
        self.ip.__exit__(*exc)
        return False


def _staged(stages: int, role: str):
    return ir.DictAttr.get({"stages": i64(stages), "role": ir.StringAttr.get(role)})


def _walk_block(block):
    for op in block.operations:
        op = op.operation
        yield op
        yield from walk(op)


def _gl_root(value):
    """The kernel argument a gl value is (a slice of)."""
    while getattr(_alloc_of(value), "name", "") == "tk.gl_slice":
        value = _alloc_of(value).operands[0]
    return value


def _root(value):
    """The tk.alloc a shared value is a slot or view of."""
    while True:
        owner = _alloc_of(value)
        if getattr(owner, "name", "") in ("tk.subtile", "tk.stage"):
            value = owner.operands[0]
        else:
            return value


def _writes(op) -> set:
    """The allocs (roots) op writes, with everything nested in it."""
    out = set()
    for o in [op, *walk(op)]:
        if o.name in SHARED_WRITES and isinstance(view(o.operands[0].type), ST):
            out.add(_root(o.operands[0]))
    return out


def _bands(stores, warps: int) -> dict:
    """{tile: band rows R} when each stored tile is written only by tk.store
    of a full-width rt<R, C> at a row index that gives every consumer warp
    its own band (a permutation of 0 .. warps-1 over the warp ids) and read
    by nothing but its stores; {} unless that holds for every stored tile
    (the warps' store counts must agree for tma_store_wait)."""
    out = {}
    for p in stores:
        tile = p.operands[1]
        t = view(tile.type)
        if getattr(_alloc_of(tile), "name", "") != "tk.alloc" or t.rows % warps:
            return {}
        rows = t.rows // warps
        for u in tile.uses:
            user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
            if user.name == "tk.pipeline_store" and u.operand_number == 1:
                continue
            x = view(user.operands[1].type) if user.name == "tk.store" else None
            if not (u.operand_number == 0 and isinstance(x, RT) and x.rows == rows
                    and x.cols == t.cols and _band_of(user.operands[2], warps)
                    and _constant_index(user.operands[3]) == 0):
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
    op = _alloc_of(value)
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
    op = _alloc_of(value)
    return ir.IntegerAttr(op.attributes["value"]).value if getattr(op, "name", "") == "arith.constant" else None


def _last_band(store, tile, block):
    """The row index of the last tk.store into `tile` before `store` in `block`."""
    ops = [o.operation for o in block.operations]
    for o in reversed(ops[:ops.index(store)]):
        if o.name == "tk.store" and o.operands[0] == tile:
            return o.operands[2]
    raise error(store, "internal: a banded store with no write before it")


def _relax_wgmma(body):
    """The body's final wait, relaxed to keep this iteration's wgmma groups in
    flight, when every mma only feeds the next iteration's mmas (else None)."""
    tops = [o.operation for o in body.operations]
    mmas = [o for o in tops if o.name in WGMMA]
    waits = [o for o in tops if o.name == "tk.warpgroup_mma_wait"]
    nested = [o for t in tops for o in walk(t) if o.name in WGMMA + ("tk.warpgroup_mma_wait",)]
    if not mmas or len(waits) != 1 or nested:
        return None
    wait = waits[0]
    if _pending(wait) != 0 or tops.index(wait) < tops.index(mmas[-1]):
        return None
    y = tops[-1]
    results = {r for m in mmas for r in m.results}
    for m in mmas:
        for u in m.results[0].uses:
            user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
            if not (user == wait or (user.name in WGMMA and u.operand_number == 2)):
                return None
    if set(wait.operands) - results:
        return None
    args = list(body.arguments)
    for r in wait.results:
        for u in r.uses:
            user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
            if user != y:
                return None
            arg = args[1 + u.operand_number]
            for au in arg.uses:
                au_user = au.owner.operation if hasattr(au.owner, "operation") else au.owner
                if not (au_user.name in WGMMA and au.operand_number == 2 and au_user in mmas):
                    return None
    wait.attributes["pending"] = i64(len(mmas))
    return wait


def _after_last_read(block, tile):
    """The op of block before which tile (an alloc) is free again: after the
    last top-level op that uses it, once no warpgroup mma that reads it may
    still be in flight (_in_flight: waits at this level retire them, other
    mmas may stay; a loop whose iterations end retired adds none). The
    block's terminator when that never happens."""
    tops = [o.operation for o in block.operations]
    uses = [i for i, t in enumerate(tops) if _reads(t, tile)]
    for i in range(uses[-1] if uses else len(tops), len(tops) - 1):
        if not any(_reads(o, tile) for o in _in_flight(tops[:i + 1])):
            return tops[i + 1]
    return tops[-1]


def _reads(op, tile) -> bool:
    """Whether op (or an op nested in it) has a view of shared tile `tile` as an operand."""
    return any(isinstance(view(v.type), ST) and _root(v) == tile for o in [op, *walk(op)] for v in o.operands)


def _held_until(body, stages: int):
    """Mosaic GPU's delayed release, for a body that ends with warpgroup
    mmas in flight (e.g. an accumulation read only after the loop): its slot
    is held into the next iteration and released after that iteration's
    first top-level wait that retires them (pending = 0, or pending = n
    after n mmas of the body: groups complete in order). That wait, or None
    when the body ends retired. A body that cannot hold its slot is refused
    here, naming the mma and why."""
    mma = _unretired_mma(body)
    if mma is None:
        return None
    tops = [o.operation for o in body.operations]
    waits = [o for o in tops if _retires_earlier(tops, o)]
    why = None
    if stages < 2:
        why = "with one stage the consumers cannot hold a slot while the producer refills it"
    elif not waits:
        why = ("no wait at the loop body's top level (pending = 0, or pending = n after n "
               "mmas of the body) would retire it in the next iteration")
    elif any(o.name not in WGMMA for o in _in_flight(tops)):
        why = "an mma still in flight at the iteration's end is issued inside an if or a loop"
    if why is not None:
        raise error(mma, "this warpgroup mma is still in flight when the pipelined loop's "
                         "iteration ends, and its stage cannot be held into the next "
                         f"iteration: {why}. Wait for it (warpgroup.mma_async_wait) "
                         "before the iteration ends")
    return waits[0]


def _trailing_positions(body) -> list:
    """The yielded values (their loop-result positions) that come from the
    mmas still in flight at the body's end."""
    trailing = {r for o in _in_flight([o.operation for o in body.operations]) for r in o.results}
    return [i for i, v in enumerate(_terminator(body).operands) if v in trailing]


def _carried_positions(loop, wait) -> list:
    """The loop results that carry the relaxed wait's tiles."""
    y = _terminator(loop.body)
    return [i for i, v in enumerate(y.operands) if v in set(wait.results)]


def _unretired_mma(block):
    """The block's last top-level op issuing a warpgroup mma (itself or
    nested) that no later wait retires before the block ends, else None."""
    left = _in_flight([o.operation for o in block.operations])
    return left[-1] if left else None


def _in_flight(ops) -> list:
    """Of a block's top-level ops `ops`, those whose warpgroup mmas may
    still be in flight at its end (a wgmma, or an op with a nested one that
    its blocks leave in flight), in issue order. Groups complete in order,
    so a wait with pending = n retires every op that n top-level mmas
    followed (nested ones count for none: a loop may run no iteration, an
    if may skip its branch); an if whose two branches each wait for all
    retires everything before it."""
    left = []                            # [op, top-level mmas issued after it]
    for o in ops:
        if o.name == "tk.warpgroup_mma_wait":
            left = [e for e in left if e[1] < _pending(o)]
            continue
        nested = [b for r in o.regions for b in r.blocks]
        if o.name == "scf.if" and len(nested) == 2 and all(
                any(_is_wait_all(t.operation) for t in b.operations) for b in nested):
            left = []
        if o.name in WGMMA:
            for e in left:
                e[1] += 1
            left.append([o, 0])
        elif any(_unretired_mma(b) is not None for b in nested):
            left.append([o, 0])
    return [e[0] for e in left]


def _retires_earlier(tops, wait) -> bool:
    """Whether top-level op `wait` retires every mma issued before the
    block began: a wait for all, or one with pending = n after at least n
    top-level mmas of the block."""
    if wait.name != "tk.warpgroup_mma_wait":
        return False
    return sum(o.name in WGMMA for o in tops[:tops.index(wait)]) >= _pending(wait)


def _is_wait_all(op) -> bool:
    return op.name == "tk.warpgroup_mma_wait" and _pending(op) == 0


def _pending(wait) -> int:
    return ir.IntegerAttr(wait.attributes["pending"]).value
