"""Shared memory: the kernel's allocation plan and the swizzled tile layout.

A kernel has one dynamic `extern .shared` array (`@__tkc_shared`, aligned to
1024); every `tk.alloc` of the entry block gets a byte offset in it
(`plan`), a ring (`tk.alloc {stages = N}`) N slots `stride` bytes apart.
Inside an st the element (row, col) lives at the byte offset given by
`address` (docs/tile-ir.md, "Shared tile memory layout"): column panels of
S bytes per row, and 16-byte chunks XOR-permuted within each group of 8
128-byte lines, the pattern of TMA's and wgmma's swizzle modes. A subtile
lives in its parent's panels: `address` takes the panel layout's rows
(`pitch`) apart from the tile's own.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import error
from ..dtypes import itemsize
from ..dialect.types import ST, SV, Barrier, view
from ..dialect import walk

SHARED_LIMIT = 232448  # 227 KiB: the most dynamic shared memory one block of sm_90 may have
SHARED_PER_SM = 233472  # 228 KiB an SM, 1 KiB of it reserved per resident block


def shared_limit(func_op) -> int:
    """The shared memory one block may have: SHARED_LIMIT, or with
    `tk.blocks_per_sm = n` an n-th of the SM's (less the 1 KiB each block's
    reservation), so that n blocks fit side by side."""
    n = blocks_per_sm(func_op)
    return SHARED_LIMIT if n == 1 else (SHARED_PER_SM - 1024 * n) // n // 1024 * 1024


def blocks_per_sm(func_op) -> int:
    from mlir import ir
    op = getattr(func_op, "operation", func_op)
    if "tk.blocks_per_sm" not in op.attributes:
        return 1
    a = op.attributes["tk.blocks_per_sm"]
    n = ir.IntegerAttr(a).value if isinstance(a, ir.IntegerAttr) else 0
    if not 1 <= n <= 32:
        raise error(op, f"tk.blocks_per_sm must be an integer in 1..32, found {a}")
    return n
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


def stride(t) -> int:
    """Bytes between the slots of a ring of `t`: its size rounded up to its
    alignment, so that every slot is as aligned as a lone allocation."""
    return _round_up(nbytes(t), alignment(t))


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


def address(st: ST, row, col, pitch: int | None = None):
    """Byte offset of element (row, col) inside `st`.

    `pitch` is the rows of the panel layout the tile lives in (default: its
    own rows); a row subtile of a multi-panel st passes its parent's, whose
    panels are pitch*S bytes apart. With Python ints this is a pure function
    (the tests' reference); with `index` ir.Values (either or both) it emits
    arith at the current insertion point and returns an index Value.
    """
    pitch = st.rows if pitch is None else pitch
    if isinstance(row, int) and isinstance(col, int):
        return _address_int(st, row, col, pitch)
    return _address_ir(st, row, col, pitch)


def _address_int(st: ST, row: int, col: int, pitch: int) -> int:
    e, s = itemsize(st.dtype), swizzle_bytes(st)
    if not s:
        return (row * st.cols + col) * e
    p = s // e  # columns per panel
    linear = (col // p) * (pitch * s) + row * s + (col % p) * e
    return swizzle(linear, s)


def _address_ir(st: ST, row, col, pitch: int):
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
    linear = arith.addi(arith.addi(arith.muli(panel, c(pitch * s)), arith.muli(row, c(s))),
                        arith.muli(in_panel, c(e)))
    chunk = arith.andi(arith.shrui(linear, c(7)), c(s // 16 - 1))
    return arith.xori(linear, arith.shli(chunk, c(4)))


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
    """Lay out every tk.alloc of the kernel's entry block, in program order.

    A bump allocator is the right tool: allocations live for the whole
    kernel (no reuse to find), and program order keeps offsets stable for
    the reader of the IR. A ring of N slots takes N strides (the last slot
    padded too: one rule for every slot)."""
    op = getattr(func_op, "operation", func_op)
    result = SharedPlan()
    end, first, limit = 0, None, shared_limit(op)
    for inner in _allocs(op):
        t = view(inner.results[0].type)
        if not isinstance(t, (ST, SV, Barrier)):
            raise error(inner, f"tk.alloc must give an st, sv or barrier, found {inner.results[0].type}")
        n = stages(inner)
        size = nbytes(t) if n == 1 else n * stride(t)
        offset = _round_up(end, alignment(t))
        end = offset + size
        result.allocs.append((t, offset, size, inner.location, n))
        result.offsets[inner.results[0]] = offset
        first = first if end <= limit or first is not None else inner
    if first is not None:  # located at the first allocation past the limit; counts them all
        raise error(first, _overflow_message(result.allocs, end, limit))
    result.total = end
    return result


def stages(alloc) -> int:
    """The slots of a tk.alloc: its `stages` attribute, 1 without it."""
    from mlir import ir
    if "stages" not in alloc.attributes:
        return 1
    attr = alloc.attributes["stages"]
    n = ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else 0
    if n < 1:
        raise error(alloc, f"tk.alloc: stages must be a positive integer, found {attr}")
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
