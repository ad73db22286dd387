"""tk-verify: every rule of docs/tile-ir.md that the IRDL definition cannot say.

IRDL checks op names, operand counts and the enum-like type parameters; this
pass checks the rest: shapes (positive multiples of 16, 8-row tiles), how operand and
result types relate for each op family, the mma layout table, where allocs
may sit, load/store index counts and subtile shapes, group-copy warp counts,
and the kernel function's attributes and argument types.

It collects every error of the module and raises one TkcErrors listing them
as `file:line:col: error: <op>: <rule>`, located at the author's line. A
module without errors is then checked for shared-memory races between warps
(verify_races.py), which are warnings on stderr.
"""
from __future__ import annotations

from ..dialect.attrs import constant
from ..dialect.kernel import (check_arg_names, check_dim_names, check_divisible, gl_arg_names, lenient,
                              positive_int, strings, written)
from ..dialect.ops import BINARY, BROADCAST, INITS, MMA, REDUCE, UNARY
from ..dialect.types import DYN, GL, RT, RV, ST, SV, safe_view, view
from ..diagnostics import TkcErrors, where
from ..hopper.fragments import HALF, extent_ok
from ..dtypes import itemsize
from . import verify_block as block_rules, verify_cluster as cluster_rules, verify_peers as peer_rules
from . import verify_races as races
from .registry import register
from .verify_fp8 import fp8_problems
from .verify_ints import int_gl_problem, int_problems, scalar_of
from .verify_memory import CHECKS as _MEMORY_CHECKS, SCALAR_ARGS, slice_use_problem
from .verify_messages import describe as _desc, need as _need, op_name as _name, short
from .verify_tma import CHECKS as _TMA_CHECKS
from .verify_warpgroup import CHECKS as _WARPGROUP_CHECKS

SWIZZLE_BYTES = {"32b": 32, "64b": 64, "128b": 128}


@register("tk-verify", "check the tile IR rules IRDL cannot express (docs/tile-ir.md)")
def run(module_op) -> None:
    errors = verify(module_op)
    if errors:
        raise TkcErrors(errors)
    races.report(module_op)   # warnings: shared-memory races it can see without a run


def verify(module_op) -> list[tuple[str, str]]:
    """All rule violations in the module, as (where, message) pairs, in IR order."""
    errors: list[tuple[str, str]] = []
    _walk(module_op.operation, None, errors)
    return errors


# ---- walking ------------------------------------------------------------------

def _walk(op, kernel, errors) -> None:
    """Check op, then everything nested in it; `kernel` is the enclosing tk kernel."""
    op = op.operation
    is_kernel = op.name == "func.func" and "tk.kernel" in op.attributes
    if is_kernel:
        kernel = op
        errors.extend((w or where(op), m) for w, m in _check_kernel(op))
        errors.extend((where(op), f"kernel @{op.attributes['sym_name'].value}: {m}")
                      for m in block_rules.check_kernel(op))
    if op.name == "scf.for":
        errors.extend((where(op), m) for m in block_rules.check_loop(op))
    errors.extend((where(op), m) for m in _check_result_types(op))
    if op.name.startswith("tk."):
        errors.extend((where(op), m) for m in _check_op(op, kernel))
    for region in op.regions:
        for block in region.blocks:
            for arg in block.arguments:
                if not is_kernel:  # kernel arguments are checked with the kernel
                    errors.extend((where(arg.location) or where(op), m)
                                  for m in _check_type(arg.type, "block argument"))
            for child in block.operations:
                _walk(child, kernel, errors)


def _check_result_types(op):
    for i, r in enumerate(op.results):
        yield from _check_type(r.type, f"{_name(op)}: result {i}" if len(op.results) > 1
                               else f"{_name(op)}: result")


# ---- types ------------------------------------------------------------------------

