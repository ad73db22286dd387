"""Shared memory of a lowered kernel: the allocation plan and the array.

A kernel has one dynamic `extern .shared` array (`@__tkc_shared`, aligned to
1024); every `tk.alloc` of the entry block gets a byte offset in it
(`plan`), a ring (`tk.alloc {stages = N}`) N slots `stride` bytes apart.
Where an element lives inside an st (the swizzled layout), the sizes and
alignments and the budget are Hopper facts: tkc/hopper/shared.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import error
from ..dialect import walk
from ..dialect.attrs import alloc_stages
from ..dialect.types import ST, SV, Barrier, view
from ..hopper.shared import AFTER_RING, SHARED_LIMIT, footprint, layout, shared_limit, stride

SHARED_SYMBOL = "__tkc_shared"


# ---------------------------------------------------------------- the plan

@dataclass
class SharedPlan:
    """Where each tk.alloc lives in the dynamic shared array.

    `offsets` maps the tk.alloc's result ir.Value (hashable, compares equal
    to itself wherever it is reached from) to its byte offset (a ring's:
    slot 0's); `total` is the dynamic shared memory the kernel needs (the
    manifest's shared_bytes). `allocs` lists (view, offset, bytes, where,
    stages) in order, bytes counting every slot of a ring."""
    offsets: dict = field(default_factory=dict)
    total: int = 0
    allocs: list = field(default_factory=list)

    def offset(self, value) -> int:
        return self.offsets[value]


def plan(func_op) -> SharedPlan:
    """Lay out every tk.alloc of the kernel's entry block (hopper.shared.layout).

    A bump allocator in program order is the right tool: allocations live
    for the whole kernel, and program order keeps offsets stable for the
    reader of the IR. The one reuse: tiles declared st(after_loop=True)
    (tk.after_ring: used only after the pipelined loop, whose ring is dead
    by then; tk-pipeline-staging checks it) lie over the ring's slots. A
    ring of N slots takes N strides (the last slot padded too: one rule for
    every slot)."""
    op = getattr(func_op, "operation", func_op)
    result = SharedPlan()
    items, found = [], _allocs(op)
    for inner in found:
        t = view(inner.results[0].type)
        if not isinstance(t, (ST, SV, Barrier)):
            raise error(inner, f"tk.alloc must give an st, sv or barrier, found {inner.results[0].type}")
        n = stages(inner)
        role = "after" if AFTER_RING in inner.attributes else "ring" if n > 1 and isinstance(t, ST) else None
        items.append((t, n, role))
    offsets, end = layout(items)
    limit, first = shared_limit(op), None
    for inner, (t, n, _), offset in zip(found, items, offsets):
        size = footprint(t, n)
        result.allocs.append((t, offset, size, inner.location, n))
        result.offsets[inner.results[0]] = offset
        first = first if offset + size <= limit or first is not None else inner
    if first is not None:  # located at the first allocation past the limit; counts them all
        raise error(first, _overflow_message(result.allocs, end, limit))
    result.total = end
    return result


def stages(alloc) -> int:
    """The slots of a tk.alloc: its `stages` attribute, 1 without it."""
    n = alloc_stages(alloc)
    if n is None or n < 1:
        raise error(alloc, f"tk.alloc: stages must be a positive integer, found {alloc.attributes['stages']}")
    return n


def _allocs(op):
    """tk.alloc ops of the entry block; one elsewhere is a located error."""
    entry = op.regions[0].blocks[0]
    found = [o for o in entry.operations if o.operation.name == "tk.alloc"]
    for o in walk(op):
        if o.name == "tk.alloc" and o.parent is not None and o.parent != op:
            raise error(o, "tk.alloc must be in the kernel's entry block, not inside control flow")
    return [o.operation for o in found]


def _overflow_message(allocs, end, limit: int = SHARED_LIMIT) -> str:
    lines = [f"  {_what(t, n)} at offset {off}, {size} bytes ({_where(loc)})"
             for t, off, size, loc, n in allocs]
    what = "(227 KiB) a block may use on sm_90" if limit == SHARED_LIMIT else \
        "a block may use with tk.blocks_per_sm"
    return (f"shared memory overflow: the allocations need {end} bytes, more than the "
            f"{limit} bytes {what}:\n" + "\n".join(lines))


def _what(t, n: int) -> str:
    """An allocation as the overflow message names it: a ring says that it
    counts every slot (else 4 x 16 KiB would read as a 64 KiB tile)."""
    if n == 1:
        return t.text()
    return f"ring of {n} x {t.text()} ({n} slots of {stride(t)} bytes)"


def _where(loc) -> str:
    from ..diagnostics import where
    return where(loc) or "unknown location"


# ---------------------------------------------------------------- the array

def base(lw):
    """An !llvm.ptr<3> to the dynamic shared array, declared once per gpu.module.

    `lw` is the Lowering; only the current insertion point is used, so this
    works wherever core.py keeps the gpu.module."""
    from mlir import ir
    from mlir.dialects import llvm

    ip = ir.InsertionPoint.current
    gpu_module = _enclosing(ip.block.owner, "gpu.module")
    if gpu_module is None:
        raise RuntimeError("shared.base must be called inside a gpu.module")
    _declare(gpu_module)
    return llvm.mlir_addressof(ir.Type.parse("!llvm.ptr<3>"), SHARED_SYMBOL)


_DYN = -2147483648  # LLVM dialect GEP: "this index is an operand"


def static_pointer(lw, byte_offset: int):
    """&shared[byte_offset] (a static offset) as an !llvm.ptr<3>, built once
    per kernel at its entry (PTX then names `[__tkc_shared+offset]`)."""
    from mlir import ir
    from mlir.dialects import llvm

    def build():
        array = lw.once(("shared_base",), lambda: base(lw))
        return llvm.getelementptr(ir.Type.parse("!llvm.ptr<3>"), array, [],
                                  ir.DenseI32ArrayAttr.get([byte_offset]),
                                  ir.IntegerType.get_signless(8), 0)
    return lw.once(("shared_ptr", byte_offset), build)


def pointer(lw, sh, extra: int = 0):
    """&shared[sh's offset + extra] as an !llvm.ptr<3> (`sh` a core.Shared).

    Static offsets give the cached constant GEP of `static_pointer`; a ring
    slot or run-time subtile adds its dynamic part at the insertion point."""
    if sh.dynamic is None:
        return static_pointer(lw, sh.offset + extra)
    from mlir import ir
    from mlir.dialects import arith, llvm
    i32 = ir.IntegerType.get_signless(32)
    off = arith.index_cast(i32, sh.dynamic)
    if sh.offset + extra:
        off = arith.addi(off, arith.constant(i32, sh.offset + extra))
    array = lw.once(("shared_base",), lambda: base(lw))
    return llvm.getelementptr(ir.Type.parse("!llvm.ptr<3>"), array, [off], ir.DenseI32ArrayAttr.get([_DYN]),
                              ir.IntegerType.get_signless(8), 0)


def _enclosing(op, name):
    while op is not None:
        op = op.operation
        if op.name == name:
            return op
        op = op.parent
    return None


def _declare(gpu_module) -> None:
    from mlir import ir
    body = gpu_module.regions[0].blocks[0]
    for o in body.operations:
        if o.operation.name == "llvm.mlir.global" and \
                ir.StringAttr(o.operation.attributes["sym_name"]).value == SHARED_SYMBOL:
            return
    decl = ir.Operation.parse(
        f"llvm.mlir.global external @{SHARED_SYMBOL}() "
        "{addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>")
    ir.InsertionPoint.at_block_begin(body).insert(decl)
