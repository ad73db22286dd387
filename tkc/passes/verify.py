"""tk-verify: every rule of docs/tile-ir.md that the IRDL definition cannot say.

IRDL checks op names, operand counts and the enum-like type parameters; this
pass checks the rest: shapes (positive multiples of 16), how operand and
result types relate for each op family, the mma layout table, where allocs
may sit, load/store index counts and subtile shapes, group-copy warp counts,
and the kernel function's attributes and argument types.

It collects every error of the module and raises one TkcErrors listing them
as `file:line:col: error: <op>: <rule>`, located at the author's line.
"""
from __future__ import annotations

from ..dialect import gl_root, is_index_load
from ..dialect.ops import BINARY, BROADCAST, INITS, MMA, REDUCE, UNARY
from ..dialect.types import DYN, GL, RT, RV, ST, SV, Barrier, view
from ..diagnostics import TkcError, TkcErrors, error, where
from ..dtypes import itemsize
from .registry import register

SWIZZLE_BYTES = {"32b": 32, "64b": 64, "128b": 128}
SCALAR_ARGS = ("f32", "i32")
IDX_COUNT = {GL: (4,), ST: (2,), SV: (0, 1)}


@register("tk-verify", "check the tile IR rules IRDL cannot express (docs/tile-ir.md)")
def run(module_op) -> None:
    errors = verify(module_op)
    if errors:
        raise TkcErrors(errors)


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


def _name(op) -> str:
    return op.name.removeprefix("tk.")


def short(t) -> str:
    """A tk type without the noise: rt<bf16, 16, 64, row>."""
    return str(t).removeprefix("!tk.").replace(" : i64", "").replace('"', "")


# ---- types ------------------------------------------------------------------------

def _check_type(t, what: str):
    try:
        v = view(t)
    except ValueError:
        yield f"{what}: malformed tk type {t}"
        return
    if isinstance(v, (RT, ST)):
        if not (_tile_dim(v.rows) and _tile_dim(v.cols)):
            yield f"{what}: {short(t)}: rows and cols must be positive multiples of 16"
        elif isinstance(v, ST) and v.swizzle in SWIZZLE_BYTES:
            s = SWIZZLE_BYTES[v.swizzle]
            if (v.cols * itemsize(v.dtype)) % s:
                yield (f"{what}: {short(t)}: a {v.swizzle} swizzle needs a row width in bytes "
                       f"that is a multiple of {s}, got {v.cols * itemsize(v.dtype)}")
    elif isinstance(v, (RV, SV)):
        if not _tile_dim(v.length):
            yield f"{what}: {short(t)}: length must be a positive multiple of 16"
        elif isinstance(v, RV) and v.kind == "flat" and v.length % 32:
            yield f"{what}: {short(t)}: a flat rv's length must be a multiple of 32 (one chunk per lane)"
    elif isinstance(v, GL):
        if any(d <= 0 and d != DYN for d in v.dims):
            yield f"{what}: {short(t)}: gl dims must be positive, or -1 for a runtime dim"


def _tile_dim(n: int) -> bool:
    return n > 0 and n % 16 == 0


def _safe_view(value):
    """The view of a value's type; None when it is not a (well-formed) tk type."""
    try:
        return view(value.type)
    except ValueError:  # reported where the value is defined
        return None


# ---- kernel functions -------------------------------------------------------------

