"""tk-verify rules of the block-level ops and attributes (docs/tile-ir.md,
"Block level"): rings and their slots, subtile views, the compiler-synchronised
TMA ops, named barriers, and the `tk.pipeline` / `tk.order` attributes that
tk-pipeline-staging and tk-grid-ordering read.

tk-verify (verify.py) calls `CHECKS[name](op, name, ins, outs, kernel)` per tk
op, `check_loop(op)` per scf.for and `check_kernel(fn)` per kernel.
"""
from __future__ import annotations

from ..dialect.types import RT, ST
from ..dtypes import itemsize
from .verify_tma import _int_attr, tma_copy_problems

BARRIER_IDS = 16   # bar.sync ids 0..15
MAX_STAGES = 16    # ring slots (ThunderKittens' limit too)


def _short(v) -> str:
    return "a non-tk value" if v is None else v.text().removeprefix("!tk.").replace(" : i64", "")


def ring_stages(value) -> int | None:
    """N when `value` is a `tk.alloc {stages = N}` result, else None."""
    from mlir import ir
    owner = getattr(value, "owner", None)
    if not isinstance(owner, ir.Operation) and owner is not None:
        owner = getattr(owner, "operation", None)
    if owner is None or owner.name != "tk.alloc" or "stages" not in owner.attributes:
        return None
    return _int_attr(owner, "stages")


def check_alloc_stages(op):
    if "stages" in op.attributes:
        n = _int_attr(op, "stages")
        if n is None or not 1 <= n <= MAX_STAGES:
            yield f"alloc: stages must be an integer in 1..{MAX_STAGES}, got {op.attributes['stages']}"


def _check_stage(op, name, ins, outs, kernel):
    if ring_stages(op.operands[0]) is None:
        yield "stage: the ring must be a tk.alloc {stages = N} result"
    if outs[0] != ins[0]:
        yield f"stage: the slot has the ring's type {_short(ins[0])}, got {_short(outs[0])}"


def subtile_problems(x, out) -> list[str]:
    """Why `out` is not a subtile view of `x` (st or rt); [] when it is."""
    if isinstance(x, RT):
        if not isinstance(out, RT) or out.dtype != x.dtype or out.layout != x.layout:
            return [f"subtile of {_short(x)} must be an rt of its dtype and layout, got {_short(out)}"]
    elif isinstance(x, ST):
        if not isinstance(out, ST) or out.dtype != x.dtype:
            return [f"subtile of {_short(x)} must be an st of its dtype, got {_short(out)}"]
        if "auto" not in (x.swizzle, out.swizzle) and out.swizzle != x.swizzle:
            return [f"subtile: a view keeps the tile's {x.swizzle} layout, got {_short(out)}"]
    else:
        return [f"subtile: x must be an st or rt, got {_short(x)}"]
    if x.rows % out.rows or x.cols % out.cols:
        return [f"subtile: {_short(out)} does not divide {_short(x)}"]
    if isinstance(x, ST) and out.cols != x.cols:
        from ..lowering.shared import swizzle_bytes
        s = swizzle_bytes(x)
        panel = s // itemsize(x.dtype) if s else 0
        if not panel:
            return [f"subtile: a column part of the unswizzled {_short(x)} is not a tile "
                    "(its rows would not be contiguous): take whole rows"]
        if out.cols % panel:
            return [f"subtile: a column part of {_short(x)} must be whole {s}-byte swizzle "
                    f"panels ({panel} columns), got {out.cols} columns"]
    return []


def _check_subtile(op, name, ins, outs, kernel):
    yield from subtile_problems(ins[0], outs[0])
    if isinstance(ins[0], RT):
        for what, v in (("row", op.operands[1]), ("col", op.operands[2])):
            if constant(v) is None:
                yield (f"subtile: the {what} index of a register tile must be a constant "
                       "(registers cannot be indexed at run time)")


def constant(value):
    """The int of an `arith.constant` index value, else None."""
    owner = getattr(value, "owner", None)
    op = getattr(owner, "operation", owner)
    if op is None or getattr(op, "name", "") != "arith.constant":
        return None
    return _int_attr(op, "value")


