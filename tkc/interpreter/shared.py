"""Shared memory of a block: buffers, rings of slots, and subtile views.

`tk.alloc` makes one buffer per block, shared by its warps; with
`{stages = N}` a ring of N independent slots (docs/tile-ir.md, "Block
level"), of which the value used directly is slot 0 and `tk.stage(%ring, %i)`
is slot i. The block keeps each alloc's slots as a list under the alloc's
result slot, which is how tk.stage (and tk.init_barrier on a barrier ring)
finds the ring of the value it is given. An st or sv slot is a float32 array
starting as NaN (reads of unwritten memory show); a barrier slot a
hopper.BarrierState.

`tk.subtile` of an st is a numpy view of part of the parent, so writes
through it land in the parent and the race detector maps its accesses onto
the parent's cells (races.py); of an rt, a copy of part of the register tile.
"""
from __future__ import annotations

import numpy as np

from ..diagnostics import error
from ..dialect.types import RT, ST, SV, Barrier
from ..dialect.attrs import MAX_STAGES, constant, ring_stages
from ..hopper.shared import AFTER_RING, subtile_problems
from .operands import expect, tview
from .program import handler

F32 = np.float32


@handler("tk.alloc")
def _alloc(c, op):
    t = tview(op.results[0])
    expect(isinstance(t, (ST, SV, Barrier)), op, f"result must be an st, sv or barrier, got {t}")
    stages = _stages(op)
    make = _barrier_maker() if isinstance(t, Barrier) else _buffer_maker(t, op, stages)
    out = c.result_slot(op)

    def step(env, w):  # the first warp to get here allocates for the block
        ring = w.block.shared.get(out)
        if ring is None:
            ring = w.block.shared[out] = [make(w.block, i) for i in range(stages)]
        env[out] = ring[0]
    return step


def _stages(op) -> int:
    """N of `{stages = N}`, 1 without it."""
    if "stages" not in op.attributes:
        return 1
    n = ring_stages(op.results[0])
    if n is None or not 1 <= n <= MAX_STAGES:
        raise error(op, f"tk.alloc: stages must be an integer in 1..{MAX_STAGES}, "
                        f"got {op.attributes['stages']}")
    return n


def _buffer_maker(t, op, stages: int):
    ring = stages > 1 or "stages" in op.attributes
    # a tile the staging lays over the rings (st(after_loop=True)): a buffer of its own
    # here, whose writes the race detector also counts as writes to every ring slot
    place = "ring" if ring else "over_ring" if AFTER_RING in op.attributes else None

    def make(block, i: int) -> np.ndarray:
        buf = np.full(t.shape, np.nan, F32)  # NaN = never written
        if block.races is not None:
            slot = f"slot {i} of a {stages}-slot ring of " if ring else ""
            block.races.add_buffer(buf, t, op, slot, place)
        return buf
    return make


def _barrier_maker():
    from .hopper import BarrierState

    def make(block, i: int):
        races = block.races
        return BarrierState(races and races.phase_clock())
    return make


def ring_of(c, op, value):
    """(slot of the alloc holding the ring, N) for a tk.alloc {stages} result."""
    n = ring_stages(value)
    expect(n is not None, op, "the ring must be a tk.alloc {stages = N} result")
    return c.slot(value), n


@handler("tk.stage")
def _stage(c, op):
    expect(len(op.operands) == 2, op, "takes a ring and a slot index")
    ring, n = ring_of(c, op, op.operands[0])
    expect(tview(op.results[0]) == tview(op.operands[0]), op,
           f"the slot has the ring's type {op.operands[0].type}, got {op.results[0].type}")
    i, out = c.slot(op.operands[1]), c.result_slot(op)

    def step(env, w):
        k = env[i]
        if not 0 <= k < n:
            raise error(op, f"tk.stage: slot {k} is out of the ring's slots 0..{n - 1}")
        env[out] = w.block.shared[ring][k]
    return step


# ---- subtiles

@handler("tk.subtile")
def _subtile(c, op):
    expect(len(op.operands) == 3, op, "takes a tile and two indices")
    x_t, t = tview(op.operands[0]), tview(op.results[0])
    problems = subtile_problems(x_t, t)
    if problems:
        raise error(op, "tk." + "; ".join(problems))
    if isinstance(x_t, RT):
        return _register_part(c, op, x_t, t)
    x, i, j, out = (*(c.slot(v) for v in op.operands), c.result_slot(op))
    parts = (x_t.rows // t.rows, x_t.cols // t.cols)
    rows, cols = t.rows, t.cols

    def step(env, w):
        r, k = env[i], env[j]
        if not (0 <= r < parts[0] and 0 <= k < parts[1]):
            raise error(op, f"tk.subtile: index ({r}, {k}) is outside the {parts[0]} x "
                            f"{parts[1]} parts of {t.rows}x{t.cols} in {x_t.rows}x{x_t.cols}")
        env[out] = env[x][r * rows:(r + 1) * rows, k * cols:(k + 1) * cols]  # a view
    return step


def _register_part(c, op, x_t, t):
    """The subtile of an rt: constant indices, a copy of that part."""
    r, k = (constant(v) for v in op.operands[1:])
    expect(r is not None and k is not None, op,
           "the indices of a register tile's subtile must be constants (arith.constant): "
           "registers cannot be indexed at run time")
    parts = (x_t.rows // t.rows, x_t.cols // t.cols)
    expect(0 <= r < parts[0] and 0 <= k < parts[1], op,
           f"index ({r}, {k}) is outside the {parts[0]} x {parts[1]} parts of "
           f"{t.rows}x{t.cols} in {x_t.rows}x{x_t.cols}")
    ix = (slice(r * t.rows, (r + 1) * t.rows), slice(k * t.cols, (k + 1) * t.cols))
    x, out = c.slot(op.operands[0]), c.result_slot(op)

    def step(env, w):
        env[out] = env[x][ix].copy()
    return step