def _check_kernel(fn):
    """(where, message) pairs; where '' means the function's own location."""
    attrs = fn.attributes
    name = f"kernel @{fn.attributes['sym_name'].value}"
    args = fn.regions[0].blocks[0].arguments if fn.regions[0].blocks else []
    if "tk.warps" in attrs and not _positive_int(attrs["tk.warps"]):
        yield "", f"{name}: tk.warps must be a positive integer, got {attrs['tk.warps']}"
    if "tk.grid" in attrs and not _strings(attrs["tk.grid"], 3):
        yield "", f"{name}: tk.grid must be an array of 3 strings, got {attrs['tk.grid']}"
    if "tk.arg_names" in attrs:
        yield from (("", m) for m in _check_arg_names(name, attrs["tk.arg_names"], args))
    if "tk.dim_names" in attrs:
        yield from (("", m) for m in _check_dim_names(name, attrs["tk.dim_names"], args))
    if "tk.inplace" in attrs:
        yield from (("", m) for m in _check_inplace(name, attrs["tk.inplace"], fn))
    if "tk.divisible" in attrs:
        yield from (("", m) for m in _check_divisible(name, attrs["tk.divisible"], fn))
    for i, arg in enumerate(args):
        if not (isinstance(_safe_view(arg), GL) or str(arg.type) in SCALAR_ARGS):
            yield where(arg.location), (f"{name}: argument {i} must be a !tk.gl, f32 or i32, "
                                        f"got {arg.type}")
        else:
            yield from ((where(arg.location), m) for m in _check_type(arg.type, f"{name}: argument {i}"))
    results = fn.attributes["function_type"].value.results
    if len(results):
        yield "", f"{name}: a kernel returns nothing, got results {list(map(str, results))}"


def _check_arg_names(name, attr, args):
    """tk.arg_names: one distinct string per argument."""
    if not _strings(attr, len(args)):
        yield (f"{name}: tk.arg_names must be an array of {len(args)} strings "
               f"(one per argument), got {attr}")
    elif len({n.value for n in attr}) != len(args):
        yield f"{name}: tk.arg_names must be distinct, got {attr}"


def arg_names(kernel) -> list[str]:
    """Each argument's name, from tk.arg_names (argN without it). A malformed
    attribute is a located TkcError, as for dim_names."""
    args = kernel.regions[0].blocks[0].arguments
    if "tk.arg_names" not in kernel.attributes:
        return [f"arg{i}" for i in range(len(args))]
    attr = kernel.attributes["tk.arg_names"]
    for message in _check_arg_names(f"kernel @{kernel.attributes['sym_name'].value}", attr, args):
        raise error(kernel, message)
    return [a.value for a in attr]


def _check_dim_names(name, attr, args):
    """tk.dim_names: per argument 4 strings for a gl, none for a scalar; a name
    ("" = unnamed) only on a runtime dim, since it is checked at launch."""
    from mlir import ir
    if not (isinstance(attr, ir.ArrayAttr) and len(attr) == len(args)):
        yield (f"{name}: tk.dim_names must be an array of {len(args)} arrays "
               f"(one per argument), got {attr}")
        return
    for i, (entry, arg) in enumerate(zip(attr, args)):
        g = _safe_view(arg)
        n = 4 if isinstance(g, GL) else 0
        if not _strings(entry, n):
            yield (f"{name}: tk.dim_names entry {i} must be an array of {n} strings "
                   f"({'one per gl dim' if n else 'a scalar has no dims'}), got {entry}")
            continue
        for axis, dim_name, size in zip("bdrc", entry, g.dims if n else ()):
            if dim_name.value and size != DYN:
                yield (f"{name}: argument {i} dim {axis} is static ({size}) but named "
                       f"{dim_name.value!r}: names are for runtime dims")


def _check_divisible(name, attr, kernel):
    """tk.divisible: {key = positive int}; a key is a dim name of tk.dim_names
    ("K") or an argument's dim ("a.c", the grid language's spelling). A
    relation {Hq = "Hkv"} pairs two dim names: Hq a multiple of Hkv."""
    from mlir import ir
    if not isinstance(attr, ir.DictAttr):
        yield f"{name}: tk.divisible must be a dictionary {{name = multiple}}, got {attr}"
        return
    names = {n for dims in _lenient(dim_names, kernel) for n in dims if n}
    known = names | {f"{a}.{axis}" for a in _lenient(gl_arg_names, kernel) for axis in "bdrc"}
    for entry in attr:
        if isinstance(entry.attr, ir.StringAttr):
            if entry.name not in names or entry.attr.value not in names:
                yield (f"{name}: tk.divisible[{entry.name}] = {entry.attr} relates two dims: "
                       f"both must be dim names (of tk.dim_names: {sorted(names)})")
            continue
        if not _positive_int(entry.attr):
            yield f"{name}: tk.divisible[{entry.name}] must be a positive integer, got {entry.attr}"
        if entry.name not in known:
            yield (f"{name}: tk.divisible names {entry.name!r}, which is neither a dim name "
                   "nor a gl argument's dim (like a.c)")