def _check_type(t, what: str):
    try:
        v = view(t)
    except ValueError:
        yield f"{what}: malformed tk type {t}"
        return
    if isinstance(v, (RT, ST)):
        if not (extent_ok(v.rows, half=True) and extent_ok(v.cols)):
            yield f"{what}: {short(t)}: rows and cols must be positive multiples of 16 (rows may be 8)"
        elif isinstance(v, RT) and v.rows == HALF and v.layout != "row":
            yield (f"{what}: {short(t)}: an 8-row rt is row layout only (the {v.layout} layout's "
                   f"fragments span 16 rows)")
        elif isinstance(v, ST) and v.swizzle in SWIZZLE_BYTES:
            s = SWIZZLE_BYTES[v.swizzle]
            if (v.cols * itemsize(v.dtype)) % s:
                yield (f"{what}: {short(t)}: a {v.swizzle} swizzle needs a row width in bytes "
                       f"that is a multiple of {s}, got {v.cols * itemsize(v.dtype)}")
    elif isinstance(v, (RV, SV)):
        if not extent_ok(v.length, half=isinstance(v, RV) and v.kind == "col"):
            half = " (or 8 for a \"col\" rv: an 8-row tile's rows)" if isinstance(v, RV) else ""
            yield f"{what}: {short(t)}: length must be a positive multiple of 16{half}"
        elif isinstance(v, RV) and v.kind == "flat" and v.length % 32:
            yield f"{what}: {short(t)}: a flat rv's length must be a multiple of 32 (one chunk per lane)"
    elif isinstance(v, GL):
        if any(d <= 0 and d != DYN for d in v.dims):
            yield f"{what}: {short(t)}: gl dims must be positive, or -1 for a runtime dim"


# ---- kernel functions -------------------------------------------------------------

def _check_kernel(fn):
    """(where, message) pairs; where '' means the function's own location."""
    attrs = fn.attributes
    name = f"kernel @{fn.attributes['sym_name'].value}"
    args = fn.regions[0].blocks[0].arguments if fn.regions[0].blocks else []
    if "tk.warps" in attrs and not positive_int(attrs["tk.warps"]):
        yield "", f"{name}: tk.warps must be a positive integer, got {attrs['tk.warps']}"
    if "tk.grid" in attrs and not strings(attrs["tk.grid"], 3):
        yield "", f"{name}: tk.grid must be an array of 3 strings, got {attrs['tk.grid']}"
    if "tk.arg_names" in attrs:
        yield from (("", m) for m in check_arg_names(name, attrs["tk.arg_names"], args))
    if "tk.dim_names" in attrs:
        yield from (("", m) for m in check_dim_names(name, attrs["tk.dim_names"], args))
    if "tk.inplace" in attrs:
        yield from (("", m) for m in _check_inplace(name, attrs["tk.inplace"], fn))
    if "tk.divisible" in attrs:
        yield from (("", m) for m in check_divisible(name, attrs["tk.divisible"], fn))
    yield from peer_rules.check_kernel(fn)
    yield from cluster_rules.check_kernel(fn)
    for i, arg in enumerate(args):
        if not (isinstance(safe_view(arg), GL) or str(arg.type) in SCALAR_ARGS):
            yield where(arg.location), (f"{name}: argument {i} must be a !tk.gl, f32 or i32, "
                                        f"got {arg.type}")
        else:
            yield from ((where(arg.location), m) for m in _check_type(arg.type, f"{name}: argument {i}"))
    results = fn.attributes["function_type"].value.results
    if len(results):
        yield "", f"{name}: a kernel returns nothing, got results {list(map(str, results))}"


def _check_inplace(name, attr, kernel):
    """tk.inplace: [[output, input], ...] names of two distinct gl arguments,
    the output one the kernel writes."""
    from mlir import ir
    gls = lenient(gl_arg_names, kernel)
    ok = isinstance(attr, ir.ArrayAttr) and all(strings(pair, 2) for pair in attr)
    if not ok:
        yield f"{name}: tk.inplace must be an array of [output, input] name pairs, got {attr}"
        return
    writes = written(kernel)
    for pair in attr:
        out, src = pair[0].value, pair[1].value
        if out not in gls or src not in gls or out == src:
            yield f"{name}: tk.inplace pairs two distinct gl arguments, got [{out!r}, {src!r}]"
        elif gls[out] not in writes:
            yield f"{name}: tk.inplace names {out!r} as an output, but the kernel never writes it"


# ---- ops ------------------------------------------------------------------------------

