"""How a register tile or vector is held by a thread: its scalars (as many
as fragments.py deals each lane) and the words scf carries it as.

The lowering builds its fragments from these; tk-pipeline-staging and the
finish overlap count the registers a loop carries with them. MLIR is
imported inside the functions that build types.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..dialect.types import RT, RV, view
from ..dtypes import FP8_DTYPES
from . import fragments

if TYPE_CHECKING:
    from mlir import ir


def frag_len(v) -> int:
    """The scalars one thread holds of an rt or rv view."""
    if isinstance(v, RT):
        return fragments.tile_elems(v.rows, v.cols)
    return fragments.vec_elems(v.length, v.kind)


def scalar_type(dtype: str) -> ir.Type:
    """The MLIR scalar type of a tk element type name. An 8-bit float is
    held as its bits, an i8: LLVM's NVPTX backend has no 8-bit float type,
    and the conversions are PTX's cvt on pairs (lowering/fp8.py)."""
    from mlir import ir
    if dtype in FP8_DTYPES:
        return ir.IntegerType.get_signless(8)
    return {"bf16": ir.BF16Type.get, "f16": ir.F16Type.get, "f32": ir.F32Type.get,
            "i32": lambda: ir.IntegerType.get_signless(32),
            "i64": lambda: ir.IntegerType.get_signless(64)}[dtype]()


def flat_types(t: ir.Type) -> list[ir.Type]:
    """The types a value of type t is carried as through scf (1:N for rt/rv):
    its scalars, 16-bit ones packed in pairs as i32 (a carried bf16 tile
    then takes one 32-bit register per two elements, not one per element),
    8-bit row-layout ones four to an i32 in `word_order` (a carried FP8 P is
    then the 16 registers wgmma reads, not 64)."""
    from mlir import ir
    v = view(t)
    if v is None:
        return [t]
    if isinstance(v, (RT, RV)):
        n = frag_len(v)
        if packed(v):
            return [ir.IntegerType.get_signless(32)] * (n // per_word(v))
        return [scalar_type(v.dtype)] * n
    raise TypeError(v.text())


def per_word(v) -> int:
    """Scalars of a packed rt/rv in one carried i32 word."""
    return 4 if v.dtype in FP8_DTYPES else 2


def packed(v) -> bool:
    """Whether a carried rt/rv travels as i32 words of 16-bit or 8-bit scalars."""
    if v.dtype in FP8_DTYPES:   # the row layout's (an mma operand's): words wgmma reads
        return isinstance(v, RT) and v.layout == "row" and frag_len(v) % 4 == 0
    return v.dtype in ("bf16", "f16") and frag_len(v) % 2 == 0


def word_order(v) -> list[int]:
    """The fragment positions of a packed rt/rv's scalars in word order
    (words of per_word(v) consecutive entries). 16-bit: as they are. 8-bit:
    per 16x16 base tile e0, e1, e4, e5 (row g) then e2, e3, e6, e7 (row g+8),
    the bytes of wgmma's 8-bit A registers (fp8_lanes.register_bytes), so a
    carried P feeds warpgroup mma as it is; a half tile's four as they are."""
    n = frag_len(v)
    if v.dtype not in FP8_DTYPES or (isinstance(v, RT) and v.rows == fragments.HALF):
        return list(range(n))
    return [b + e for b in range(0, n, 8) for e in (0, 1, 4, 5, 2, 3, 6, 7)]