def _check_inplace(name, attr, kernel):
    """tk.inplace: [[output, input], ...] names of two distinct gl arguments,
    the output one the kernel writes."""
    from mlir import ir
    from ..lowering.requirements import _written
    gls = _lenient(gl_arg_names, kernel)
    ok = isinstance(attr, ir.ArrayAttr) and all(_strings(pair, 2) for pair in attr)
    if not ok:
        yield f"{name}: tk.inplace must be an array of [output, input] name pairs, got {attr}"
        return
    written = _written(kernel)
    for pair in attr:
        out, src = pair[0].value, pair[1].value
        if out not in gls or src not in gls or out == src:
            yield f"{name}: tk.inplace pairs two distinct gl arguments, got [{out!r}, {src!r}]"
        elif gls[out] not in written:
            yield f"{name}: tk.inplace names {out!r} as an output, but the kernel never writes it"


def gl_arg_names(kernel) -> dict[str, int]:
    """{name: argument index} of a kernel's gl arguments."""
    args = kernel.regions[0].blocks[0].arguments
    return {n: i for i, (n, a) in enumerate(zip(arg_names(kernel), args))
            if isinstance(_safe_view(a), GL)}


def _lenient(reader, kernel):
    """reader(kernel), or empty when its attribute is malformed (tk-verify
    reports that attribute on its own)."""
    try:
        return reader(kernel)
    except TkcError:
        return []


def declared_divisible(kernel) -> dict[str, int]:
    """tk.divisible's numbers as {dim name: multiple} ({} without it)."""
    return {k: v for k, v in _declared(kernel).items() if isinstance(v, int)}


def declared_multiples(kernel) -> list[list[str]]:
    """tk.divisible's relations as [[dim name, dim name it is a multiple of], ...]."""
    return [[k, v] for k, v in _declared(kernel).items() if isinstance(v, str)]


def _declared(kernel) -> dict:
    if "tk.divisible" not in kernel.attributes:
        return {}
    name = f"kernel @{kernel.attributes['sym_name'].value}"
    for message in _check_divisible(name, kernel.attributes["tk.divisible"], kernel):
        raise error(kernel, message)
    return {e.name: e.attr.value for e in kernel.attributes["tk.divisible"]}


def dim_names(kernel) -> list[list[str | None]]:
    """Per argument of a kernel, its dims' names (None = unnamed; [] for a scalar),
    from tk.dim_names (every dim unnamed without it). A malformed attribute is a
    located TkcError: the interpreter and the lowering may run without tk-verify."""
    args = kernel.regions[0].blocks[0].arguments
    attr = kernel.attributes["tk.dim_names"] if "tk.dim_names" in kernel.attributes else None
    if attr is None:
        return [[None] * 4 if isinstance(_safe_view(a), GL) else [] for a in args]
    name = f"kernel @{kernel.attributes['sym_name'].value}"
    for message in _check_dim_names(name, attr, args):
        raise error(kernel, message)
    return [[s.value or None for s in entry] for entry in attr]


def _positive_int(attr) -> bool:
    from mlir import ir
    return isinstance(attr, ir.IntegerAttr) and attr.value > 0


def _strings(attr, n: int) -> bool:
    from mlir import ir
    return (isinstance(attr, ir.ArrayAttr) and len(attr) == n
            and all(isinstance(a, ir.StringAttr) for a in attr))


def kernel_warps(kernel) -> int | None:
    """The kernel's tk.warps (default 1), None when it is not a positive int."""
    if kernel is None or "tk.warps" not in kernel.attributes:
        return 1 if kernel is not None else None
    a = kernel.attributes["tk.warps"]
    return a.value if _positive_int(a) else None


# ---- ops ------------------------------------------------------------------------------

