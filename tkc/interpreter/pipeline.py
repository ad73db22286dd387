"""The compiler-synchronised TMA ops before tk-pipeline-staging (docs/tile-ir.md,
"Block level"): tk.pipeline_load and tk.pipeline_store.

Every warp of the block executes one; its meaning is: the block synchronises
(as tk.sync), the tile is copied, the block synchronises again. So each step
yields the op's block SyncPoint twice, and warp 0 copies in between: for the
race detector the copy is warp 0's access, ordered after every warp's earlier
accesses by the first sync and before their later ones by the second. The
copy follows TMA (hopper.py): a load zero-fills what lies out of bounds and
rounds to the st's dtype, a store writes only the in-bounds part.
"""
from __future__ import annotations

from .hopper import load_box, store_box, tma_types
from .operands import expect
from .program import Step, handler
from .syncs import block_sync
from .values import ROUND

_ALL = (slice(None),)


def _operands(c, op, st_at: int, gl_at: int):
    """(st type, st slot, gl slot, coordinate slots), checked."""
    expect(len(op.operands) == 6, op, f"takes 4 coordinates, got {len(op.operands) - 2}")
    st, _ = tma_types(op, op.operands[st_at], op.operands[gl_at])
    idx = [c.slot(v) for v in op.operands[2:6]]
    return st, c.slot(op.operands[st_at]), c.slot(op.operands[gl_at]), idx


def _synchronised(c, op, copy):
    """A step: block sync, `copy(env, w)` by warp 0, block sync."""
    point = block_sync(c, op)

    def step(env, w):
        yield point
        if w.warpid == 0:
            copy(env, w)
        yield point
    return Step(step, op, gen=True)


@handler("tk.pipeline_load")
def _pipeline_load(c, op):
    st, dst, src, idx = _operands(c, op, 0, 1)
    rnd = ROUND[st.dtype]

    def copy(env, w):
        tile = load_box(op, env[src], [env[i] for i in idx], st)
        if w.block.races is not None:
            w.block.races.write(w.warpid, env[dst], _ALL, op)
        env[dst][...] = rnd(tile)
    return _synchronised(c, op, copy)


@handler("tk.pipeline_store")
def _pipeline_store(c, op):
    st, src, dst, idx = _operands(c, op, 1, 0)
    rnd = ROUND[st.dtype]  # the gl's too (one dtype); a gl array may hold f32
    add = "add" in op.attributes

    def copy(env, w):
        if w.block.races is not None:
            w.block.races.read(w.warpid, env[src], _ALL, op)
        store_box(op, env[dst], env[src], [env[i] for i in idx], rnd, add, st.dtype)
    return _synchronised(c, op, copy)