def _check_pipeline_copy(op, name, ins, outs, kernel):
    """pipeline_load(st, gl, b, d, r, c) and pipeline_store(gl, st, b, d, r, c)."""
    load = name == "pipeline_load"
    s, g = (ins[0], ins[1]) if load else (ins[1], ins[0])
    if len(ins) - 2 != 4:
        yield f"{name}: takes 4 coordinates (b, d, r, c), got {len(ins) - 2}"
    yield from tma_copy_problems(name, s, g, op.operands[1 if load else 0], kernel)


def sync_group(op, kernel_warps: int | None) -> tuple[int, int | None]:
    """(id, warps) of a tk.sync; warps None means the whole block."""
    i = _int_attr(op, "id") if "id" in op.attributes else 0
    w = _int_attr(op, "warps") if "warps" in op.attributes else None
    return i, (w if w is not None else kernel_warps)


def checked_sync_group(op, kernel_warps: int) -> tuple[int, int]:
    """sync_group, or a located error when the id or warp count is out of
    range (the interpreter and the lowering may run without tk-verify)."""
    from ..diagnostics import error
    problems = list(_sync_problems(op, kernel_warps))
    if problems:
        raise error(op, f"tk.{problems[0]}")
    return sync_group(op, kernel_warps)


def _sync_problems(op, total: int | None):
    """What is wrong with a tk.sync's attributes (total: the kernel's warps)."""
    i, w = sync_group(op, total)
    if i is None or not 0 <= i < BARRIER_IDS:
        yield f"sync: id must be an integer in 0..{BARRIER_IDS - 1}, got {op.attributes['id']}"
    if "warps" in op.attributes and (w is None or w < 1 or (total is not None and w > total)):
        yield (f"sync: warps must be an integer in 1..{total} (the kernel's warps), "
               f"got {op.attributes['warps']}")
    if "arrive" in op.attributes and (i == 0 or "warps" not in op.attributes or w == 1):
        # bar.arrive on barrier 0 would complete a later block-wide bar.sync early; one warp's
        # sync is bar.warp.sync, which nothing can arrive on
        yield (f"sync {{arrive}}: needs a named barrier, an id in 1..{BARRIER_IDS - 1} and warps "
               ">= 2 (the warps that arrive and the warps that wait, together)")


def _check_sync(op, name, ins, outs, kernel):
    yield from check_sync_attributes(op, kernel)


def check_sync_attributes(op, kernel):
    """tk.sync's id / warps (also those of ops that synchronise like it: atomic_add)."""
    from .verify import kernel_warps
    yield from _sync_problems(op, kernel_warps(kernel))


CHECKS = {
    "stage": _check_stage,
    "subtile": _check_subtile,
    "pipeline_load": _check_pipeline_copy,
    "pipeline_store": _check_pipeline_copy,
    "sync": _check_sync,
}


# ---------------------------------------------------------------- attributes

def pipeline_options(loop) -> dict | None:
    """The `tk.pipeline` dictionary of an scf.for as {name: int}, None without it."""
    from mlir import ir
    if "tk.pipeline" not in loop.attributes:
        return None
    attr = loop.attributes["tk.pipeline"]
    if not isinstance(attr, ir.DictAttr):
        return {"_malformed": 1}
    out = {}
    for entry in attr:
        a = entry.attr
        out[entry.name] = a.value if isinstance(a, ir.IntegerAttr) else None
    return out


PIPELINE_KEYS = ("stages", "producer_registers", "consumer_registers", "store_warp", "store_slots")


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


def is_zigzag(fn) -> bool:
    """Whether the kernel's tk.persistent is "zigzag" (its work items dealt
    in rounds, forwards and backwards) rather than the unit attribute."""
    from mlir import ir
    a = fn.attributes["tk.persistent"] if "tk.persistent" in fn.attributes else None
    return isinstance(a, ir.StringAttr) and a.value == "zigzag"


def check_kernel(fn):
    from mlir import ir
    from .orders import parse_order
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
