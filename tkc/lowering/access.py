"""The scalar plumbing of memory accesses: index arithmetic folded at trace
time where both sides are Python ints, global and shared pointers, accesses
of at most 16 bytes (vector pieces, guarded and filled loads), and the
packing and conversion of 16-bit values. global_memory.py, shared_memory.py
and the other rules build their accesses from these.
"""
from __future__ import annotations

import struct

from mlir import ir
from mlir.dialects import arith, llvm

from ..dtypes import itemsize
from ..dialect.types import RT
from ..hopper import fragments
from . import shared
from ..hopper.registers import scalar_type
from .core import Global, Shared


# ---------------------------------------------------------------- index arithmetic (folds ints)

_DYN = -2147483648  # LLVM dialect GEP: "this index is an operand"


def _idx(n: int):
    return arith.constant(ir.IndexType.get(), int(n))


def _v(x):
    return x if isinstance(x, ir.Value) else _idx(x)


def _add(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(b, int) and b == 0:
        return a
    if isinstance(a, int) and a == 0:
        return b
    return arith.addi(_v(a), _v(b))


def _mul(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if (isinstance(a, int) and a == 0) or (isinstance(b, int) and b == 0):
        return 0
    if isinstance(b, int) and b == 1:
        return a
    if isinstance(a, int) and a == 1:
        return b
    return arith.muli(_v(a), _v(b))


# ---------------------------------------------------------------- pointers and pieces

def _tid(lw):
    return lw.once(("tid_index",), lambda: arith.index_castui(ir.IndexType.get(), lw.tid_i32()))


def _gl_ptr(gl: Global, elems):
    """&gl[elems] (an element offset, index Value or int)."""
    off = arith.index_cast(ir.IntegerType.get_signless(64), _v(elems))
    return llvm.getelementptr(ir.Type.parse("!llvm.ptr<1>"), gl.ptr, [off], ir.DenseI32ArrayAttr.get([_DYN]),
                              scalar_type(gl.view.dtype), 0)


def _sh_ptr(lw, sh: Shared, byte_off, static: bool = True):
    """&shared[sh.offset + sh.dynamic + byte_off] as an !llvm.ptr<3>
    (static=False: without sh.offset)."""
    base = lw.once(("shared_base",), lambda: shared.base(lw))
    off = _add(byte_off, sh.offset if static else 0)
    if sh.dynamic is not None:  # a ring slot or a subtile at a run-time index
        off = _add(off, sh.dynamic)
    off = arith.index_cast(ir.IntegerType.get_signless(32), _v(off))
    return llvm.getelementptr(ir.Type.parse("!llvm.ptr<3>"), base, [off], ir.DenseI32ArrayAttr.get([_DYN]),
                              ir.IntegerType.get_signless(8), 0)


def _pieces(ptr, dtype: str, n: int):
    """(pointer, first element, count) of the accesses moving n consecutive
    elements at ptr: as few as possible, each at most 16 bytes and aligned to
    its size (the caller guarantees ptr is aligned to the first one's)."""
    m = fragments.access_elems(n, dtype)
    for k in range(0, n, m):
        p = ptr if k == 0 else llvm.getelementptr(ptr.type, ptr, [], ir.DenseI32ArrayAttr.get([k]),
                                                   scalar_type(dtype), 0)
        yield p, k, min(m, n - k)


def _load_piece(ptr, dtype: str, m: int, keep=None, fill: float | None = None) -> list:
    """m consecutive elements at ptr as one access (aligned to its size); where
    the i1 `keep` is false they read `fill` instead (one select per register)."""
    el = scalar_type(dtype)
    ints = isinstance(el, ir.IntegerType)
    if m == 1:
        v = llvm.load(el, ptr, alignment=itemsize(dtype))
        return [v if keep is None else arith.select(keep, v, arith.constant(el, int(fill) if ints else fill))]
    t = ir.VectorType.get([m], el)
    vec = llvm.load(t, ptr, alignment=m * itemsize(dtype))
    if keep is not None:
        splat = ir.IntegerAttr.get(el, int(fill)) if ints else ir.FloatAttr.get(el, fill)
        vec = arith.select(keep, vec, arith.constant(t, ir.DenseElementsAttr.get_splat(t, splat)))
    return [llvm.extractelement(vec, _i32(k)) for k in range(m)]


def _fill_bits(fill: float, dtype: str, rounded: bool) -> int | None:
    """fill's bit pattern in dtype (rounded to nearest even), or None where
    it is not exact and not `rounded` (a converting load must give the fill
    in the result's dtype: then it is selected in after the conversion)."""
    if dtype == "i32":   # an integer fill (tk-verify: the result is i32 too)
        return int(fill) & 0xFFFFFFFF
    f32 = struct.unpack("<I", struct.pack("<f", fill))[0]
    if dtype == "f32":
        return f32
    if dtype == "bf16":
        out = (f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16 if fill == fill else 0x7FC0
        return out if rounded or out << 16 == f32 else None
    try:
        out = struct.unpack("<H", struct.pack("<e", fill))[0]
    except OverflowError:
        return None
    return out if rounded or struct.unpack("<e", struct.pack("<H", out))[0] == fill else None


def _load_guarded(ptr, dtype: str, m: int, ok, bits: int) -> list:
    """m consecutive elements at ptr (a multiple of 4 bytes, aligned to the
    access) read only where the i1 `ok` holds, else the fill `bits`: the
    registers are preset and the load predicated (`@p ld.global`), as Triton
    does for masked loads. Unlike a load followed by a select, this leaves
    ptxas free to issue every load of a kernel before the first use (with a
    select right behind each load it reuses one register quad and waits on
    each load in turn: docs/tile-ir.md, on ragged accesses). No address is
    clamped: a load that is off is not made."""
    words, el = m * itemsize(dtype) // 4, scalar_type(dtype)
    half, ints = itemsize(dtype) == 2, dtype == "i32"
    word_t = ir.VectorType.get([2], el) if half else el
    fill = (bits | bits << 16) if half else bits
    presets = "".join(f"mov.b32 ${w}, 0x{fill:08x}; " if half or ints else f"mov.b32 ${w}, 0f{fill:08X}; "
                      for w in range(words))
    dst = ", ".join(f"${w}" for w in range(words))
    shape = {1: "", 2: ".v2", 4: ".v4"}[words]
    text = (f"{{ {presets}"
            f"@${words + 1} ld.global{shape}.b32 {'{' + dst + '}' if words > 1 else dst}, [${words}]; }}")
    res_t = word_t if words == 1 else llvm.StructType.get_literal([word_t] * words)
    res = llvm.inline_asm(res_t, [ptr, ok], text, ",".join(["=" + ("r" if half or ints else "f")] * words) + ",l,b",
                          has_side_effects=True)
    regs = [res] if words == 1 else [llvm.extractvalue(word_t, res, ir.DenseI64ArrayAttr.get([w]))
                                     for w in range(words)]
    if not half:
        return regs
    return [llvm.extractelement(r, _i32(h)) for r in regs for h in range(2)]


def _store_piece(ptr, vals: list, dtype: str) -> None:
    v = vals[0] if len(vals) == 1 else _pack(vals, dtype)
    llvm.store(v, ptr, alignment=len(vals) * itemsize(dtype))


def _load_n(ptr, dtype: str, n: int) -> list:
    """n consecutive elements at ptr, in accesses of up to 16 bytes."""
    return [v for p, _, m in _pieces(ptr, dtype, n) for v in _load_piece(p, dtype, m)]


def _store_n(ptr, vals: list, dtype: str) -> None:
    for p, k, m in _pieces(ptr, dtype, len(vals)):
        _store_piece(p, vals[k:k + m], dtype)


def _pack(vals: list, dtype: str):
    vec = llvm.mlir_undef(ir.VectorType.get([len(vals)], scalar_type(dtype)))
    for k, v in enumerate(vals):
        vec = llvm.insertelement(vec, v, _i32(k))
    return vec


def _convert(v, src: str, dst: str):
    """Element type conversion; narrowing rounds to nearest even (fptrunc)."""
    if src == dst:
        return v
    if src != "f32":
        v = arith.extf(ir.F32Type.get(), v)
    return v if dst == "f32" else arith.truncf(scalar_type(dst), v)


def _vec2(dtype: str):
    return ir.VectorType.get([2], scalar_type(dtype))


def _trans(rt: RT) -> str:
    """ldmatrix / stmatrix's qualifier for a tile of rt's layout."""
    return ".trans" if rt.layout == "col" else ""


def _i32(n: int):
    i32 = ir.IntegerType.get_signless(32)
    return llvm.ConstantOp(i32, ir.IntegerAttr.get(i32, n)).result
