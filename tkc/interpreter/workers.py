"""The numpy handlers of the ids of the running warp and block: warpid,
warpgroupid, laneid (refused: a warp runs as one unit), block_idx, grid_dim;
and ragged_item, the work item of a kernel over ragged groups.
"""
from __future__ import annotations

from ..diagnostics import error
from .gl import whole
from .operands import _attr
from .program import handler

_DIMS = {"x": 0, "y": 1, "z": 2}


@handler("tk.warpid")
def _warpid(c, op):
    out = c.result_slot(op)

    def step(env, w):
        env[out] = w.warpid
    return step


@handler("tk.warpgroupid")
def _warpgroupid(c, op):
    out = c.result_slot(op)

    def step(env, w):
        env[out] = w.warpid // 4
    return step


@handler("tk.laneid")
def _laneid(c, op):
    def step(env, w):
        raise error(op, "tk.laneid is not supported by the interpreter "
                        "(it runs each warp as one unit, not 32 lanes)")
    return step


@handler("tk.block_idx", "tk.grid_dim")
def _block_idx(c, op):
    out, d = c.result_slot(op), _DIMS[_attr(op, "dim")]
    grid = op.name == "tk.grid_dim"

    def step(env, w):
        env[out] = (w.block.grid if grid else w.block.idx)[d]
    return step


@handler("tk.ragged_item")
def _ragged_item(c, op):
    """docs/tile-ir.md's tk.ragged_item, on the count gl's numpy array."""
    count, t, groups, height, span = (c.slot(v) for v in op.operands)
    outs = [c.slot(r) for r in op.results]
    rows = op.attributes["rows"].value

    def step(env, w):
        arr, item, n_groups = whole(env[count])[0], int(env[t]), int(env[groups])
        limit, per = int(env[height]), int(env[span])
        acc, found = 0, None
        for j in range(n_groups):
            n = int(arr[0, 0, 0, j]) if j < arr.shape[3] else 0
            h = min(max(-(-n // rows), 0), limit)
            if found is None and acc <= item < acc + per * h:
                found = (j, item - acc, h)
            acc += per * h
        got = found or (n_groups, item - acc, 0)
        for s, v in zip(outs, (*got, acc)):
            env[s] = v
    return step
