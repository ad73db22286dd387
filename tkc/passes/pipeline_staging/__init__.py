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
  full (parity (it / S) % 2), compute on it and release it; where the
  loop's TMA stores read ring slots as loaded, warp 0 first waits for their
  reads (a store warp cannot take such a store: it hands back only its own
  output slots).
- A load may fill its tile piece by piece: subtiles at constant coordinates
  that fill it once per iteration (analysis.py checks, since a slot comes
  back S iterations later); the producer views its slot as the same
  subtiles. Coordinates may come from index loads (an i32 gl element):
  the producer re-reads them, which is a pure read only when the kernel
  never writes that gl (refused otherwise, ir_helpers.recompute).
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
  tile right after this item's last stage, under the end of its loop. When
  a TMA store reads the tile (stored as loaded), warp 0 waits for that read
  (tma_store_wait {pending = n}) before its arrival: the producer's next
  load into the slot would overwrite it under the store.
- A `tk.wait_signal` (a flag of another rank) that a load may follow runs
  in the producer before it issues those loads, where it stands (the work
  item's top level, or the loop body: before each stage's loads); the
  consumers keep it only where they touch a pgl's memory after it
  (flags.py). A wait the producer cannot run (under an if, in another
  loop) is refused at it.
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

The pass is a package: analysis.py finds and checks the structure,
staging.py rewrites a kernel with budget.py (stages, registers),
producer.py, consumer.py and stores.py (bands.py: banded stores) on its
side, flags.py the flag waits the producer runs, in_flight.py says when a slot may be released, ir_helpers.py holds
the IR helpers they share.
"""
from __future__ import annotations

from ..registry import register
from ..rewrite import kernels
from .analysis import Found, find
from .reuse import check_after_ring
from .staging import Staging


@register("tk-pipeline-staging",
          "turn tk.pipeline loops and tma.load/tma.store into a warp-specialised "
          "producer/consumer pipeline: TMA ring, full/empty mbarriers, setmaxnreg, "
          "wgmma kept in flight, TMA-store finish overlapped with the next work item")
def run(module_op) -> None:
    for fn in kernels(module_op.operation):
        found = find(fn)
        if found is not None:
            Staging(found).build()
        else:   # no pipeline: a tile declared st(after_loop=True) has no ring to lie over
            check_after_ring(Found(fn), set())
