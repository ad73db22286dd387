"""The numpy handlers of the ids of the running warp and block: warpid,
warpgroupid, laneid (refused: a warp runs as one unit), block_idx, grid_dim;
and ragged_item, the work item of a kernel over ragged groups.
"""
from __future__ import annotations

import numpy as np

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
        item, per = int(env[t]), int(env[span])
        acc, found = 0, None
        for j, h in enumerate(group_heights(whole(env[count])[0], rows, int(env[groups]), int(env[height]))):
            if found is None and acc <= item < acc + per * h:
                found = (j, item - acc, h)
            acc += per * h
        got = found or (int(env[groups]), item - acc, 0)
        for s, v in zip(outs, (*got, acc)):
            env[s] = v
    return step


def group_heights(count, rows: int, groups: int, limit: int) -> list[int]:
    """Each ragged group's live y values (tk.ragged): min(max(ceil(count[z] /
    rows), 0), limit), count[z] 0 past the count gl's end (element (0, 0, 0, z))."""
    a = np.asarray(count)
    flat = a[0, 0, 0] if a.ndim == 4 else a.reshape(-1)
    return [min(max(-(-int(flat[z]) // rows), 0), limit) if z < flat.size else 0 for z in range(groups)]
