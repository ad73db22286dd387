"""Stages and registers: the deepest ring that fits the shared-memory budget
beside the kernel's other tiles (auto) or a located error with every
buffer's bytes (asked for), two slots for once-loaded tiles where they fit,
and the setmaxnreg split between producer and consumers.
"""
from __future__ import annotations

from ...diagnostics import error
from ...dialect.kernel import kernel_blocks
from ...dialect.types import Barrier, view
from ...hopper.shared import AFTER_RING, footprint, layout, shared_limit
from ...hopper.warpgroup import WARPGROUP_WARPS as WARPGROUP, register_budget
from ..rewrite import entry, i64
from .ir_helpers import alloc_of, ring_root, stages_of

AUTO_STAGES = 8        # auto never makes a deeper ring (deeper hides no more latency)


class Budget:
    """Staging's stages and registers (a mixin of staging.Staging: reads
    self.f, self.fn, self.opts, self.once_slots, self.out_slots, self.whole,
    self.cw)."""

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
        if any(alloc_of(op.operands[0]).name != "tk.alloc" for op in self.f.once_loads):
            self.once_slots = 1  # a subtile loaded per item: the rest of a slot would be 2 items old
            return
        tiles = [alloc_of(op.operands[0]) for op in self.f.once_loads]
        for t in tiles:
            t.attributes["stages"] = i64(self.once_slots)
        if not self._check_budget(self.opts.get("stages", 0) or 2, fixed=False):
            self.once_slots = 1
            for t in tiles:
                del t.attributes["stages"]

    def _check_budget(self, stages: int, fixed: bool) -> bool:
        """Whether `stages` slots of the ring fit beside the other shared
        buffers (the shared plan's layout, hopper.shared.layout: the tiles
        marked after_ring over the ring where they fit); with `fixed`, a
        located error with every buffer's bytes instead of False."""
        limit = shared_limit(self.fn)
        ring = {ring_root(op.operands[0]) for op in self.f.ring_loads}
        outputs = {op.operands[1] for op in self.f.loop_stores}
        allocs = [o.operation for o in entry(self.fn).operations if o.operation.name == "tk.alloc"]
        items = [(view(a.results[0].type),
                  stages if a.results[0] in ring else self.out_slots if a.results[0] in outputs
                  else stages_of(a),
                  "ring" if a.results[0] in ring else "after" if AFTER_RING in a.attributes else None)
                 for a in allocs]
        items += [(Barrier(), 2 * stages, None)] + [(Barrier(), 2 * self.once_slots, None)] * len(self.f.once_loads)
        _, end = layout(items, padded=True)
        if end <= limit:
            return True
        if fixed:
            lines = [f"  {t.text().removeprefix('!tk.').replace(' : i64', '')}"
                     + (f" x {n} stages" if n > 1 else "") + f": {footprint(t, n, padded=True)} bytes"
                     + (" (after the loop: over the ring where it fits)" if role == "after" else "")
                     for t, n, role in items]
            raise error(self.f.loop or self.fn,
                        f"a {stages}-stage pipeline needs {end} bytes of shared memory, more than "
                        f"the {limit} a block may use: use fewer stages, smaller tiles or "
                        "stages=\"auto\":\n" + "\n".join(lines))
        return False

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
        given = self.opts.get("producer_registers") or self.opts.get("consumer_registers")
        p = self.opts.get("producer_registers") or (40 if consumers < 3 else 24)
        if not given and p >= budget // (consumers + 1):   # a thread's launch count at most the
            return None   # producer's (rotary at 8 blocks an SM: 32): setmaxnreg.dec may not raise it
        c = self.opts.get("consumer_registers") or min(256, (budget - p) // consumers // 8 * 8)
        if p + consumers * c > budget:
            raise error(self.f.loop or self.fn,
                        f"registers=({p}, {c}) need {p + consumers * c} per thread slot over "
                        f"{consumers + 1} warpgroups; a block of them{per_sm} launches with {budget}")
        return p, c
