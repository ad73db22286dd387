"""Typed readers of a kernel function's attributes (docs/tile-ir.md, "Kernel
functions"): tk.arg_names, tk.dim_names, tk.divisible, tk.warps,
tk.blocks_per_sm, tk.persistent, tk.ragged, tk.cluster, and which gl arguments the kernel writes.

One reader per attribute, used by tk-verify, the passes, the lowering and the
interpreter. The readers of names raise a located TkcError on a malformed
attribute (the interpreter and the lowering may run without tk-verify), with
the message tk-verify gives: both come from the `check_*` generators here.
MLIR is imported inside the functions: importing this module needs none.
"""
from __future__ import annotations

from ..diagnostics import TkcError, error
from . import gl_root, walk
from .attrs import int_attr
from .types import DYN, GL, safe_view, view


# ---------------------------------------------------------------- names

def check_arg_names(name, attr, args):
    """tk.arg_names: one distinct string per argument."""
    if not strings(attr, len(args)):
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
    for message in check_arg_names(f"kernel @{kernel.attributes['sym_name'].value}", attr, args):
        raise error(kernel, message)
    return [a.value for a in attr]


def check_dim_names(name, attr, args):
    """tk.dim_names: per argument 4 strings for a gl, none for a scalar; a name
    ("" = unnamed) only on a runtime dim, since it is checked at launch."""
    from mlir import ir
    if not (isinstance(attr, ir.ArrayAttr) and len(attr) == len(args)):
        yield (f"{name}: tk.dim_names must be an array of {len(args)} arrays "
               f"(one per argument), got {attr}")
        return
    for i, (entry, arg) in enumerate(zip(attr, args)):
        g = safe_view(arg)
        n = 4 if isinstance(g, GL) else 0
        if not strings(entry, n):
            yield (f"{name}: tk.dim_names entry {i} must be an array of {n} strings "
                   f"({'one per gl dim' if n else 'a scalar has no dims'}), got {entry}")
            continue
        for axis, dim_name, size in zip("bdrc", entry, g.dims if n else ()):
            if dim_name.value and size != DYN:
                yield (f"{name}: argument {i} dim {axis} is static ({size}) but named "
                       f"{dim_name.value!r}: names are for runtime dims")


def check_divisible(name, attr, kernel):
    """tk.divisible: {key = positive int}; a key is a dim name of tk.dim_names
    ("K") or an argument's dim ("a.c", the grid language's spelling). A
    relation {Hq = "Hkv"} pairs two dim names: Hq a multiple of Hkv."""
    from mlir import ir
    if not isinstance(attr, ir.DictAttr):
        yield f"{name}: tk.divisible must be a dictionary {{name = multiple}}, got {attr}"
        return
    names = {n for dims in lenient(dim_names, kernel) for n in dims if n}
    known = names | {f"{a}.{axis}" for a in lenient(gl_arg_names, kernel) for axis in "bdrc"}
    for entry in attr:
        if isinstance(entry.attr, ir.StringAttr):
            if entry.name not in names or entry.attr.value not in names:
                yield (f"{name}: tk.divisible[{entry.name}] = {entry.attr} relates two dims: "
                       f"both must be dim names (of tk.dim_names: {sorted(names)})")
            continue
        if not positive_int(entry.attr):
            yield f"{name}: tk.divisible[{entry.name}] must be a positive integer, got {entry.attr}"
        if entry.name not in known:
            yield (f"{name}: tk.divisible names {entry.name!r}, which is neither a dim name "
                   "nor a gl argument's dim (like a.c)")


def gl_arg_names(kernel) -> dict[str, int]:
    """{name: argument index} of a kernel's gl arguments."""
    args = kernel.regions[0].blocks[0].arguments
    return {n: i for i, (n, a) in enumerate(zip(arg_names(kernel), args))
            if isinstance(safe_view(a), GL)}


def lenient(reader, kernel):
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
    for message in check_divisible(name, kernel.attributes["tk.divisible"], kernel):
        raise error(kernel, message)
    return {e.name: e.attr.value for e in kernel.attributes["tk.divisible"]}