def _check_op(op, kernel):
    name = _name(op)
    ins = [_safe_view(v) for v in op.operands]
    outs = [_safe_view(v) for v in op.results]
    if any(isinstance(v, GL) and v.dtype == "i32" for v in ins) and not _index_use(op):
        return [f"{name}: an i32 gl holds indices: it is read one element at a time "
                "(load(tkc.i32, g, at=..., fill=...)), sliced or sized, nothing else"]
    sliced = _slice_use_problem(op)
    if sliced:
        return [f"{name}: {sliced}"]
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


def _need(name: str, what: str, v, kinds, desc: str):
    """Error unless v is one of `kinds` (view classes)."""
    if not isinstance(v, kinds):
        yield f"{name}: {what} must be {desc}, got {_desc(v)}"


def _desc(v) -> str:
    return "a non-tk value" if v is None else short(v.text())


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
    if y != x and not (y is None and str(y_type) == "f32"):
        got = _desc(y) if y is not None else str(y_type)
        yield f"{name}: y must have x's type {_desc(x)} or be an f32 scalar, got {got}"
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
    from .verify_block import constant
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
        if t.layout != layout:
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
    """where(a, b, x, y): each a tile of the result's shape and layout or an
    f32 scalar; x and y, when tiles, of the result's type."""
    out = outs[0]
    if not isinstance(out, (RT, RV)):
        yield from _need(name, "result", out, (RT, RV), "an rt or rv")
        return
    for what, v, value in zip("abxy", ins, op.operands):
        if v is None:
            if str(value.type) != "f32":
                yield f"where: {what} must be a tile or an f32 scalar, got {value.type}"
        elif what in "xy" and v != out:
            yield f"where: {what} must have the result's type {_desc(out)} (or be an f32 scalar), got {_desc(v)}"
        elif type(v) is not type(out) or v.with_(dtype=out.dtype) != out:
            yield f"where: {what} must have the result's shape and layout {_desc(out)}, got {_desc(v)}"


# ---- layout and memory ops ----------------------------------------------------------------

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
    elif isinstance(x, RT) and out != x.with_(rows=x.cols, cols=x.rows):
        want = x.with_(rows=x.cols, cols=x.rows)
        yield f"transpose: result must be {_desc(want)} (shape swapped, same layout), got {_desc(out)}"


def _check_atomic_add(op, name, ins, outs, kernel):
    """atomic_add(gl<i32>, scratch sv, b, d, r, c, after gls...) -> i32."""
    from mlir import ir
    if not (isinstance(ins[0], GL) and ins[0].dtype == "i32"):
        yield f"{name}: adds into an i32 gl (a counter), got {_desc(ins[0])}"
    if len(ins) < 6 or not isinstance(ins[1], SV) or ins[1].dtype != "f32":
        yield f"{name}: needs an sv<f32> scratch and 4 coordinates (b, d, r, c)"
        return
    if any(not isinstance(g, GL) for g in ins[6:]):
        yield f"{name}: after= takes gls, got {', '.join(_desc(g) for g in ins[6:])}"
    value = op.attributes["value"] if "value" in op.attributes else None
    if not isinstance(value, ir.IntegerAttr):
        yield f"{name}: value must be an integer attribute, got {value}"
    yield from block_rules.check_sync_attributes(op, kernel)


def _check_alloc(op, name, ins, outs, kernel):
    yield from _need(name, "result", outs[0], (ST, SV, Barrier), "an st, sv or barrier")
    yield from block_rules.check_alloc_stages(op)
    parent = op.parent
    if (parent is None or parent.name != "func.func"
            or op.block != parent.regions[0].blocks[0] or kernel is None):
        yield "alloc: must be in the kernel function's entry block (not in a loop or branch)"


def _check_load(op, name, ins, outs, kernel):
    from mlir import ir
    fill = op.attributes["fill"] if "fill" in op.attributes else None
    if fill is not None and not isinstance(fill, ir.FloatAttr):
        yield f"load: fill must be a float attribute (fill = 0.0 : f32), got {fill}"
    yield from _check_ragged(op, "load", ins[0], "fill", len(ins) - 1, outs[0], op.results[0])


