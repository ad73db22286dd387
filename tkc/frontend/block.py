"""Block reductions: one f32 value per warp in, their elementwise sum, max or
min over the block's warps out, the same in every warp (docs/dsl.md, "Block
reductions").

block_sum / block_max / block_min take an f32 register tile, vector or
scalar; block_row_* and block_col_* are a warp's row or column reduction
followed by the block's, for a tile whose rows (columns) are spread over the
warps. The compiler owns the shared scratch the warps' values pass through
(one sv a call, allocated at the kernel's top, so calls inside loops and
ifs are fine) and the barriers (tk.block_sum in docs/tile-ir.md).
"""
from __future__ import annotations

from ..dialect import ops as tk
from ..dialect.types import RV, SV
from ..hopper.registers import frag_len
from .axes import col_max, col_sum, row_max, row_sum
from .operands import _is_scalar, _name, _reg, _result, _scalar_op, _split
from .tiles import Reg, Shared
from .trace import current, emitting, fail
from .values import as_f32

LANES = 32


def _scratch(values: int) -> Shared:
    """An sv for `values` f32 scalars a lane of each of the kernel's warps,
    allocated at the top of the kernel (the call may sit in a loop or if:
    shared memory is allocated once, up front)."""
    from mlir import ir
    st = current()
    view = SV("f32", st.warps * LANES * values)
    first = next((o for o in st.entry.operations if o.operation.name != "tk.alloc"), None)
    with emitting(), ir.InsertionPoint(first) if first is not None else st.ips[0]:
        return Shared(view, tk.alloc(view.mlir()))


def _block(name):
    def op(*args):
        if len(args) == 1 and _is_scalar(args[0]):
            x = as_f32(args[0], f"{name}'s operand")
            scratch = _scratch(1)
            return _scalar_op(lambda: tk.block_reduce(name, x.ir(), scratch.value()))
        dst, (x,) = _split(name, args, 1)
        _reg(x, name, "operand")
        if x.dtype != "f32":  # the warps' values meet in f32: a bf16 sum would round at every step
            raise fail(f"{name} reduces f32 tiles and vectors, got {_name(x)}: convert it with "
                       f"x.to(tkc.f32)")
        scratch = _scratch(frag_len(x.view))
        return _result(name, dst, x.view, lambda: tk.block_reduce(name, x.value(), scratch.value()))
    op.__name__ = name
    what = name.removeprefix("block_")
    op.__doc__ = (f"The elementwise {what} over the block's warps of each warp's f32 x (an rt, "
                  f"rv or f32 value), the same in every warp: {name}(x) or {name}(dst, x). Every "
                  f"warp must call it (it synchronises the block as tkc.sync() does)."
                  + (" Sums add in warp order: ((x0 + x1) + x2) + ..." if what == "sum" else ""))
    return op


block_sum, block_max, block_min = (_block(n) for n in tk.BLOCK_REDUCE)


def _along(name, reduce, block):
    by_row = name.startswith("block_row")

    def op(*args) -> Reg:
        dst, (x,) = _split(name, args, 1)
        _reg(x, name, "source", tile=True)
        layouts = ("row", "wide") if by_row else ("row",)
        if x.layout not in layouts:
            raise fail(f"{name}: the source tile must be in {' or '.join(layouts)} layout, got {_name(x)}")
        if x.dtype != "f32":
            raise fail(f"{name} reduces f32 tiles, got {_name(x)}: convert it with x.to(tkc.f32)")
        want = RV("f32", x.rows if by_row else x.cols, "col" if by_row else "row")
        if dst is not None and dst.view != want:
            raise fail(f"{name}: destination is {_name(dst)} but the result is {Reg(want).describe()}")
        part = reduce(x)
        return block(part) if dst is None else block(dst, part)
    op.__name__ = name
    op.__doc__ = (f"{name}(x) = {block.__name__}({reduce.__name__}(x)): the {reduce.__name__} of "
                  f"the block tile whose {'columns' if by_row else 'rows'} the warps' tiles x "
                  f"split, in every warp; {name}(dst, x) in place.")
    return op


block_row_sum = _along("block_row_sum", row_sum, block_sum)
block_row_max = _along("block_row_max", row_max, block_max)
block_col_sum = _along("block_col_sum", col_sum, block_sum)
block_col_max = _along("block_col_max", col_max, block_max)