def dim_names(kernel) -> list[list[str | None]]:
    """Per argument of a kernel, its dims' names (None = unnamed; [] for a scalar),
    from tk.dim_names (every dim unnamed without it). A malformed attribute is a
    located TkcError: the interpreter and the lowering may run without tk-verify."""
    args = kernel.regions[0].blocks[0].arguments
    attr = kernel.attributes["tk.dim_names"] if "tk.dim_names" in kernel.attributes else None
    if attr is None:
        return [[None] * 4 if isinstance(safe_view(a), GL) else [] for a in args]
    name = f"kernel @{kernel.attributes['sym_name'].value}"
    for message in check_dim_names(name, attr, args):
        raise error(kernel, message)
    return [[s.value or None for s in entry] for entry in attr]


def positive_int(attr) -> bool:
    from mlir import ir
    return isinstance(attr, ir.IntegerAttr) and attr.value > 0


def strings(attr, n: int) -> bool:
    from mlir import ir
    return (isinstance(attr, ir.ArrayAttr) and len(attr) == n
            and all(isinstance(a, ir.StringAttr) for a in attr))


# ---------------------------------------------------------------- parallel gls

MAX_PEERS = 8   # peer buffers a parallel gl passes (an NVLink clique of one host)


def _gl_numbers(name, key, attr, args):
    """The problems of kernel attribute `key`, an array<i64> of distinct gl
    argument numbers."""
    from mlir import ir
    nums = list(ir.DenseI64ArrayAttr(attr)) if isinstance(attr, ir.DenseI64ArrayAttr) else None
    if nums is None:
        yield f"{name}: {key} must be an array<i64> of gl argument numbers, got {attr}"
        return
    if len(set(nums)) != len(nums):
        yield f"{name}: {key} lists an argument twice: {nums}"
    for n in nums:
        if not (0 <= n < len(args) and isinstance(safe_view(args[n]), GL)):
            yield f"{name}: {key} names argument {n}, which is not a gl argument"


def check_peers(name, attr, args):
    """tk.peers: the distinct numbers of gl arguments that are parallel gls."""
    yield from _gl_numbers(name, "tk.peers", attr, args)


def parallel_args(kernel) -> list[int]:
    """The argument numbers of the kernel's parallel gls (tk.peers), in order;
    a malformed attribute is a located TkcError."""
    if kernel is None or "tk.peers" not in kernel.attributes:
        return []
    attr = kernel.attributes["tk.peers"]
    for message in check_peers(f"kernel @{kernel.attributes['sym_name'].value}", attr,
                               kernel.regions[0].blocks[0].arguments):
        raise error(kernel, message)
    from mlir import ir
    return sorted(ir.DenseI64ArrayAttr(attr))


def check_strided(name, attr, args, parallel=()):
    """tk.strided: the distinct numbers of gl arguments whose b, d, r strides
    are run-time parameters (none of them a parallel gl)."""
    from mlir import ir
    yield from _gl_numbers(name, "tk.strided", attr, args)
    if isinstance(attr, ir.DenseI64ArrayAttr):
        for n in sorted(set(ir.DenseI64ArrayAttr(attr)) & set(parallel)):
            yield f"{name}: tk.strided names argument {n}, a parallel gl (a pgl's buffers are contiguous)"


def strided_args(kernel) -> list[int]:
    """The argument numbers of the kernel's strided gls (tk.strided), in order;
    a malformed attribute is a located TkcError."""
    if kernel is None or "tk.strided" not in kernel.attributes:
        return []
    args = kernel.regions[0].blocks[0].arguments
    for message in check_strided(f"kernel @{kernel.attributes['sym_name'].value}",
                                 kernel.attributes["tk.strided"], args, parallel_args(kernel)):
        raise error(kernel, message)
    from mlir import ir
    return sorted(ir.DenseI64ArrayAttr(kernel.attributes["tk.strided"]))


# ---------------------------------------------------------------- launch shape

