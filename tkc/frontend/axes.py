"""The tile ops along a tile's rows and columns: row/col reductions and picks,
roll, row/col broadcasts, the mma (a contraction over K), and the layout
changes swap_layout and transpose.

Unlike the elementwise ops (elementwise.py), their result's shape, kind or
layout follows from the operands' axes, which is what they check.
"""
from __future__ import annotations

from ..dialect import ops as tk
from ..dialect.types import RV
from ..dtypes import is_fp8
from .operands import _float_only, _name, _reg, _result, _split
from .tiles import Reg
from .trace import fail
from .values import as_index


# ------------------------------------------------------------ reductions

def _no_8bit(name: str, x: Reg) -> None:
    """An 8-bit float tile makes no vector (rv has no 8-bit type): refused
    here, at the caller's line, as tk-verify refuses other math on one."""
    if is_fp8(x.dtype):
        raise fail(f"{name}: an 8-bit float tile ({_name(x)}) is a storage type: convert it with "
                   f".to(tkc.f32) or .to(tkc.bf16) to reduce or pick from it")


def _reduce(name):
    by_row = name.startswith("row")

    def op(*args, init=None) -> Reg:
        if args and isinstance(args[0], Reg) and not args[0].is_tile:
            if len(args) not in (2, 3) or init is not None:
                raise fail(f"{name}(dst, src[, accum]) takes a destination vector, a tile "
                           "and optionally a vector to accumulate onto")
            dst, src, acc = args[0], args[1], (args[2] if len(args) == 3 else None)
        elif len(args) == 1:
            dst, src, acc = None, args[0], init
        else:
            raise fail(f"{name} takes (src, init=None) or (dst_vec, src[, accum])")
        _reg(src, name, "source", tile=True)
        _no_8bit(name, src)
        layouts = ("row", "wide") if by_row else ("row",)
        if src.layout not in layouts:
            raise fail(f"{name}: the source tile must be in {' or '.join(layouts)} layout, got {_name(src)}")
        want = RV(src.dtype, src.rows if by_row else src.cols, "col" if by_row else "row")
        view = dst.view if dst is not None else acc.view if isinstance(acc, Reg) else want
        if (view.length, view.kind) != (want.length, want.kind):
            raise fail(f"{name}: result must be a \"{want.kind}\" vector of length {want.length} "
                       f"for {_name(src)}, got {Reg(view).describe()}")
        if acc is not None:
            _reg(acc, name, "accumulator", tile=False)
            if acc.view != view:
                raise fail(f"{name}: accumulator {_name(acc)} must have the result's type "
                           f"{Reg(view).describe()}")
        return _result(name, dst, view, lambda: tk.reduce(
            name, src.value(), view.mlir(), acc.value() if acc is not None else None))
    op.__name__ = name
    op.__doc__ = f"{name}(dst_vec, src[, accum]) or {name}(src, init=None)."
    return op


row_max, row_sum, col_max, col_sum = (_reduce(n) for n in tk.REDUCE)


def _pick(name):
    by_row = name == "row_pick"

    def op(x, index) -> Reg:
        _reg(x, name, "source", tile=True)
        _no_8bit(name, x)
        if x.layout != "row":
            raise fail(f"{name}: the source tile must be in row layout, got {_name(x)}")
        i = as_index(index, f"{name}'s {'column' if by_row else 'row'}")
        n = x.cols if by_row else x.rows
        if i.const is not None and not 0 <= i.const < n:
            raise fail(f"{name}: {'column' if by_row else 'row'} {i.const} is outside {_name(x)}")
        view = RV(x.dtype, x.rows, "col") if by_row else RV(x.dtype, x.cols, "row")
        return _result(name, None, view, lambda: tk.pick(name, x.value(), i.ir()))
    op.__name__ = name
    op.__doc__ = (f"{name}(x, {'j' if by_row else 'i'}): "
                  + ("column j of x, one element per row (a \"col\" rv, as row_sum gives): x[:, j]"
                     if by_row else "row i of x, one element per column (a \"row\" rv, as col_sum "
                                    "gives): x[i, :]")
                  + "; the index may be known only at run time (e.g. from warpgroupid()).")
    return op


row_pick, col_pick = (_pick(n) for n in tk.PICK)


def roll(x, shift: int, axis: int) -> Reg:
    """numpy.roll(x, shift, axis) of a row-layout tile, a constant shift:
    element i along the axis (0: rows, 1: columns) is x's element i - shift,
    cyclically. roll(q, -d, 1)[:, j] = q[:, (j + d) % cols]: with q * roll(q,
    -d, 1), the products q_j q_(j+d) of one diagonal of q's outer product."""
    _reg(x, "roll", "source", tile=True)
    if x.layout != "row":
        raise fail(f"roll: the source tile must be in row layout, got {_name(x)}")
    if isinstance(axis, bool) or axis not in (0, 1):
        raise fail(f"roll: axis must be 0 or 1, got {axis!r}")
    if isinstance(shift, bool) or not isinstance(shift, int):
        raise fail(f"roll: shift must be a Python int (a constant), got {type(shift).__name__}")
    n = x.shape[axis]
    return _result("roll", None, x.view, lambda: tk.roll(x.value(), shift % n, axis))


