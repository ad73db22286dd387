"""Shared memory: the kernel's allocation plan and the swizzled tile layout.

A kernel has one dynamic `extern .shared` array (`@__tkc_shared`, aligned to
1024); every `tk.alloc` of the entry block gets a byte offset in it
(`plan`). Inside an st the element (row, col) lives at the byte offset given
by `address` (docs/tile-ir.md, "Shared tile memory layout"): column panels
of S bytes per row, and 16-byte chunks XOR-permuted within each group of 8
128-byte lines, the pattern of TMA's and wgmma's swizzle modes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import error
from ..dtypes import itemsize
from ..dialect.types import ST, SV, Barrier, view
from ..dialect import walk

SHARED_LIMIT = 232448  # 227 KiB: the most dynamic shared memory one block of sm_90 may have
SHARED_SYMBOL = "__tkc_shared"
SWIZZLE_BYTES = {"none": 0, "32b": 32, "64b": 64, "128b": 128}


# ---------------------------------------------------------------- st layout

def swizzle_bytes(st: ST) -> int:
    """S of an st (0 = none). `auto` resolves as tk-layout-selection does:
    the widest of 128, 64, 32 that divides the row's bytes, so that a tile
    nobody selected a layout for still lowers consistently."""
    if st.swizzle != "auto":
        return SWIZZLE_BYTES[st.swizzle]
    width = st.cols * itemsize(st.dtype)
    return next((s for s in (128, 64, 32) if width % s == 0 and st.rows >= 8), 0)


BARRIER_BYTES = 8  # an mbarrier is one 8-byte-aligned 64-bit word


def alignment(t) -> int:
    """1024 for swizzled tiles (the XOR uses address bits 4-9), 8 for an
    mbarrier, else 128."""
    if isinstance(t, Barrier):
        return BARRIER_BYTES
    return 1024 if isinstance(t, ST) and swizzle_bytes(t) else 128


def nbytes(t) -> int:
    if isinstance(t, ST):
        return t.rows * t.cols * itemsize(t.dtype)
    if isinstance(t, SV):
        return t.length * itemsize(t.dtype)
    if isinstance(t, Barrier):
        return BARRIER_BYTES
    raise TypeError(f"not a shared type: {t}")


def swizzle(offset: int, s: int) -> int:
    """The swizzle of an S-byte mode applied to a byte offset in the tile."""
    if not s:
        return offset
    return offset ^ (((offset >> 7) & (s // 16 - 1)) << 4)


def address(st: ST, row, col):
    """Byte offset of element (row, col) inside `st`.

    With Python ints this is a pure function (the tests' reference); with
    `index` ir.Values (either or both) it emits arith at the current
    insertion point and returns an index Value.
    """
    if isinstance(row, int) and isinstance(col, int):
        return _address_int(st, row, col)
    return _address_ir(st, row, col)


def _address_int(st: ST, row: int, col: int) -> int:
    e, s = itemsize(st.dtype), swizzle_bytes(st)
    if not s:
        return (row * st.cols + col) * e
    p = s // e  # columns per panel
    linear = (col // p) * (st.rows * s) + row * s + (col % p) * e
    return swizzle(linear, s)


def _address_ir(st: ST, row, col):
    from mlir.dialects import arith
    from mlir import ir

    idx = ir.IndexType.get()

    def c(n):
        return arith.constant(idx, n)

    def v(x):
        return c(x) if isinstance(x, int) else x

    row, col = v(row), v(col)
    e, s = itemsize(st.dtype), swizzle_bytes(st)
    if not s:
        return arith.muli(arith.addi(arith.muli(row, c(st.cols)), col), c(e))
    p = s // e  # a power of two: shifts and masks
    panel = arith.shrui(col, c(p.bit_length() - 1))
    in_panel = arith.andi(col, c(p - 1))
    linear = arith.addi(arith.addi(arith.muli(panel, c(st.rows * s)), arith.muli(row, c(s))),
                        arith.muli(in_panel, c(e)))
    chunk = arith.andi(arith.shrui(linear, c(7)), c(s // 16 - 1))
    return arith.xori(linear, arith.shli(chunk, c(4)))


# ---------------------------------------------------------------- the plan

@dataclass
class SharedPlan:
    """Where each tk.alloc lives in the dynamic shared array.

    `offsets` maps the tk.alloc's result ir.Value (hashable, compares equal
    to itself wherever it is reached from) to its byte offset; `total` is
    the dynamic shared memory the kernel needs (the manifest's
    shared_bytes)."""
    offsets: dict = field(default_factory=dict)
    total: int = 0
    allocs: list = field(default_factory=list)  # (view, offset, bytes, where) in order

    def offset(self, value) -> int:
        return self.offsets[value]


def plan(func_op) -> SharedPlan:
    """Lay out every tk.alloc of the kernel's entry block, in program order.

    A bump allocator is the right tool: allocations live for the whole
    kernel (no reuse to find), and program order keeps offsets stable for
    the reader of the IR."""
    op = getattr(func_op, "operation", func_op)
    result = SharedPlan()
    end = 0
    for inner in _allocs(op):
        t = view(inner.results[0].type)
        if not isinstance(t, (ST, SV, Barrier)):
            raise error(inner, f"tk.alloc must give an st, sv or barrier, found {inner.results[0].type}")
        offset = _round_up(end, alignment(t))
        end = offset + nbytes(t)
        result.allocs.append((t, offset, nbytes(t), inner.location))
        result.offsets[inner.results[0]] = offset
        if end > SHARED_LIMIT:
            raise error(inner, _overflow_message(result.allocs, end))
    result.total = end
    return result


def _allocs(op):
    """tk.alloc ops of the entry block; one elsewhere is a located error."""
    entry = op.regions[0].blocks[0]
    found = [o for o in entry.operations if o.operation.name == "tk.alloc"]
    for o in walk(op):
        if o.name == "tk.alloc" and o.parent is not None and o.parent != op:
            raise error(o, "tk.alloc must be in the kernel's entry block, not inside control flow")
    return [o.operation for o in found]


def _overflow_message(allocs, end) -> str:
    lines = [f"  {a[0].text()} at offset {a[1]}, {a[2]} bytes ({_where(a[3])})" for a in allocs]
    return (f"shared memory overflow: the allocations need {end} bytes, more than the "
            f"{SHARED_LIMIT} bytes (227 KiB) a block may use on sm_90:\n" + "\n".join(lines))


def _where(loc) -> str:
    from ..diagnostics import where
    return where(loc) or "unknown location"


def _round_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


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