def _check_op(op, kernel):
    name = _name(op)
    ins = [safe_view(v) for v in op.operands]
    outs = [safe_view(v) for v in op.results]
    int_gl = int_gl_problem(op, ins)
    if int_gl:
        return [f"{name}: {int_gl}"]
    sliced = slice_use_problem(op)
    if sliced:
        return [f"{name}: {sliced}"]
    ints = int_problems(op, name, ins, outs) or fp8_problems(op, name, ins, outs)
    if ints:
        return ints
    if name in INITS or name == "fill":
        return _check_init(name, outs[0])
    if name in UNARY:
        return [*_check_unary(name, ins[0], outs[0], [op.operands[0].type, op.results[0].type]),
                *_check_fma_share(op, name, ins[0])]
    if name in BINARY:
        return _check_binary(name, ins[0], ins[1], op.operands[1].type, outs[0])
    if name == "fma":
        if _scalar_math([*(v.type for v in op.operands), op.results[0].type]):
            return ()
        return _check_fma(ins, [v.type for v in op.operands], outs[0])
    if name in REDUCE:
        return _check_reduce(name, ins[0], ins[1] if len(ins) > 1 else None, outs[0])
    if name in BROADCAST:
        return _check_broadcast(name, *ins, outs[0])
    if name in MMA:
        return _check_mma(name, *ins, outs[0])
    checker = _OTHERS.get(name)
    return checker(op, name, ins, outs, kernel) if checker else ()


def _check_init(name, out):
    yield from _need(name, "result", out, (RT, RV), "an rt or rv")


def _scalar_math(types) -> bool:
    """Every operand and the result an f32 scalar: math on scalars."""
    return all(str(t) == "f32" for t in types)


def _check_unary(name, x, out, types=()):
    if name != "copy" and _scalar_math(types):
        return
    if not isinstance(x, (RT, RV)):
        yield from _need(name, "operand", x, (RT, RV), "an rt or rv" if name == "copy" else "an rt, rv or f32 scalar")
        return
    if name == "copy":
        if not (type(out) is type(x) and out.with_(dtype=x.dtype) == x):
            yield (f"copy: result may differ from the operand only in dtype "
                   f"(use swap_layout to change layout): {_desc(x)} -> {_desc(out)}")
    elif out != x:
        yield f"{name}: result type must equal the operand's, {_desc(x)} -> {_desc(out)}"


def _check_fma_share(op, name, x):
    """exp / exp2's `fma` attribute: the share of a tile's elements computed
    on the FMA pipe (a number in [0, 1])."""
    if "fma" not in op.attributes:
        return
    from mlir import ir
    if name not in ("exp", "exp2"):
        yield f"{name}: only exp and exp2 take an fma share"
    elif not isinstance(x, RT):
        yield f"{name}: an fma share needs an rt operand, got {_desc(x)}"
    elif not isinstance(share := op.attributes["fma"], ir.FloatAttr):
        yield f"{name}: fma must be a number in [0, 1], got {share}"
    elif not 0.0 <= (share := ir.FloatAttr(share).value) <= 1.0:
        yield f"{name}: fma must be a number in [0, 1], got {share:g}"


def _check_binary(name, x, y, y_type, out):
    if not isinstance(x, (RT, RV)):
        yield from _need(name, "x", x, (RT, RV), "an rt or rv")
        return
    if y != x and not (y is None and str(y_type) == scalar_of(x)):
        got = _desc(y) if y is not None else str(y_type)
        yield f"{name}: y must have x's type {_desc(x)} or be an {scalar_of(x)} scalar, got {got}"
    if out != x:
        yield f"{name}: result type must equal x's type {_desc(x)}, got {_desc(out)}"


def _check_fma(ins, types, out):
    x = ins[0]
    if not isinstance(x, (RT, RV)):
        yield from _need("fma", "x", x, (RT, RV), "an rt or rv")
        return
    for what, v, t in (("y", ins[1], types[1]), ("z", ins[2], types[2])):
        row_vector = isinstance(x, RT) and isinstance(v, RV) and (v.kind, v.length) == ("col", x.rows)
        if v != x and not (v is None and str(t) == "f32") and not row_vector:
            yield (f"fma: {what} must have x's type {_desc(x)}, be an f32 scalar or a \"col\" vector "
                   f"of x's rows, got {_desc(v) if v else t}")
    if out != x:
        yield f"fma: result type must equal x's type {_desc(x)}, got {_desc(out)}"


# Reductions and broadcasts along rows run on the row and wide layouts; along
# columns on the row layout only (v1).
ALONG_LAYOUTS = {True: ("row", "wide"), False: ("row",)}


def _along_layout(name, x, rows: bool):
    if x.layout not in ALONG_LAYOUTS[rows]:
        yield f"{name}: x must be an rt in {' or '.join(ALONG_LAYOUTS[rows])} layout, got {_desc(x)}"


