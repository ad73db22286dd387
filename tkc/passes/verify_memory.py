"""tk-verify rules of the memory ops (docs/tile-ir.md): alloc, load / store
(ragged, split / joined, element accesses), gl_slice, the group
copies and atomic_add. tk-verify (verify.py) calls
`CHECKS[name](op, name, ins, outs, kernel)` per op, and asks
`slice_use_problem` of every op (a gl slice is only used in some ways;
integer gls likewise: verify_ints.py).
"""
from __future__ import annotations

from ..dialect import attrs, gl_root
from ..dialect.kernel import group_warps
from ..dialect.types import DYN, GL, RT, RV, ST, SV, Barrier, view
from ..dtypes import is_fp8
from ..hopper import lanes
from . import verify_block as block_rules
from .verify_messages import describe as _desc, need as _need, op_name as _name, short

SCALAR_ARGS = ("f32", "i32")               # scalar kernel arguments
ELEMENTS = ("f32", "i32", "i64")           # what an element access moves
IDX_COUNT = {GL: (4,), ST: (2,), SV: (0, 1)}  # the indices a register transfer takes, per memory


def _check_atomic_add(op, name, ins, outs, kernel):
    """atomic_add(gl<i32>, scratch sv, b, d, r, c, after gls...) -> i32."""
    from mlir import ir
    if not (isinstance(ins[0], GL) and ins[0].dtype == "i32"):
        yield f"{name}: adds into an i32 gl (a counter), got {_desc(ins[0])}"
    if len(ins) < 6 or not isinstance(ins[1], SV) or ins[1].dtype != "f32":
        yield f"{name}: needs an sv<f32> scratch and 4 coordinates (b, d, r, c)"
        return
    yield from _check_after(op, name, kernel)
    value = op.attributes["value"] if "value" in op.attributes else None
    if not isinstance(value, ir.IntegerAttr):
        yield f"{name}: value must be an integer attribute, got {value}"
    yield from block_rules.check_sync_attributes(op, kernel)


def _check_after(op, name, kernel):
    """`after`: the numbers of gl arguments (attrs.atomic_after)."""
    nums = attrs.atomic_after(op)
    if nums is None:
        yield f"{name}: after must be an array<i64> of gl argument numbers, got {op.attributes['after']}"
        return
    args = list(kernel.regions[0].blocks[0].arguments) if kernel is not None else []
    bad = [f"argument {n} ({short(args[n].type) if 0 <= n < len(args) else 'none'})"
           for n in nums if not (0 <= n < len(args) and isinstance(view(args[n].type), GL))]
    if bad:
        yield f"{name}: after= takes gl arguments, got {', '.join(bad)}"


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
    integer = str(op.results[0].type) in ("i32", "i64") or getattr(outs[0], "dtype", None) == "i32"
    if fill is not None and not (isinstance(fill, ir.FloatAttr) or integer and isinstance(fill, ir.IntegerAttr)):
        yield (f"load: fill must be a float attribute (fill = 0.0 : f32)"
               f"{', or an integer one for an integer result' if integer else ''}, got {fill}")
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
    add = "add" in op.attributes
    fp8 = not add and isinstance(ins[1], RT) and is_fp8(ins[1].dtype) and isinstance(ins[0], GL) \
        and ins[0].dtype == ins[1].dtype
    if "packed" in op.attributes and not (isinstance(ins[1], RT) and ins[1].layout == "row" and (
            fp8 or add and ins[1].dtype == "f32")):
        yield (f"store: packed (red.global.add.v4.f32) adds an f32 row-layout rt into an f32 gl, or "
               f"(st.global.b32) stores an 8-bit one into a gl of its dtype, got {_desc(ins[1])} into "
               f"{_desc(ins[0])}{'' if add or is_fp8(getattr(ins[1], 'dtype', '')) else ' without add'}")
    if "packed" in op.attributes and "c" in gl_root(op.operands[0])[1]:
        yield ("store: packed writes 4 or 16 aligned bytes a lane: not through a gl sliced along its "
               "columns (the slice's start may not be a multiple of 4)")
    yield from _check_ragged(op, "store", ins[0], "clip", len(ins) - 2, ins[1], op.operands[1])


