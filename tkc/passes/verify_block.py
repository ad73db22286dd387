"""tk-verify rules of the block-level ops and attributes (docs/tile-ir.md,
"Block level"): rings and their slots, subtile views, the compiler-synchronised
TMA ops, named barriers, and the `tk.pipeline` / `tk.order` attributes that
tk-pipeline-staging and tk-grid-ordering read.

tk-verify (verify.py) calls `CHECKS[name](op, name, ins, outs, kernel)` per tk
op, `check_loop(op)` per scf.for and `check_kernel(fn)` per kernel. The
attributes are read by tkc/dialect/attrs.py and kernel.py, the rules they
share with the lowering and the interpreter are in tkc/hopper/.
"""
from __future__ import annotations

from ..dialect.attrs import (MAX_STAGES, PIPELINE_KEYS, constant, int_attr, pipeline_options, ring_stages,
                             sync_group)
from ..dialect.kernel import check_ragged, is_zigzag, kernel_warps
from ..dialect.types import RT, RV, SV
from ..hopper.registers import frag_len
from ..hopper.shared import subtile_problems
from ..hopper.sync import sync_problems
from .orders import parse_order
from .verify_messages import short
from .verify_tma import tma_copy_problems


def _short(v) -> str:
    return "a non-tk value" if v is None else v.text().removeprefix("!tk.").replace(" : i64", "")


def check_alloc_stages(op):
    if "stages" in op.attributes:
        n = int_attr(op, "stages")
        if n is None or not 1 <= n <= MAX_STAGES:
            yield f"alloc: stages must be an integer in 1..{MAX_STAGES}, got {op.attributes['stages']}"


def _check_stage(op, name, ins, outs, kernel):
    if ring_stages(op.operands[0]) is None:
        yield "stage: the ring must be a tk.alloc {stages = N} result"
    if outs[0] != ins[0]:
        yield f"stage: the slot has the ring's type {_short(ins[0])}, got {_short(outs[0])}"


def _check_subtile(op, name, ins, outs, kernel):
    yield from subtile_problems(ins[0], outs[0])
    if isinstance(ins[0], RT):
        for what, v in (("row", op.operands[1]), ("col", op.operands[2])):
            if constant(v) is None:
                yield (f"subtile: the {what} index of a register tile must be a constant "
                       "(registers cannot be indexed at run time)")


def _check_pipeline_copy(op, name, ins, outs, kernel):
    """pipeline_load(st, gl, b, d, r, c) and pipeline_store(gl, st, b, d, r, c)."""
    load = name == "pipeline_load"
    s, g = (ins[0], ins[1]) if load else (ins[1], ins[0])
    if len(ins) - 2 != 4:
        yield f"{name}: takes 4 coordinates (b, d, r, c), got {len(ins) - 2}"
    yield from tma_copy_problems(name, s, g, op.operands[1 if load else 0], kernel)


def _check_sync(op, name, ins, outs, kernel):
    yield from check_sync_attributes(op, kernel)


def check_sync_attributes(op, kernel):
    """tk.sync's id / warps (also those of ops that synchronise like it: atomic_add)."""
    yield from sync_problems(op, kernel_warps(kernel))


def _check_block_reduce(op, name, ins, outs, kernel):
    """block_sum / max / min(x, scratch): x an f32 rt, rv or scalar, the
    result of x's type, the group as tk.sync's, and the scratch an sv<f32>
    with a word for every lane of every warp of the group and scalar of x."""
    x, t = ins[0], op.operands[0].type
    scalar = str(t) == "f32"
    if not scalar and not (isinstance(x, (RT, RV)) and x.dtype == "f32"):
        yield f"{name}: x must be an f32 rt, rv or scalar, got {short(t)}"
        return
    if op.results[0].type != t:
        yield f"{name}: the result must have x's type {short(t)}, got {short(op.results[0].type)}"
    if "arrive" in op.attributes:
        yield f"{name}: a block reduction waits for its group's values: it takes no arrive attribute"
    problems = list(check_sync_attributes(op, kernel))
    yield from (f"{name}: {p.removeprefix('sync: ')}" for p in problems)
    warps = sync_group(op, kernel_warps(kernel))[1]
    if problems or warps is None:
        return
    need = warps * 32 * (1 if scalar else frag_len(x))
    s = ins[1]
    if not (isinstance(s, SV) and s.dtype == "f32" and s.length >= need):
        yield (f"{name}: scratch must be an sv<f32> of at least {need} elements (32 lanes x "
               f"{warps} warps x {need // (32 * warps)} values a lane), got {short(op.operands[1].type)}")


CHECKS = {
    "block_sum": _check_block_reduce,
    "block_max": _check_block_reduce,
    "block_min": _check_block_reduce,
    "stage": _check_stage,
    "subtile": _check_subtile,
    "pipeline_load": _check_pipeline_copy,
    "pipeline_store": _check_pipeline_copy,
    "sync": _check_sync,
}


# ---------------------------------------------------------------- attributes

def check_loop(op):
    opts = pipeline_options(op)
    if opts is None:
        return
    if "_malformed" in opts:
        yield f"scf.for: tk.pipeline must be a dictionary like {{stages = 4}}, got {op.attributes['tk.pipeline']}"
        return
    for k, v in opts.items():
        if k not in PIPELINE_KEYS:
            yield f"scf.for: tk.pipeline has an unknown entry {k!r} (known: {', '.join(PIPELINE_KEYS)})"
        elif v is None:
            yield f"scf.for: tk.pipeline {k} must be an integer"
    stages = opts.get("stages", 0)
    if stages is not None and not 0 <= stages <= MAX_STAGES:
        yield f"scf.for: tk.pipeline stages must be 0 (auto) or 1..{MAX_STAGES}, got {stages}"
    if opts.get("store_warp") not in (None, 0, 1):
        yield f"scf.for: tk.pipeline store_warp must be 0 or 1, got {opts['store_warp']}"
    if opts.get("store_slots") not in (None, 1, 2) or (opts.get("store_slots") and not opts.get("store_warp")):
        yield f"scf.for: tk.pipeline store_slots must be 1 or 2, with store_warp = 1, got {opts['store_slots']}"
    for k in ("producer_registers", "consumer_registers"):
        v = opts.get(k)
        if v is not None and not (24 <= v <= 256 and v % 8 == 0):
            yield f"scf.for: tk.pipeline {k} must be a multiple of 8 in 24..256, got {v}"


def check_kernel(fn):
    from mlir import ir
    if "tk.order" in fn.attributes:
        a = fn.attributes["tk.order"]
        if not isinstance(a, ir.StringAttr):
            yield f"tk.order must be a string, got {a}"
        else:
            try:
                parse_order(a.value)
            except ValueError as e:
                yield f"tk.order: {e}"
    if "tk.persistent" in fn.attributes and not (
            isinstance(fn.attributes["tk.persistent"], ir.UnitAttr) or is_zigzag(fn)):
        yield f"tk.persistent is a unit attribute or \"zigzag\", got {fn.attributes['tk.persistent']}"
    if "tk.ragged" in fn.attributes:
        yield from check_ragged(fn)