def _check_reduce(name, x, init, out):
    rows = name.startswith("row")
    if not isinstance(x, RT):
        return
    yield from _along_layout(name, x, rows)
    kind, length = ("col", x.rows) if rows else ("row", x.cols)
    if not (isinstance(out, RV) and out.kind == kind and out.length == length):
        yield (f"{name}: result must be a {kind!r} rv of length {length} "
               f"(one per tile {'row' if rows else 'column'}), got {_desc(out)}")
    if init is not None and init != out:
        yield f"{name}: init must have the result's type {_desc(out)}, got {_desc(init)}"


def _check_pick(op, name, ins, outs, kernel):
    """row_pick / col_pick: a row-layout rt to the rv a reduction would give,
    at an index that, when constant, lies inside the tile."""
    x, out, rows = ins[0], outs[0], name == "row_pick"
    if not isinstance(x, RT):
        yield f"{name}: x must be an rt, got {_desc(x)}"
        return
    if x.layout != "row":
        yield f"{name}: x must be an rt in row layout, got {_desc(x)}"
    kind, length = ("col", x.rows) if rows else ("row", x.cols)
    if out != RV(x.dtype, length, kind):
        yield (f"{name}: result must be {short(RV(x.dtype, length, kind).text())} "
               f"(one per tile {'row' if rows else 'column'}), got {_desc(out)}")
    n = x.cols if rows else x.rows
    index = constant(op.operands[1])
    if index is not None and not 0 <= index < n:
        yield f"{name}: index {index} is outside the tile's {n} {'columns' if rows else 'rows'}"


def _check_broadcast(name, x, v, out):
    if not isinstance(x, RT):
        return
    rows = name.endswith("_row")
    yield from _along_layout(name, x, rows)
    kind, length = ("col", x.rows) if rows else ("row", x.cols)
    if not (isinstance(v, RV) and v.kind == kind and v.length == length):
        yield (f"{name}: v must be a {kind!r} rv of length {length} "
               f"(one per tile {'row' if rows else 'column'}), got {_desc(v)}")
    if out != x:
        yield f"{name}: result type must equal x's type {_desc(x)}, got {_desc(out)}"


# op -> (a layout, a's K axis, b layout, b's K axis): the mma table of tile-ir.md.
# Axis 0 = rows, 1 = cols; the other axis of a is M, of b is N.
MMA_TABLE = {
    "mma_ab": ("row", 1, "col", 0),
    "mma_abt": ("row", 1, "row", 1),
    "mma_atb": ("col", 0, "col", 0),
    "mma_atbt": ("col", 0, "row", 1),
}


def _check_mma(name, a, b, c, d):
    if not all(isinstance(t, RT) for t in (a, b, c, d)):
        return  # IRDL guarantees rt operands
    a_layout, a_k, b_layout, b_k = MMA_TABLE[name]
    for what, t, layout in (("a", a, a_layout), ("b", b, b_layout)):
        if t.layout != layout and t.rows == HALF:
            yield (f"{name}: {what} must be a {layout}-layout rt, got {_desc(t)}, and an 8-row rt is row "
                   f"layout only (K = 8 is half an mma's k16: pad it to 16 rows)")
        elif t.layout != layout:
            yield f"{name}: {what} must be a {layout}-layout rt, got {_desc(t)}"
        if t.dtype not in ("bf16", "f16"):
            yield f"{name}: {what} must be bf16 or f16, got {_desc(t)}"
    if a.dtype != b.dtype:
        yield f"{name}: a and b must have one dtype, got {a.dtype} and {b.dtype}"
    m, k = a.shape[1 - a_k], a.shape[a_k]
    n, kb = b.shape[1 - b_k], b.shape[b_k]
    if k != kb:
        yield f"{name}: K of a ({k}) and b ({kb}) must agree: {_desc(a)}, {_desc(b)}"
    want = RT("f32", m, n, "row")
    if c != want:
        yield f"{name}: c must be {_desc(want)} (f32, row, M x N), got {_desc(c)}"
    if d != want:
        yield f"{name}: result must be {_desc(want)} (f32, row, M x N), got {_desc(d)}"


# ---- masks ---------------------------------------------------------------------------------

def _check_iota(op, name, ins, outs, kernel):
    from mlir import ir
    out = outs[0]
    yield from _need(name, "result", out, (RT, RV), "an rt or rv")
    axis = op.attributes["axis"]
    axes = (0, 1) if isinstance(out, RT) else (0,)
    if not (isinstance(axis, ir.IntegerAttr) and axis.value in axes):
        yield f"iota: axis must be {' or '.join(map(str, axes))} for {_desc(out)}, got {axis}"


