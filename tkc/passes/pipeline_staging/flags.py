"""Flag waits in a pipelined kernel (docs/multi-gpu.md): the producer issues
the TMA loads, so a `tk.wait_signal` that a load of a pgl may follow (one
before the pipelined loop, or in its body before the loads, or anywhere
earlier in a work item a later item's loads follow) must be run by the
producer before it issues them; otherwise the loads would read a peer's data
before it arrived. That is what lets a fused all-gather GEMM's mainloop wait
for the peers' chunks. A flag orders what the peers (or the copy engines
pushing for them) write, which is pgl memory: loads of plain gls are not
the wait's to order, so a wait that only those may follow (an item's finish
waiting for a peer's data that it then reads itself) stays the consumers'
alone.

The producer runs each such wait where it stands in its walk (the work
item's top level, or the loop body before the stage's loads). The consumers
keep it only where they themselves touch a pgl's memory after it (a load,
a store): data that reaches them only through the ring was acquired by the
producer, whose full barrier orders it before their reads (the producer's
wait ends with an async-proxy fence, so its TMA loads read what it acquired).
"""
from __future__ import annotations

from ...diagnostics import error, where
from ...dialect import gl_root, walk
from ...dialect.kernel import lenient, parallel_args
from ..rewrite import entry
from .ir_helpers import block_of

# ops that take a pgl value without touching its memory on the consumers' side
_NO_ACCESS = ("tk.signal", "tk.wait_signal", "tk.pipeline_load", "tk.peer", "tk.gl_slice", "tk.dim",
              "tk.tma_prefetch")


def later_ops(op, fn) -> list:
    """The ops that may run after `op` in the same warp: those after it in its
    block and in every enclosing block, and the whole body of every loop
    around it (its next iteration)."""
    out, cur = [], op
    while cur != fn:
        ops = [o.operation for o in block_of(cur).operations]
        for o in ops[ops.index(cur) + 1:]:
            out += [o, *walk(o)]
        parent = cur.parent.operation if hasattr(cur.parent, "operation") else cur.parent
        if parent.name in ("scf.for", "scf.while") and parent != fn:
            out += [o for r in parent.regions for b in r.blocks for x in b.operations
                    for o in (x.operation, *walk(x.operation))]
        cur = parent
    return out


def producer_waits(f) -> dict:
    """{wait_signal op: whether the consumers keep it} for the waits a
    pipelined load may follow; each must be where the producer walks (the
    work item's top level or the pipelined loop's body), else a located
    error."""
    fn, out = f.fn, {}
    loads = set(f.ring_loads) | set(f.once_loads)
    if not loads:
        return out
    pgls = [a for i, a in enumerate(entry(fn).arguments) if i in lenient(parallel_args, fn)]
    top = f.items if f.items is not None else fn
    for w in [o for o in walk(fn) if o.name == "tk.wait_signal"]:
        after = later_ops(w, fn)
        feeds = [o for o in after if o in loads and _touches_pgl(o, pgls)]
        if not feeds:
            continue
        parent = w.parent.operation if hasattr(w.parent, "operation") else w.parent
        if parent != top and (f.loop is None or parent != f.loop):
            raise error(w, f"the tma.load at {where(feeds[0])} may follow this wait_signal, and the "
                           "producer warp that issues it must wait first: put the wait at the "
                           "kernel's top level (or the work item's) or directly in the pipelined "
                           "loop's body, not under an if or in another loop")
        out[w] = any(o.name not in _NO_ACCESS and _touches_pgl(o, pgls) for o in after)
    return out


def _touches_pgl(op, pgls) -> bool:
    """Whether op takes a gl that is (a view of) one of the pgl arguments."""
    return any(str(v.type).startswith("!tk.gl<") and any(gl_root(v)[0] == a for a in pgls)
               for v in op.operands)
