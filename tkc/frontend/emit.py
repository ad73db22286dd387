"""MLIR building helpers for the frontend (arith scalars, scf regions).

Only imported while tracing (this module needs MLIR); callers are inside
`trace.emitting()`, so location and insertion point are already set.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

_INT_OPS = {"add": arith.addi, "sub": arith.subi, "mul": arith.muli,
            # index math in kernels is non-negative, where floor and
            # truncating division agree; floordivsi keeps Python's `//`.
            "floordiv": arith.floordivsi, "mod": arith.remsi,
            "min": arith.minsi, "max": arith.maxsi}
# maxnumf/minnumf as tiles' max/min: a NaN operand gives the other (PTX max.f32)
_FLOAT_OPS = {"add": arith.addf, "sub": arith.subf, "mul": arith.mulf, "div": arith.divf,
              "max": arith.maxnumf, "min": arith.minnumf}
_IPRED = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_FPRED = {"eq": "OEQ", "ne": "UNE", "lt": "OLT", "le": "OLE", "gt": "OGT", "ge": "OGE"}  # this MLIR spells them upper case


def mlir_type(name: str):
    if name == "index":
        return ir.IndexType.get()
    if name == "f32":
        return ir.F32Type.get()
    if name in ("i1", "i32", "i64"):
        return ir.IntegerType.get_signless(int(name[1:]))
    raise ValueError(name)


def constant(type_name: str, value):
    t = mlir_type(type_name)
    if type_name == "f32":
        return arith.ConstantOp(t, ir.FloatAttr.get(t, float(value))).result
    return arith.ConstantOp(t, ir.IntegerAttr.get(t, int(value))).result


def binary(name: str, a, b):
    table = _FLOAT_OPS if isinstance(a.type, ir.F32Type) else _INT_OPS
    return table[name](a, b)


def compare(type_name: str, pred: str, a, b):
    if type_name == "f32":
        return arith.cmpf(getattr(arith.CmpFPredicate, _FPRED[pred]), a, b)
    return arith.cmpi(getattr(arith.CmpIPredicate, _IPRED[pred]), a, b)


def logic(name: str, a, b):
    if not isinstance(b, ir.Value):
        b = b.ir()
    return {"and": arith.andi, "or": arith.ori, "xor": arith.xori}[name](a, b)


def select(cond, a, b):
    return arith.select(cond, a, b)


def index_cast(v):
    return arith.index_cast(ir.IndexType.get(), v)


def index_to_i32(v):
    """index -> i32, its low 32 bits (an i32 tile's scalar operand)."""
    return arith.index_cast(ir.IntegerType.get_signless(32), v)


def index_to_int(v, dtype: str):
    """index -> i32 (its low 32 bits) or i64 (exact): an element of an integer gl."""
    return arith.index_cast(mlir_type(dtype), v)


def index_to_f32(v):
    """index -> i64 -> f32 (signed; exact below 2^24)."""
    return arith.sitofp(ir.F32Type.get(), arith.index_cast(ir.IntegerType.get_signless(64), v))


def f32_to_index(v):
    """f32 -> i64 (toward zero) -> index."""
    return arith.index_cast(ir.IndexType.get(), arith.fptosi(ir.IntegerType.get_signless(64), v))


def move_ops(src_block, dst_block) -> None:
    """Move every op of src_block to the end of dst_block, in order."""
    for op in list(src_block.operations):
        dst_block.append(op)


def for_op(lb, ub, step, inits):
    return scf.ForOp(lb, ub, step, list(inits))


def if_op(cond, result_types, has_else: bool):
    return scf.IfOp(cond, list(result_types), has_else=has_else)


def yield_(values) -> None:
    scf.YieldOp(list(values))
