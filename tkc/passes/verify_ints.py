"""tk-verify rules of integers (docs/tile-ir.md, "Integer tiles"): what an
i32 register tile or vector may do (the exact integer ops: initialisers,
add, sub, mul, max, min, abs, neg, relu, conversions, comparisons, where,
reductions, picks and moves; no float math, division or mma), the scalar
type beside it (i32, where a float tile takes an f32), and how an integer gl
is used: an i32 gl by i32 tiles and one element at a time, an i64 gl one
element at a time. verify.py asks these of every op.
"""
from __future__ import annotations

from ..dialect.types import GL, RT, RV
from .verify_messages import describe as _desc

# ops an i32 tile may take part in (beyond memory ops, checked with the gl)
INT_OPS = {"zero", "ones", "neg_infty", "pos_infty", "fill", "iota", "copy", "abs", "neg", "relu",
           "add", "sub", "mul", "max", "min", "where", "row_max", "row_sum", "col_max", "col_sum",
           "vec_sum", "vec_max", "vec_min", "add_row", "sub_row", "mul_row", "add_col", "sub_col",
           "mul_col", "row_pick", "col_pick", "roll", "swap_layout", "transpose", "subtile",
           "load", "store"}

# ops whose tiles and vectors are all i32 or all floats
_SAME_KIND = {"row_max", "row_sum", "col_max", "col_sum", "add_row", "sub_row", "mul_row", "add_col",
              "sub_col", "mul_col", "div_row", "div_col"}

# ops with a scalar operand whose type follows the result's element type
_SCALAR_OPERAND = {"fill": 0, "iota": 0}


def scalar_of(v) -> str:
    """The scalar type that goes with tile or vector view v: i32 beside an
    i32 tile, f32 beside a float one."""
    return "i32" if v is not None and getattr(v, "dtype", None) == "i32" else "f32"


def _is_int_reg(v) -> bool:
    return isinstance(v, (RT, RV)) and v.dtype == "i32"


def int_problems(op, name: str, ins, outs) -> list[str]:
    """An i32 tile in an op that computes on floats; a scalar of the wrong
    type beside one; a whole-vector reduction of the wrong result type."""
    regs = [v for v in (*ins, *outs) if isinstance(v, (RT, RV))]
    if name == "copy":
        return []       # converts between i32 and the float types
    if any(_is_int_reg(v) for v in regs) and name not in INT_OPS:
        bad = next(v for v in regs if _is_int_reg(v))
        return [f"{name}: computes on float tiles, got {_desc(bad)} (an i32 tile converts with copy)"]
    if name in _SAME_KIND and len({_is_int_reg(v) for v in regs}) > 1:
        return [f"{name}: an i32 tile goes with i32 vectors (and a float one with float ones), got "
                f"{', '.join(_desc(v) for v in regs)}"]
    if name in _SCALAR_OPERAND and len(op.operands) > _SCALAR_OPERAND[name] and outs[0] is not None:
        want, got = scalar_of(outs[0]), str(op.operands[_SCALAR_OPERAND[name]].type)
        if got != want:
            return [f"{name}: the {'value' if name == 'fill' else 'start'} of {_desc(outs[0])} "
                    f"must be an {want}, got {got}"]
    if name.startswith("vec_") and isinstance(ins[0], RV):
        want, got = scalar_of(ins[0]), str(op.results[0].type)
        if got != want:
            return [f"{name}: the result of {_desc(ins[0])} is an {want}, got {got}"]
    return []


def int_gl_problem(op, ins) -> str | None:
    """How an integer gl may be used: an i32 gl is sized, sliced, counted in
    (atomic_add), and read and written by i32 tiles and vectors and one
    element at a time; an i64 gl is sized, sliced and read and written one
    element at a time. None when op does that (or has no integer gl)."""
    kinds = {v.dtype for v in ins if isinstance(v, GL) and v.dtype in ("i32", "i64")}
    if op.name == "tk.ragged_item":   # the groups' counts (tk.ragged)
        ok = isinstance(ins[0], GL) and ins[0].dtype == "i32"
        return None if ok else f"the groups' counts are an i32 gl, got {op.operands[0].type}"
    if not kinds or op.name in ("tk.dim", "tk.gl_slice", "tk.peer"):
        return None
    if "i64" in kinds:
        if op.name in ("tk.load", "tk.store") and _element_type(op) == "i64":
            return None
        return ("an i64 gl holds int64 indices: it is read and written one element at a time "
                "(load(tkc.i64, g, at=..., fill=...), store(g, index, at=..., clip=True)), "
                "sliced or sized, nothing else")
    if op.name in ("tk.atomic_add", "tk.peer", "tk.signal", "tk.wait_signal"):
        return None
    if op.name in ("tk.load", "tk.store"):
        moved = _element_type(op)
        if moved == "i32" or (isinstance(moved, (RT, RV)) and moved.dtype == "i32"):
            return None
    return ("an i32 gl holds integers: it is read and written by i32 tiles and vectors and one "
            "element at a time (load(tkc.i32, g, at=..., fill=...)), counted in (atomic_add), "
            "signalled and waited on (signal, wait_signal), sliced or sized, nothing else")


def _element_type(op):
    """What a tk.load or tk.store moves: a scalar type's text, or a tile view."""
    from ..dialect.types import safe_view
    value = op.results[0] if op.name == "tk.load" else op.operands[1]
    v = safe_view(value)
    return v if v is not None else str(value.type)
