"""The numpy handlers of the ids of the running warp and block: warpid,
warpgroupid, laneid (refused: a warp runs as one unit), block_idx, grid_dim.
"""
from __future__ import annotations

from ..diagnostics import error
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