def _check_store(op, name, ins, outs, kernel):
    if "add" in op.attributes and not (isinstance(ins[0], GL) and ins[0].dtype == "f32"
                                       and isinstance(ins[1], (RT, RV))):
        yield (f"store: add (an atomic reduce-add) writes a tile or vector into an f32 gl, "
               f"got {_desc(ins[1])} into {_desc(ins[0])}")
    if "deinterleave" in op.attributes and not (isinstance(ins[0], ST) and ins[0].dtype == "f32"
                                                and isinstance(ins[1], RT) and ins[1].dtype == "f32"
                                                and ins[1].layout == "row"):
        yield (f"store: deinterleave (stmatrix of f32 pairs) writes an f32 row-layout rt into an f32 st, "
               f"got {_desc(ins[1])} into {_desc(ins[0])}")
    if "packed" in op.attributes and not ("add" in op.attributes and isinstance(ins[1], RT)
                                          and ins[1].dtype == "f32" and ins[1].layout == "row"):
        yield (f"store: packed (red.global.add.v4.f32) adds an f32 row-layout rt into an f32 gl, "
               f"got {_desc(ins[1])} into {_desc(ins[0])}{'' if 'add' in op.attributes else ' without add'}")
    if "packed" in op.attributes and "c" in gl_root(op.operands[0])[1]:
        yield ("store: packed adds 16 aligned bytes a lane: not through a gl sliced along its columns "
               "(the slice's start may not be a multiple of 4)")
    yield from _check_ragged(op, "store", ins[0], "clip", len(ins) - 2, ins[1], op.operands[1])


# load's and store's ragged forms: (the attribute, what the access does past the edge)
_RAGGED = {"fill": ("a ragged load", "a gl source", "load"), "clip": ("a ragged store", "a gl destination", "store")}


def _check_ragged(op, name, mem, bound, n_idx, reg, reg_value):
    """The attributes of load/store (bound: fill or clip; elements), then the
    transfer: one f32 element, or a tile or vector."""
    what, needs, verb = _RAGGED[bound]
    if bound in op.attributes and not isinstance(mem, GL):
        yield f"{name}: {bound} ({what}) needs {needs}: shared tiles have no ragged edge"
    if "elements" in op.attributes and bound not in op.attributes:
        yield f"{name}: element coordinates (elements) need {bound}: such a {verb} may reach past the gl's edges"
    if str(reg_value.type) in SCALAR_ARGS:
        yield from _check_element(op, name, mem, n_idx, bound, str(reg_value.type))
        return
    yield from _check_transfer(name, mem, reg, n_idx, ragged=bound in op.attributes)


def _check_split(op, mem, pair, n_idx, bound):
    """load_split / store_join: a gl or st tile of twice the rt's width, as load/store."""
    name = _name(op)
    if pair[0] != pair[1] or not isinstance(pair[0], RT):
        yield f"{name}: the even and odd tiles must be rt of one type, got {_desc(pair[0])} and {_desc(pair[1])}"
        return
    if not isinstance(mem, (GL, ST)):
        yield f"{name}: needs a gl or st, got {_desc(mem)}"
        return
    want = 4 if isinstance(mem, GL) else 2
    if n_idx != want:
        yield f"{name}: {_KIND[type(mem)]} takes {want} indices, got {n_idx}"
    if isinstance(mem, ST):
        for attr in (bound, "elements"):
            if attr in op.attributes:
                yield f"{name}: {attr} needs a gl: shared tiles have no ragged edge"
        if mem.rows % pair[0].rows or mem.cols % (2 * pair[0].cols):
            yield (f"{name}: {_desc(pair[0])} pairs are not a subtile of {_desc(mem)} (the st's shape "
                   f"must be a multiple of {pair[0].rows}x{2 * pair[0].cols})")
        return
    if "elements" in op.attributes and bound not in op.attributes:
        yield f"{name}: element coordinates (elements) need {bound}"
    yield from _gl_divides(name, mem, pair[0], bound in op.attributes, k=2)