# load's and store's ragged forms: (the attribute, what the access does past the edge)
_RAGGED = {"fill": ("a ragged load", "a gl source", "load"), "clip": ("a ragged store", "a gl destination", "store")}


def _check_ragged(op, name, mem, bound, n_idx, reg, reg_value):
    """The attributes of load/store (bound: fill or clip; elements), then the
    transfer: one f32 element, or a tile or vector."""
    what, needs, verb = _RAGGED[bound]
    if bound in op.attributes and not isinstance(mem, GL):
        yield f"{name}: {bound} ({what}) needs {needs}: shared tiles have no ragged edge"
    if "elements" in op.attributes and bound not in op.attributes and not (
            isinstance(mem, SV) and str(reg_value.type) in ELEMENTS):   # an sv's scalar: in bounds
        yield f"{name}: element coordinates (elements) need {bound}: such a {verb} may reach past the gl's edges"
    if str(reg_value.type) in ELEMENTS:
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
_SLICE_OK = ("tk.dim", "tk.gl_slice", "tk.tma_load", "tk.tma_load_multicast", "tk.pipeline_load")


_SLICE_RAGGED = {"tk.load": "fill", "tk.load_split": "fill", "tk.store": "clip", "tk.store_join": "clip"}


def slice_use_problem(op) -> str | None:
    """Accesses through a gl slice stop at its edges: register loads and stores
    must be ragged (fill/clip); a group copy cannot stop there. A TMA store
    cannot either: it writes its whole box, which the interpreter checks."""
    if op.name in _SLICE_OK or not any(gl_root(v)[1] for v in op.operands):
        return None
    if op.name in ("tk.tma_store", "tk.tma_store_add", "tk.pipeline_store"):
        return None  # its whole box: inside the slice (an add: zeros past it; the interpreter checks)
    bound = _SLICE_RAGGED.get(op.name)
    if bound is None:
        return ("a gl slice is read by TMA loads and by ragged register loads, and written by "
                "ragged register stores (clip=True) and TMA stores: this op cannot stop at its edges")
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


def _check_element(op, name, mem, n_idx, bound, scalar="f32"):
    """One element to or from a gl: element coordinates, bounds-checked; an
    f32 with a float gl, an i32 with an i32 gl, an i64 with an i64 gl."""
    want = mem.dtype if isinstance(mem, GL) and mem.dtype in ("i32", "i64") else "f32"
    if isinstance(mem, SV) and name == "load":   # a shared scalar: in bounds (the interpreter checks)
        if mem.dtype != "f32" or scalar != "f32":
            yield f"load: one element of an sv is an f32 of an f32 sv, got {scalar} of {_desc(mem)}"
        if n_idx != 1 or "elements" not in op.attributes or bound in op.attributes:
            yield "load: one element of an sv needs its index (elements, 1 index) and no fill"
        return
    if not isinstance(mem, GL):
        yield f"{name}: one element (an f32, i32 or i64) moves to or from a gl, got {_desc(mem)}"
    elif scalar != want:
        yield f"{name}: one element of {_desc(mem)} is an {want}, got {scalar}"
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
    if reg.dtype == "i32" and not (isinstance(mem, GL) and mem.dtype == "i32"):
        yield (f"{name}: an i32 {_KIND[type(reg)][3:]} moves to and from an i32 gl (integers do not "
               f"convert in memory), got {_desc(mem)}")
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
    the access width on c for a ragged access: hopper.lanes.extents)."""
    extents = dict(zip("rc", lanes.extents(t, g.dtype, ragged, k)[2:]))
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
    total = group_warps(kernel)
    if total is not None and total % w.value:
        which = "tk.consumer_warps" if "tk.consumer_warps" in kernel.attributes else "tk.warps"
        yield f"{name}: warps = {w.value} must divide the kernel's {which} = {total}"


CHECKS = {
    "load_split": lambda op, name, ins, outs, kernel: _check_split(op, ins[0], outs, len(ins) - 1, "fill"),
    "store_join": lambda op, name, ins, outs, kernel: _check_split(op, ins[0], ins[1:3], len(ins) - 3, "clip"),
    "alloc": _check_alloc,
    "atomic_add": _check_atomic_add,
    "load": _check_load,
    "store": _check_store,
    "group_load": _check_group,
    "group_store": _check_group,
    "gl_slice": _check_gl_slice,
}
