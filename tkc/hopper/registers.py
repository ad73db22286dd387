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
    then takes one 32-bit register per two elements, not one per element)."""
    from mlir import ir
    v = view(t)
    if v is None:
        return [t]
    if isinstance(v, (RT, RV)):
        n = frag_len(v)
        if packed(v):
            return [ir.IntegerType.get_signless(32)] * (n // 2)
        return [scalar_type(v.dtype)] * n
    raise TypeError(v.text())


def packed(v) -> bool:
    """Whether a carried rt/rv travels as i32 words of two 16-bit scalars."""
    return v.dtype in ("bf16", "f16") and frag_len(v) % 2 == 0