# ops whose gl operand may be a slice, and what they need then
_SLICE_OK = ("tk.dim", "tk.gl_slice", "tk.tma_load", "tk.pipeline_load")
_SLICE_RAGGED = {"tk.load": "fill", "tk.load_split": "fill", "tk.store": "clip", "tk.store_join": "clip"}


def _slice_use_problem(op) -> str | None:
    """Accesses through a gl slice stop at its edges: register loads and stores
    must be ragged (fill/clip); a TMA or group store cannot clip to it."""
    if op.name in _SLICE_OK or not any(gl_root(v)[1] for v in op.operands):
        return None
    if op.name == "tk.tma_store_add" or (op.name == "tk.pipeline_store" and "add" in op.attributes):
        return None  # adds its whole box: zeros past the slice's end (the interpreter checks)
    bound = _SLICE_RAGGED.get(op.name)
    if bound is None:
        return ("a gl slice is read by TMA loads and by ragged register loads, and written by "
                "ragged register stores (clip=True) and TMA adds: this op cannot stop at its edges")
    if bound not in op.attributes:
        return (f"an access through a gl slice must stop at its edges: give {bound}= "
                f"({'fill=value' if bound == 'fill' else 'clip=True'})")
    return None


def _check_gl_slice(op, name, ins, outs, kernel):
    src, out = ins[0], outs[0]
    if not isinstance(src, GL):
        yield f"gl_slice: the source must be a gl, got {_desc(src)}"
        return
    axis = op.attributes["axis"].value
    dims = list(src.dims)
    dims["bdrc".index(axis)] = DYN
    want = GL(src.dtype, *dims)
    if out != want:
        yield f"gl_slice: the result must be {_desc(want)} (the source with a runtime {axis}), got {_desc(out)}"


def _index_use(op) -> bool:
    """The uses an i32 gl allows: one-element loads of an i32, its dims, slices."""
    return op.name in ("tk.dim", "tk.gl_slice", "tk.atomic_add") or is_index_load(op)


def _check_element(op, name, mem, n_idx, bound, scalar="f32"):
    """One element to or from a gl: element coordinates, bounds-checked; an
    f32 with a float gl, an i32 loaded from an i32 gl."""
    if not isinstance(mem, GL):
        yield f"{name}: one element (an f32) moves to or from a gl, got {_desc(mem)}"
    elif (mem.dtype == "i32") != (scalar == "i32"):
        yield (f"{name}: one element of a {mem.dtype} gl is {'an i32' if mem.dtype == 'i32' else 'an f32'}"
               f", got {scalar}")
    elif scalar == "i32" and name != "load":
        yield f"{name}: an i32 gl is read, never written (but by atomic_add)"
    if n_idx != 4:
        yield f"{name}: a gl takes 4 indices, got {n_idx}"
    if "elements" not in op.attributes or bound not in op.attributes:
        yield f"{name}: one element needs element coordinates (elements) and {bound}"


# memory kind -> the register kinds load and store move to and from it
_TRANSFERS = {GL: (RT, RV), ST: (RT,), SV: (RV,)}
_KIND = {GL: "a gl", ST: "an st", SV: "an sv", RT: "an rt", RV: "an rv"}


def _check_transfer(name, mem, reg, n_idx, ragged=False):
    """load (mem -> reg) and store (reg -> mem): kinds, index count, shapes."""
    side = "source" if name == "load" else "destination"
    value = "result" if name == "load" else "x"
    if type(mem) not in _TRANSFERS:
        yield f"{name}: {side} must be a gl, st or sv, got {_desc(mem)}"
        return
    allowed = _TRANSFERS[type(mem)]
    if not isinstance(reg, allowed):
        kinds = " or ".join(_KIND[k] for k in allowed)
        yield f"{name}: {value} must be {kinds} with {_KIND[type(mem)]}, got {_desc(reg)}"
        return
    want = IDX_COUNT[type(mem)]
    if n_idx not in want:
        yield f"{name}: {_KIND[type(mem)]} takes {' or '.join(map(str, want))} indices, got {n_idx}"
    yield from _transfer_shapes(name, mem, reg, ragged)