def _check_roll(op, name, ins, outs, kernel):
    """roll: a row-layout rt to its own type, axis 0 or 1, an integer shift."""
    from mlir import ir
    x, out = ins[0], outs[0]
    if not (isinstance(x, RT) and x.layout == "row"):
        yield f"roll: x must be an rt in row layout, got {_desc(x)}"
    elif out != x:
        yield f"roll: result must have x's type {_desc(x)}, got {_desc(out)}"
    axis, shift = op.attributes["axis"], op.attributes["shift"]
    if not (isinstance(axis, ir.IntegerAttr) and axis.value in (0, 1)):
        yield f"roll: axis must be 0 or 1, got {axis}"
    if not isinstance(shift, ir.IntegerAttr):
        yield f"roll: shift must be an integer, got {shift}"


def _check_where(op, name, ins, outs, kernel):
    """where(a, b, x, y): each a tile of the result's shape and layout or a
    scalar; x and y, when tiles, of the result's type. a and b compare in i32
    when either is an i32 tile (then both are i32), else in f32; a scalar has
    the element type its side computes in (f32, or i32)."""
    out = outs[0]
    if not isinstance(out, (RT, RV)):
        yield from _need(name, "result", out, (RT, RV), "an rt or rv")
        return
    ints = any(v is not None and v.dtype == "i32" for v in ins[:2])
    for what, v, value in zip("abxy", ins, op.operands):
        want = ("i32" if ints else "f32") if what in "ab" else scalar_of(out)
        if v is None:
            if str(value.type) != want:
                yield f"where: {what} must be a tile or an {want} scalar, got {value.type}"
        elif what in "ab" and (v.dtype == "i32") != ints:
            yield (f"where: a and b compare two i32 values or two floats, got "
                   f"{short(op.operands[0].type)} and {short(op.operands[1].type)}")
        elif what in "xy" and v != out:
            yield f"where: {what} must have the result's type {_desc(out)} (or be an f32 scalar), got {_desc(v)}"
        elif type(v) is not type(out) or v.with_(dtype=out.dtype) != out:
            yield f"where: {what} must have the result's shape and layout {_desc(out)}, got {_desc(v)}"


# ---- layout ops ----------------------------------------------------------------

def _check_swap_layout(op, name, ins, outs, kernel):
    x, out = ins[0], outs[0]
    if isinstance(x, RT) and "wide" in (x.layout, getattr(out, "layout", None)):
        yield (f"swap_layout: a wide rt does not change layout in registers ({_desc(x)} -> "
               f"{_desc(out)}): store it to shared memory and load it in the layout you need")
    elif isinstance(x, RT) and out != x.with_(layout="col" if x.layout == "row" else "row"):
        yield f"swap_layout: result must be {_desc(x)} in the other layout, got {_desc(out)}"


def _check_transpose(op, name, ins, outs, kernel):
    x, out = ins[0], outs[0]
    if isinstance(x, RT) and x.layout == "wide":
        yield f"transpose: needs a row or col layout rt, got {_desc(x)}"
    elif isinstance(x, RT) and out not in (x.with_(rows=x.cols, cols=x.rows, layout=layout)
                                           for layout in ("row", "col")):
        want = x.with_(rows=x.cols, cols=x.rows)
        yield (f"transpose: result must be {_desc(want)} (shape swapped) in the row or col layout, "
               f"got {_desc(out)}")


_OTHERS = {
    "iota": _check_iota,
    "roll": _check_roll,
    "rand": lambda op, name, ins, outs, kernel: _need(name, "result", outs[0], (RT, RV), "an rt or rv"),
    "where": _check_where,
    "row_pick": _check_pick,
    "col_pick": _check_pick,
    "swap_layout": _check_swap_layout,
    "transpose": _check_transpose,
}

# memory ops' rules live with their op family (verify_memory.py); mbarrier and
# TMA rules likewise (verify_tma.py); warpgroup mma, its wait and setmaxnreg
# likewise (verify_warpgroup.py); rings, subtiles, pipeline copies and named
# barriers likewise (verify_block.py).
_OTHERS.update(_MEMORY_CHECKS)
_OTHERS.update(_TMA_CHECKS)
_OTHERS.update(_WARPGROUP_CHECKS)
_OTHERS.update(block_rules.CHECKS)
_OTHERS.update(peer_rules.CHECKS)
_OTHERS.update(cluster_rules.CHECKS)
