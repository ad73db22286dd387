"""tk-verify rules of the mbarrier and TMA ops (docs/tile-ir.md, "Hopper ops").

IRDL checks the operand kinds it can (a !tk.barrier, an st, a gl); these
rules check the rest: attribute ranges, coordinate counts, one dtype on both
sides of a copy (TMA does not convert), an st that fits a TMA box, and a gl
whose rows are a multiple of 16 bytes (tensor-map strides must be). tk-verify
(verify.py) calls `CHECKS[name](op, name, ins, outs, kernel)` per op.
"""
from __future__ import annotations

from ..dialect import gl_root
from ..dialect.attrs import int_attr
from ..dialect.types import DYN, GL, ST, SV, Barrier
from ..dtypes import itemsize
from ..hopper.tma import box_problem, shared_kinds  # the rules the lowering applies

TX_LIMIT = 2**20 - 1  # an mbarrier's transaction count is 20 bits


def _at_least(op, name: str, attr: str, least: int, most: int | None = None):
    n = int_attr(op, attr)
    if n is None or n < least or (most is not None and n > most):
        bound = f">= {least}" if most is None else f"in {least}..{most}"
        yield f"{name}: {attr} must be an integer {bound}, got {n if n is not None else 'none'}"


def _check_barrier_op(op, name, ins, outs, kernel):
    if not isinstance(ins[0], Barrier):
        yield f"{name}: operand must be a !tk.barrier"
    if name in ("init_barrier", "arrive"):
        yield from _at_least(op, name, "count", 1)
    elif name == "expect_bytes":
        yield from _at_least(op, name, "bytes", 1, TX_LIMIT)


def _check_wait(op, name, ins, outs, kernel):
    if not isinstance(ins[0], Barrier):
        yield f"{name}: operand must be a !tk.barrier"
    if len(op.operands) != 2 or str(op.operands[1].type) != "index":
        yield f"{name}: takes a barrier and an index phase"


def _check_store_wait(op, name, ins, outs, kernel):
    yield from _at_least(op, name, "pending", 0)


def _check_tma(op, name, ins, outs, kernel):
    """tma_load(st, gl, b, d, r, c, bar), tma_prefetch(st, gl, b, d, r, c) and
    tma_store[_add](gl, st, b, d, r, c)."""
    load = name in ("tma_load", "tma_prefetch")
    s, g = (ins[0], ins[1]) if load else (ins[1], ins[0])
    n_idx = len(ins) - (3 if name == "tma_load" else 2)
    if n_idx != 4:
        yield f"{name}: takes 4 coordinates (b, d, r, c), got {n_idx}"
    if name == "tma_load" and not isinstance(ins[-1], Barrier):
        yield f"{name}: the last operand must be the !tk.barrier the bytes arrive on"
    yield from tma_copy_problems(name, s, g, op.operands[1 if load else 0], kernel)


def tma_copy_problems(name, s, g, gl_value, kernel):
    """What a TMA copy (tma_load/store, pipeline_load/store) needs of its st
    `s` (a load: or sv, a one-row box) and gl `g`: one dtype, a TMA-able box,
    rows of 16 bytes, and a tensor map: the gl is a kernel argument or a
    slice of one."""
    if isinstance(s, SV) and SV not in shared_kinds("tk." + name):
        yield f"{name}: TMA stores take an st, got an sv"
        return
    if not (isinstance(s, (ST, SV)) and isinstance(g, GL)):
        if isinstance(g, GL):
            yield f"{name}: the shared side must be an st (or, loading, an sv)"
        return  # IRDL reports the gl's kind
    if s.dtype != g.dtype:
        yield f"{name}: TMA copies without converting: st and gl must have one dtype, got {s.dtype} and {g.dtype}"
    problem = box_problem(s)
    if problem:
        yield f"{name}: {problem}"
    row_bytes = g.c * itemsize(g.dtype)
    if g.c != DYN and row_bytes % 16:
        yield (f"{name}: a gl used with TMA needs rows of a multiple of 16 bytes; "
               f"dim c = {g.c} gives {row_bytes}")
    if kernel is not None and gl_root(gl_value)[0] not in list(kernel.regions[0].blocks[0].arguments):
        yield (f"{name}: the gl must be a kernel argument or a slice of one (its tensor map is "
               "a kernel parameter)")


CHECKS = {
    "init_barrier": _check_barrier_op,
    "arrive": _check_barrier_op,
    "expect_bytes": _check_barrier_op,
    "wait": _check_wait,
    "tma_load": _check_tma,
    "tma_prefetch": _check_tma,
    "tma_store": _check_tma,
    "tma_store_add": _check_tma,
    "tma_store_wait": _check_store_wait,
}
