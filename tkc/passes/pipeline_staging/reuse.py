"""Shared memory the pipelined loop's ring can lend: a tile the author
declares used only after that loop (`st(..., after_loop=True)`: a finish
tile, split-K's partials, alloc attribute tk.after_ring) may lie over the
ring's slots, whose last loads the consumers have waited for and whose last
wgmmas have retired by then, once the consumers have met after the drain
(consumer.py: a warp may still read the last slot by ld.shared). The layout is hopper.shared.layout's; this
checks the claim before the budget picks the ring's depth, so the ring gets
the bytes the tiles no longer take (H200: a 128 x 128 split-K tile, 2 stages
beside its f32 partials and 5 with them over the ring, 22.8 -> 16.6 µs at
1536 x 256 x 4096). Not on by itself: the deeper rings it gives the plain
tiles ran 5-7% slower (128 x 192 at 2048^2 x 4096: 4 -> 5 stages).

Refused, at the tile's line: a kernel without a pipelined loop of loads, or
persistent (the next work item's loop runs beside the last one's finish),
or whose loop stores (its TMA stores may still read slots); a ring or
barrier; a tile used before or in the loop (by any warp), loaded by TMA (the
producer issues such loads ahead), or written by a peer CTA (the destination
of a tma.store_cta or a multicast load: a peer may finish its loop first).
"""
from __future__ import annotations

from ...diagnostics import error
from ...dialect.types import Barrier, view
from ...hopper.shared import AFTER_RING
from ..rewrite import entry, inside

# ops whose operand (at this index) another agent than this CTA's consumers writes: a peer
# CTA (store_cta, multicast), or the producer ahead of the loop (a TMA load)
WRITTEN_ELSEWHERE = {"tk.tma_store_cta": 0, "tk.tma_load_multicast": 0, "tk.pipeline_load": 0,
                     "tk.tma_load": 0}


def check_after_ring(f, ring: set) -> None:
    """A located error for any tk.after_ring tile that may not lie over the
    ring (the module docstring's rules)."""
    ops = [o.operation for o in entry(f.fn).operations]
    marked = [a for a in ops if a.name == "tk.alloc" and AFTER_RING in a.attributes]
    if not marked:
        return
    why = ("the kernel has no pipelined loop of loads" if f.loop is None or not f.ring_loads
           else "the kernel is persistent: the next work item's loop runs beside this item's finish"
           if f.items is not None
           else "the pipelined loop stores tiles: its TMA stores may still read the ring after it"
           if f.loop_stores else None)
    start = ops.index(f.loop) if why is None else 0
    for a in marked:
        reason = why or _problem(a, ring, ops, start)
        if reason:
            raise error(a, f"st(after_loop=True): this tile cannot lie over the pipelined loop's ring: {reason}")


def _problem(a, ring, ops, start) -> str | None:
    if "stages" in a.attributes or a.results[0] in ring or isinstance(view(a.results[0].type), Barrier):
        return "it is a ring or a barrier"
    if ops.index(a) > start:
        return "it is allocated after the loop"
    return _use_problem(a.results[0], ops[start + 1:])


def _use_problem(value, later: list) -> str | None:
    """Why a use of value (through subtile views) keeps it off the ring, or
    None; `later`: the entry block's ops after the loop."""
    for u in value.uses:
        user = getattr(u.owner, "operation", u.owner)
        if WRITTEN_ELSEWHERE.get(user.name) == u.operand_number:
            return (f"{user.name} writes it from elsewhere (a peer CTA, or the producer, which "
                    "issues loads ahead of the loop)")
        if user.name == "tk.subtile":
            problem = _use_problem(user.results[0], later)
            if problem:
                return problem
            continue
        if not any(inside(user, op) for op in later):
            return f"{user.name} uses it before or in the loop"
    return None
