"""Block reductions (tk.block_sum, tk.block_max, tk.block_min): every warp of
the group leaves its value, the group meets at its barrier (a tk.sync: the
race detector and the deadlock checks see it as one), then every warp
combines the values in warp order, ((x0 + x1) + x2) + ..., in float32, as the
lowering does (tkc/lowering/block.py), so the interpreter and the GPU give
the same bits. The scratch sv is the lowering's business: here the values
meet in the block's state, one entry per run of the op.
"""
from __future__ import annotations

import numpy as np

from ..dialect.types import RT, RV, SV, safe_view
from ..hopper.registers import frag_len
from .operands import F32, expect
from .program import Step, handler
from .syncs import _point

# maxnum / minnum, as the lowering's arith.maxnumf: a NaN loses to a number
_COMBINE = {"tk.block_sum": np.add, "tk.block_max": np.fmax, "tk.block_min": np.fmin}


@handler(*_COMBINE)
def _block_reduce(c, op):
    point = _point(c, op)
    x_t, s_t, out_t = (safe_view(v) for v in (op.operands[0], op.operands[1], op.results[0]))
    scalar = str(op.operands[0].type) == "f32"
    expect(scalar or (isinstance(x_t, (RT, RV)) and x_t.dtype == "f32"), op,
           f"x must be an f32 rt, rv or scalar, got {op.operands[0].type}")
    expect(str(op.results[0].type) == str(op.operands[0].type), op,
           f"the result must have x's type {op.operands[0].type}, got {op.results[0].type}")
    need = point.warps * 32 * (1 if scalar else frag_len(x_t))
    expect(isinstance(s_t, SV) and s_t.dtype == "f32" and s_t.length >= need, op,
           f"scratch must be an sv<f32> of at least {need} elements, got {op.operands[1].type}")
    combine = _COMBINE[op.name]
    x, out, key = c.slot(op.operands[0]), c.result_slot(op), object()

    def step(env, w):
        n = w.counts.get(key, 0)
        w.counts[key] = n + 1
        runs = w.block.reductions
        token = (key, n)     # this run of the op (the group's warps pair up by run)
        parts = runs.setdefault(token, {})
        parts[w.warpid] = env[x]
        yield point
        acc = parts[0]
        for k in range(1, point.warps):
            acc = combine(acc, parts[k], dtype=F32)
        env[out] = F32(acc) if scalar else acc
        parts.setdefault("read", set()).add(w.warpid)
        if len(parts["read"]) == point.warps:
            del runs[token]
    return Step(step, op, gen=True)
