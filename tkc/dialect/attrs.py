"""Typed readers of the attributes tk ops carry (docs/tile-ir.md), one per
attribute: the verifier, the passes, the lowering and the interpreter read an
attribute here, so that it is read, and a malformed one recognised, in one way.

A reader returns None where the value is missing or malformed; the caller
decides whether that is an error and says so in its own words (tk-verify
lists it, the lowering raises it located). Kernel-function attributes
(tk.warps, tk.arg_names, ...) have their readers in kernel.py.
MLIR is imported inside the readers: importing this module needs none.
"""
from __future__ import annotations

from ..diagnostics import error
from .types import GL, view

MAX_STAGES = 16    # ring slots of a tk.alloc {stages} (ThunderKittens' limit too)


# ---------------------------------------------------------------- integers

def int_attr(op, name: str):
    """The int of op's integer attribute `name`, None when absent or not an integer."""
    from mlir import ir
    a = op.attributes[name] if name in op.attributes else None
    return a.value if isinstance(a, ir.IntegerAttr) else None


def int_or_text(op, name: str):
    """The int of an integer attribute, its text otherwise (so that a message
    shows what was found), None when absent."""
    from mlir import ir
    if name not in op.attributes:
        return None
    a = op.attributes[name]
    return a.value if isinstance(a, ir.IntegerAttr) else str(a)


def required_int(op, name: str, least: int) -> int:
    """An integer attribute of op, >= least (a located error otherwise)."""
    n = int_attr(op, name)
    if n is None:
        raise error(op, f"{op.name} needs an integer '{name}' attribute")
    if n < least:
        raise error(op, f"{op.name}: {name} must be >= {least}, found {n}")
    return n


def constant(value):
    """The int of an `arith.constant` index value, else None."""
    owner = getattr(value, "owner", None)
    op = getattr(owner, "operation", owner)
    if op is None or getattr(op, "name", "") != "arith.constant":
        return None
    return int_attr(op, "value")


# ---------------------------------------------------------------- tk.alloc {stages}

def alloc_stages(alloc) -> int | None:
    """The slots of a tk.alloc: N of `{stages = N}`, 1 without it, None when
    the attribute is not an integer (its range is the caller's rule)."""
    if "stages" not in alloc.attributes:
        return 1
    return int_attr(alloc, "stages")


def ring_stages(value) -> int | None:
    """N when `value` is a `tk.alloc {stages = N}` result, else None."""
    from mlir import ir
    owner = getattr(value, "owner", None)
    if not isinstance(owner, ir.Operation) and owner is not None:
        owner = getattr(owner, "operation", None)
    if owner is None or owner.name != "tk.alloc" or "stages" not in owner.attributes:
        return None
    return alloc_stages(owner)


# ---------------------------------------------------------------- tk.sync {id, warps}

def sync_group(op, kernel_warps: int | None) -> tuple[int, int | None]:
    """(id, warps) of a tk.sync; warps None means the whole block."""
    i = int_attr(op, "id") if "id" in op.attributes else 0
    w = int_attr(op, "warps") if "warps" in op.attributes else None
    return i, (w if w is not None else kernel_warps)


# ---------------------------------------------------------------- tk.atomic_add {after}

def atomic_after(op) -> list[int] | None:
    """The argument numbers of the gls whose writes a tk.atomic_add comes
    after (`after = array<i64: ...>`; [] without it), None when malformed.
    Numbers, not operands: a variadic operand takes one type in IRDL."""
    from mlir import ir
    if "after" not in op.attributes:
        return []
    a = op.attributes["after"]
    return list(a) if isinstance(a, ir.DenseI64ArrayAttr) else None


def after_gls(op) -> list:
    """The kernel arguments (values) a tk.atomic_add's `after` names; a
    located error where the attribute is malformed or names no gl argument."""
    kernel = op.parent
    while kernel.name != "func.func":
        kernel = kernel.parent
    args = list(kernel.regions[0].blocks[0].arguments)
    nums = atomic_after(op)
    if nums is None or any(not (0 <= n < len(args) and isinstance(view(args[n].type), GL))
                           for n in nums):
        raise error(op, f"{op.name}: after must be an array<i64> of gl argument numbers, "
                        f"got {op.attributes['after']}")
    return [args[n] for n in nums]


# ---------------------------------------------------------------- scf.for {tk.pipeline}

PIPELINE_KEYS = ("stages", "producer_registers", "consumer_registers", "store_warp", "store_slots")


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


# ---------------------------------------------------------------- warpgroup mma {negate, k_order}

def negated(op) -> bool:
    """A warpgroup mma's optional `negate`: d = -(a @ b) + c."""
    from mlir import ir
    a = op.attributes["negate"] if "negate" in op.attributes else None
    return isinstance(a, ir.BoolAttr) and a.value


def k_order(op):
    """A warpgroup mma's optional `k_order` (hopper/fp8_lanes.py): None, its
    string, or the attribute's text when it is not a string (refused)."""
    from mlir import ir
    if "k_order" not in op.attributes:
        return None
    a = op.attributes["k_order"]
    return a.value if isinstance(a, ir.StringAttr) else str(a)