# ------------------------------------------------------------ broadcasts

def _broadcast(name):
    per_row = name.endswith("_row")

    def op(*args) -> Reg:
        dst, (x, v) = _split(name, args, 2)
        _reg(x, name, "tile", tile=True)
        _reg(v, name, "vector", tile=False)
        if name.startswith("div"):
            _float_only(name, x, v)
        layouts = ("row", "wide") if per_row else ("row",)
        if x.layout not in layouts:
            raise fail(f"{name}: the tile must be in {' or '.join(layouts)} layout, got {_name(x)}")
        kind, n = ("col", x.rows) if per_row else ("row", x.cols)
        if (v.kind, v.length) != (kind, n):
            raise fail(f"{name}: the vector must be a \"{kind}\" vector of length {n} for "
                       f"{_name(x)}, got {_name(v)}")
        return _result(name, dst, x.view, lambda: tk.broadcast(name, x.value(), v.value()))
    op.__name__ = name
    op.__doc__ = f"{name}(dst, src, vec) or {name}(src, vec)."
    return op


(add_row, sub_row, mul_row, div_row,
 add_col, sub_col, mul_col, div_col) = (_broadcast(n) for n in tk.BROADCAST)


# ------------------------------------------------------------ mma

# op -> (a layout, b layout, a's (M|K) axes, b's (K|N) axes) as index pairs
_MMA = {
    "mma_ab": ("row", "col", "MK", "KN"),
    "mma_abt": ("row", "row", "MK", "NK"),
    "mma_atb": ("col", "col", "KM", "KN"),
    "mma_atbt": ("col", "row", "KM", "NK"),
}


def _check_mma(py: str, name: str, a: Reg, b: Reg, c: Reg) -> None:
    _, _, sa, sb = _MMA[name]
    for x, what in ((a, "a"), (b, "b"), (c, "c")):
        _reg(x, py, what, tile=True)
    if a.dtype not in ("bf16", "f16") or b.dtype != a.dtype:
        raise fail(f"{py}: a and b must both be bf16 or both f16, got {_name(a)} and {_name(b)}")
    if c.dtype != "f32" or c.layout != "row":
        raise fail(f"{py}: c must be an f32 row-layout tile, got {_name(c)}")
    for x, what in ((a, "a"), (b, "b")):
        if x.layout == "wide":
            raise fail(f"{py}: {what} is {_name(x)}; the wide layout is for memory, the tensor "
                       "cores take row or col: load it in one of those")
    # a and b may come in either layout: tk-layout-selection makes them legal
    # (retyping their loads, or one swap_layout each), so authors need not.
    dims = {}
    for shape, axes in ((a.shape, sa), (b.shape, sb), (c.shape, "MN")):
        for size, axis in zip(shape, axes):
            if dims.setdefault(axis, size) != size:
                raise fail(f"{py}: shapes do not agree on {axis} ({dims[axis]} vs {size}): "
                           f"a {_name(a)}, b {_name(b)}, c {_name(c)}")


def _mma(py):
    name = py.lower()

    def op(*args) -> Reg:
        dst, (a, b, c) = _split(py, args, 3)
        _check_mma(py, name, a, b, c)
        return _result(py, dst, c.view, lambda: tk.mma(name, a.value(), b.value(), c.value()))
    op.__name__ = py
    op.__doc__ = f"{py}(d, a, b, c) or {py}(a, b, c): d = a @ b + c with the named transposes."
    return op


mma_AB, mma_ABt, mma_AtB, mma_AtBt = (_mma(n) for n in ("mma_AB", "mma_ABt", "mma_AtB", "mma_AtBt"))


# ------------------------------------------------------------ layout

def swap_layout(*args) -> Reg:
    """The same values in the other register layout: swap_layout(dst, src) or (src)."""
    dst, (x,) = _split("swap_layout", args, 1)
    _reg(x, "swap_layout", tile=True)
    if x.layout == "wide":
        raise fail(f"swap_layout: {_name(x)} is wide, which does not change layout in registers: "
                   "store it to shared memory and load it in the layout you need")
    view = x.view.with_(layout="col" if x.layout == "row" else "row")
    return _result("swap_layout", dst, view, lambda: tk.swap_layout(x.value()))


def transpose(*args) -> Reg:
    """x.T in the same layout: transpose(dst, src) or (src)."""
    dst, (x,) = _split("transpose", args, 1)
    _reg(x, "transpose", tile=True)
    if x.layout == "wide":
        raise fail(f"transpose: needs a row or col layout tile, got {_name(x)}")
    view = x.view.with_(rows=x.cols, cols=x.rows)
    return _result("transpose", dst, view, lambda: tk.transpose(x.value()))