def kernel_warps(kernel) -> int | None:
    """The kernel's tk.warps (default 1), None when it is not a positive int."""
    if kernel is None or "tk.warps" not in kernel.attributes:
        return 1 if kernel is not None else None
    a = kernel.attributes["tk.warps"]
    return a.value if positive_int(a) else None


def group_warps(kernel) -> int | None:
    """The warps a group op's groups (group_load, group_store: warps w*n ..
    w*n+n-1) must tile: tk.consumer_warps where tk-pipeline-staging added a
    producer warpgroup (the author's code runs on the consumers alone), else
    tk.warps; None when malformed."""
    if kernel is not None and "tk.consumer_warps" in kernel.attributes:
        a = kernel.attributes["tk.consumer_warps"]
        return a.value if positive_int(a) else None
    return kernel_warps(kernel)


def kernel_blocks(kernel) -> int:
    """tk.blocks_per_sm of the kernel (default 1; 1 too when malformed, which
    the shared-memory plan reports)."""
    b = int_attr(kernel, "tk.blocks_per_sm") if kernel is not None else None
    return b if isinstance(b, int) and 1 <= b <= 32 else 1


def blocks_per_sm(func_op) -> int:
    """tk.blocks_per_sm of the kernel (default 1); a located error when it is
    not an integer in 1..32."""
    op = getattr(func_op, "operation", func_op)
    if "tk.blocks_per_sm" not in op.attributes:
        return 1
    a = op.attributes["tk.blocks_per_sm"]
    n = int_attr(op, "tk.blocks_per_sm") or 0
    if not 1 <= n <= 32:
        raise error(op, f"tk.blocks_per_sm must be an integer in 1..32, found {a}")
    return n


MAX_CLUSTER = 8   # CTAs a cluster: the portable size every launch may use


def check_cluster(fn):
    """tk.cluster = array<i64: cx, cy, cz>: messages for what is wrong. Each
    dim >= 1, at most MAX_CLUSTER CTAs; persistent or ordered (tk.order) only
    in clusters along x, without ragged or zigzag items (tk-grid-ordering deals
    a cluster's CTAs one item along x); grid dims written
    as constants are multiples of the cluster's (the runtime checks the rest
    at launch)."""
    from mlir import ir
    a = fn.attributes["tk.cluster"]
    dims = list(ir.DenseI64ArrayAttr(a)) if isinstance(a, ir.DenseI64ArrayAttr) else None
    if dims is None or len(dims) != 3 or any(d < 1 for d in dims):
        yield f"tk.cluster must be array<i64: cx, cy, cz> with each dim >= 1, got {a}"
        return
    if dims[0] * dims[1] * dims[2] > MAX_CLUSTER:
        yield f"tk.cluster {dims}: a cluster holds at most {MAX_CLUSTER} CTAs, got {dims[0] * dims[1] * dims[2]}"
    remapped = [a for a in ("tk.persistent", "tk.order") if a in fn.attributes]
    if remapped and dims[1:] != [1, 1]:
        yield (f"tk.cluster {dims} with {remapped[0]}: tk-grid-ordering gives a cluster's CTAs one "
               f"work item along x only (cluster (n, 1, 1))")
    if remapped and ("tk.ragged" in fn.attributes or is_zigzag(fn)):
        yield ("tk.cluster is not supported with ragged or zigzag work items yet: their items are "
               "not dealt to a cluster's CTAs in pairs")
    grid = fn.attributes["tk.grid"] if "tk.grid" in fn.attributes else None
    if strings(grid, 3):
        for axis, g, c in zip("xyz", (s.value for s in grid), dims):
            if g.strip().isdigit() and int(g) % c:
                yield f"tk.cluster {dims}: grid dim {axis} = {g} is not a multiple of the cluster's {c}"


def cluster_shape(fn) -> tuple:
    """tk.cluster of the kernel as (cx, cy, cz), (1, 1, 1) without it; a
    located error when it is malformed."""
    op = getattr(fn, "operation", fn)
    if op is None or "tk.cluster" not in op.attributes:
        return (1, 1, 1)
    for message in check_cluster(op):
        raise error(op, message)
    from mlir import ir
    return tuple(ir.DenseI64ArrayAttr(op.attributes["tk.cluster"]))