def _transfer_shapes(name, mem, reg, ragged=False):
    if isinstance(mem, ST):
        if mem.rows % reg.rows or mem.cols % reg.cols:
            yield (f"{name}: {_desc(reg)} is not a subtile of {_desc(mem)} "
                   f"(the st's shape must be a multiple of the rt's)")
    elif isinstance(mem, SV):
        if mem.length % reg.length:
            yield f"{name}: {_desc(reg)} is not a piece of {_desc(mem)} (its length must divide the sv's)"
    else:
        yield from _gl_divides(name, mem, reg, ragged)


def _gl_divides(name, g, t, ragged=False, k=1):
    """A static gl dim must be a multiple of the tile extent used on it (of
    the access width on c for a ragged access: requirements.extents)."""
    from ..lowering.requirements import extents
    extents = dict(zip("rc", extents(t, g.dtype, ragged, k)[2:]))
    for dim, ext in extents.items():
        size = getattr(g, dim)
        if size != DYN and size % ext:
            yield (f"{name}: gl dim {dim} = {size} is not a multiple of the "
                   f"{_desc(t)} extent {ext}")


def _check_group(op, name, ins, outs, kernel):
    """group_load(dst: st|sv, src: gl, 4 idx) and group_store(dst: gl, src: st|sv, 4 idx)."""
    g, s = (ins[1], ins[0]) if name == "group_load" else (ins[0], ins[1])
    shared = "dst" if name == "group_load" else "src"
    if not isinstance(s, (ST, SV)):
        yield f"{name}: {shared} must be an st or sv, got {_desc(s)}"
    elif isinstance(g, GL):
        if g.dtype != s.dtype:
            yield f"{name}: gl and {_desc(s)} must have one dtype, got {g.dtype} and {s.dtype}"
        yield from _gl_divides(name, g, s)
    if len(ins) - 2 != 4:
        yield f"{name}: takes 4 indices (b, d, r, c), got {len(ins) - 2}"
    yield from _check_group_warps(op, name, kernel)


def _check_group_warps(op, name, kernel):
    from mlir import ir
    w = op.attributes["warps"]
    if not (isinstance(w, ir.IntegerAttr) and w.value >= 1):
        yield f"{name}: warps must be >= 1, got {w}"
        return
    total = kernel_warps(kernel)
    if total is not None and total % w.value:
        yield f"{name}: warps = {w.value} must divide the kernel's tk.warps = {total}"


_OTHERS = {
    "load_split": lambda op, name, ins, outs, kernel: _check_split(op, ins[0], outs, len(ins) - 1, "fill"),
    "store_join": lambda op, name, ins, outs, kernel: _check_split(op, ins[0], ins[1:3], len(ins) - 3, "clip"),
    "iota": _check_iota,
    "roll": _check_roll,
    "rand": lambda op, name, ins, outs, kernel: _need(name, "result", outs[0], (RT, RV), "an rt or rv"),
    "where": _check_where,
    "row_pick": _check_pick,
    "col_pick": _check_pick,
    "swap_layout": _check_swap_layout,
    "transpose": _check_transpose,
    "alloc": _check_alloc,
    "atomic_add": _check_atomic_add,
    "load": _check_load,
    "store": _check_store,
    "group_load": _check_group,
    "group_store": _check_group,
    "gl_slice": _check_gl_slice,
}

# mbarrier and TMA rules live with their op family.
from .verify_tma import CHECKS as _TMA_CHECKS  # noqa: E402

_OTHERS.update(_TMA_CHECKS)

# warpgroup mma, its wait and setmaxnreg likewise.
from .verify_warpgroup import CHECKS as _WARPGROUP_CHECKS  # noqa: E402

_OTHERS.update(_WARPGROUP_CHECKS)

# rings, subtiles, pipeline copies and named barriers likewise.
from . import verify_block as block_rules  # noqa: E402

_OTHERS.update(block_rules.CHECKS)
