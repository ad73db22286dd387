"""numpy semantics of the warpgroup ops (wgmma, its wait, setmaxnreg).

Each of the 4 warps of a warpgroup runs the op on its own registers, so each
computes only its 16 rows of the warpgroup's 64 x N result:
d_w = a_w @ op(b) + c_w, where a_w is the warp's rt<16, K> (A in registers)
or rows 16*(w%4).. of the shared A. That is exactly the warpgroup's product
row block by row block, with no rendezvous between warps. The mma computes
when issued (docs/tile-ir.md), so the wait returns its tiles unchanged; for
race detection, though, each warp reads the whole shared operands from issue
until a tk.warpgroup_mma_wait of that warp retires the group (races.py), so
a stage released before that wait races with its next writer. setmaxnreg
changes nothing the interpreter can see (its count is checked).
"""
from __future__ import annotations

import numpy as np

from ..diagnostics import error
from ..dialect.types import RT
from ..hopper import warpgroup as rules
from ..hopper.fp8_lanes import lane_permutation
from .operands import tview
from .program import handler

F32 = np.float32


def _fail_on(op, problems) -> None:
    if problems:
        raise error(op, "; ".join(problems))


@handler(*(f"tk.{n}" for n in rules.VARIANTS))
def _warpgroup_mma(c, op):
    name = op.name.removeprefix("tk.")
    var = rules.VARIANTS[name]
    a_t, b_t, c_t = (tview(v) for v in op.operands[:3])
    _fail_on(op, rules.mma_problems(name, a_t, b_t, c_t, tview(op.results[0]), rules.k_order(op))
             + rules.warps_problems(name, c.warps) + rules.negate_problems(name, op))
    sign = -1.0 if rules.negated(op) else 1.0
    a, b, acc, out = (*(c.slot(v) for v in op.operands[:3]), c.result_slot(op))
    when = c.slot(op.operands[3]) if len(op.operands) > 3 else None
    a_in_regs = isinstance(a_t, RT)
    shared = [b] if a_in_regs else [a, b]
    # k_order="lanes": an 8-bit register A's column order[p] enters at k = p
    # (hopper/fp8_lanes.py), so B's k p meets it, exactly as wgmma has it
    perm = lane_permutation(a_t.cols) if rules.k_order(op) == "lanes" else None

    # Products of bf16/f16 values are exact in float64; the sum is rounded to
    # f32 once (as in tk.mma).
    def step(env, w):
        if when is not None and not env[when]:   # guarded off: an empty group, d = c
            if w.block.races is not None:
                w.block.races.issue(w.warpid, "wgmma", [], op)
            env[out] = env[acc]
            return
        if w.block.races is not None:  # each warp reads the operands, until its wait
            w.block.races.issue(w.warpid, "wgmma", [env[s] for s in shared], op)
        rows = slice(16 * (w.warpid % 4), 16 * (w.warpid % 4) + 16)
        x = env[a]   # the warp's 16 rows of a shared A are taken before converting them
        x = (x if a_in_regs else x[rows] if var.a_k_major else x.T[rows]).astype(np.float64)
        x = x if perm is None else x[:, perm]
        y = env[b].astype(np.float64)
        y = y.T if var.b_k_major else y
        env[out] = (sign * (x @ y) + env[acc]).astype(F32)
    return step


@handler("tk.warpgroup_mma_wait")
def _wait(c, op):
    ins = [tview(v) for v in op.operands]
    _fail_on(op, rules.wait_problems(ins, [tview(r) for r in op.results],
                                     op.attributes["pending"].value)
             + rules.warps_problems("warpgroup_mma_wait", c.warps))
    pairs = [(c.slot(v), c.slot(r)) for v, r in zip(op.operands, op.results)]
    pending = op.attributes["pending"].value

    def step(env, w):
        if w.block.races is not None:  # the retired groups' operand reads end here
            w.block.races.retire(w.warpid, "wgmma", pending, op)
        for src, dst in pairs:
            env[dst] = env[src]  # values are immutable: passing them on is a copy
    return step


@handler("tk.increase_registers", "tk.decrease_registers")
def _registers(c, op):
    name = op.name.removeprefix("tk.")
    _fail_on(op, rules.register_problems(name, op.attributes["count"].value, c.warps, c.blocks)
             + rules.warps_problems(name, c.warps))

    def step(env, w):
        pass
    return step