def is_zigzag(fn) -> bool:
    """Whether the kernel's tk.persistent is "zigzag" (its work items dealt
    in rounds, forwards and backwards) rather than the unit attribute."""
    from mlir import ir
    a = fn.attributes["tk.persistent"] if "tk.persistent" in fn.attributes else None
    return isinstance(a, ir.StringAttr) and a.value == "zigzag"


def check_ragged(fn):
    """tk.ragged = {count = "name", rows = R}: messages for what is wrong. The
    work items are ragged groups (docs/tile-ir.md): count names an i32 gl
    argument the kernel does not write (producer and consumers decode the
    same items from it), R >= 1, and the kernel is persistent (its item loop
    ends at the live total, known on the device only)."""
    from mlir import ir
    a = fn.attributes["tk.ragged"]
    if not isinstance(a, ir.DictAttr) or "count" not in a or "rows" not in a or len(a) != 2 \
            or not isinstance(a["count"], ir.StringAttr) or not isinstance(a["rows"], ir.IntegerAttr):
        yield f"tk.ragged must be {{count = \"<gl argument>\", rows = <int>}}, got {a}"
        return
    name, rows = a["count"].value, ir.IntegerAttr(a["rows"]).value
    if rows < 1:
        yield f"tk.ragged: rows must be >= 1, got {rows}"
    if "tk.persistent" not in fn.attributes:
        yield "tk.ragged needs a persistent kernel (tk.persistent): its blocks loop over the live items"
    try:
        gls = gl_arg_names(fn)
    except TkcError:
        return   # tk.arg_names is reported on its own
    i = gls.get(name)
    if i is None:
        yield f"tk.ragged: count must name a gl argument of the kernel, got {name!r}"
    elif view(fn.regions[0].blocks[0].arguments[i].type).dtype != "i32":
        yield f"tk.ragged: count {name!r} must be an i32 gl, got {fn.regions[0].blocks[0].arguments[i].type}"
    elif i in written(fn):
        yield (f"tk.ragged: the kernel writes its count gl {name!r}, but every block reads it to "
               "find its work items")


def ragged_of(fn):
    """(the count gl argument, rows) of a kernel's tk.ragged, or None."""
    if "tk.ragged" not in fn.attributes:
        return None
    bad = next(check_ragged(fn), None)
    if bad:
        raise error(fn, bad)
    a = fn.attributes["tk.ragged"]
    from mlir import ir
    i = gl_arg_names(fn)[a["count"].value]
    return fn.regions[0].blocks[0].arguments[i], ir.IntegerAttr(a["rows"]).value


# ---------------------------------------------------------------- gl arguments

# ops that write a gl: (op name, operand index of the gl); an atomic_add's
# add is a write too (the launch's overlap check, tk.inplace, tk.ragged's count)
WRITES = {"tk.store": 0, "tk.group_store": 0, "tk.tma_store": 0, "tk.tma_store_add": 0,
          "tk.pipeline_store": 0, "tk.store_join": 0, "tk.signal": 0, "tk.atomic_add": 0}


def written(op) -> set[int]:
    """The indices of the gl arguments the kernel writes."""
    args = op.regions[0].blocks[0].arguments
    return {arg_index(inner, inner.operands[WRITES[inner.name]], args)
            for inner in walk(op) if inner.name in WRITES
            and isinstance(view(inner.operands[WRITES[inner.name]].type), GL)}


def arg_index(op, value, args) -> int:
    """Which kernel argument the gl operand `value` is, or is a slice of."""
    from mlir import ir
    value = gl_root(value)[0]
    if isinstance(value, ir.BlockArgument):
        for i, a in enumerate(args):
            if a == value:
                return i
    raise error(op, "a gl operand must be a kernel argument "
                    "(gl values cannot be created or carried through loops)")
