"""Typed builders for tk ops, so nobody writes generic syntax by hand.

Each builder creates the op at the current insertion point (and location, if
`loc` is not given) and returns its result Value (or the Operation for ops
without results). Result types are inferred from operands where the op
defines them; the builders do not verify: tk-verify does.
"""
from __future__ import annotations

from .types import view

INITS = ("zero", "ones", "neg_infty", "pos_infty")
UNARY = ("copy", "exp", "exp2", "log", "log2", "abs", "relu", "neg",
         "sqrt", "rsqrt", "rcp", "sigmoid", "silu", "tanh", "erf", "gelu", "gelu_tanh")
BINARY = ("add", "sub", "mul", "div", "max", "min")
REDUCE = ("row_max", "row_sum", "col_max", "col_sum")
PICK = ("row_pick", "col_pick")
VEC_REDUCE = ("vec_sum", "vec_max", "vec_min")
BLOCK_REDUCE = ("block_sum", "block_max", "block_min")
CMPS = ("lt", "le", "gt", "ge", "eq", "ne")
BROADCAST = ("add_row", "sub_row", "mul_row", "div_row",
             "add_col", "sub_col", "mul_col", "div_col")
MMA = ("mma_ab", "mma_abt", "mma_atb", "mma_atbt")
IDS = ("laneid", "warpid", "warpgroupid")


def _ty(t):
    """An ir.Type from a view or an ir.Type."""
    return t.mlir() if hasattr(t, "mlir") else t


def create(name: str, results=(), operands=(), attributes=None, loc=None):
    """Create `tk.<name>` (or a full op name) at the current insertion point."""
    from mlir import ir
    full = name if "." in name else f"tk.{name}"
    attrs = {}
    for k, v in (attributes or {}).items():
        if isinstance(v, str):
            v = ir.StringAttr.get(v)
        elif isinstance(v, bool):
            v = ir.BoolAttr.get(v)
        elif isinstance(v, int):
            v = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)
        elif isinstance(v, float):
            v = ir.FloatAttr.get(ir.F64Type.get(), v)
        attrs[k] = v
    return ir.Operation.create(full, results=[_ty(t) for t in results],
                               operands=list(operands), attributes=attrs, loc=loc)


def _one(name, result, operands=(), attributes=None, loc=None):
    return create(name, [result], operands, attributes, loc).result


def init(kind: str, t, loc=None):
    assert kind in INITS, kind
    return _one(kind, t, loc=loc)


def fill(t, value, loc=None):
    """value: an f32 Value."""
    return _one("fill", t, [value], loc=loc)


def unary(name: str, x, t=None, loc=None, fma: float | None = None):
    """t defaults to x's type (copy with another dtype converts). fma (exp,
    exp2 of a tile): the share of its elements computed on the FMA pipe
    instead of the MUFU (lowering/compute.py, ex2_fma)."""
    assert name in UNARY, name
    return _one(name, t or x.type, [x], {"fma": float(fma)} if fma is not None else None, loc=loc)


def binary(name: str, x, y, ieee: bool = False, loc=None):
    """y is a tile/vector of x's type, or an f32 scalar Value. `ieee` (div
    only): IEEE-rounded division instead of the fast default."""
    assert name in BINARY, name
    return _one(name, x.type, [x, y], attributes={"ieee": True} if ieee else None, loc=loc)


def fma(x, y, z, loc=None):
    """x * y + z with one rounding; y, z tiles of x's type or f32 scalars."""
    return _one("fma", x.type, [x, y, z], loc=loc)


def reduce(name: str, x, t=None, init=None, loc=None):
    """row_* gives one element per row (a "col" rv), col_* one per column."""
    assert name in REDUCE, name
    if t is None:
        if init is not None:
            t = init.type
        else:
            rt = view(x.type)
            t = rt.col_vec() if name.startswith("row") else rt.row_vec()
    return _one(name, t, [x] + ([init] if init is not None else []), loc=loc)


def pick(name: str, x, index, loc=None):
    """row_pick: x[:, index] (a "col" rv), col_pick: x[index, :] (a "row" rv)."""
    assert name in PICK, name
    rt = view(x.type)
    t = rt.col_vec() if name == "row_pick" else rt.row_vec()
    return _one(name, t, [x, index], loc=loc)


def roll(x, shift: int, axis: int, loc=None):
    """numpy.roll(x, shift, axis) of an rt (a constant shift)."""
    return _one("roll", x.type, [x], {"shift": shift, "axis": axis}, loc=loc)


def iota(t, axis: int, start=None, loc=None):
    """Each element's index along axis (0: row, 1: column; 0 for an rv), plus
    the f32 value `start` when given."""
    return _one("iota", t, [] if start is None else [start], {"axis": axis}, loc=loc)


def where(cmp: str, a, b, x, y, t, loc=None):
    """x where `a cmp b`, else y, elementwise; t is the result type."""
    assert cmp in CMPS, cmp
    return _one("where", t, [a, b, x, y], {"cmp": cmp}, loc=loc)


def rand(t, seed, offset, base, stride, loc=None):
    """Uniform [0, 1) numbers: element (i, j) is number base + i * stride + j."""
    return _one("rand", t, [seed, offset, base, stride], loc=loc)


def vec_reduce(name: str, x, loc=None):
    """The sum, max or min of a whole rv, as an f32 scalar (an i32 of an i32 rv)."""
    from mlir import ir
    assert name in VEC_REDUCE, name
    t = ir.IntegerType.get_signless(32) if view(x.type).dtype == "i32" else ir.F32Type.get()
    return _one(name, t, [x], loc=loc)


def block_reduce(name: str, x, scratch, loc=None):
    """The sum, max or min over the block's warps of each warp's f32 x (an
    rt, rv or f32 scalar), in every warp; scratch: the sv<f32> the values
    pass through (tk.irdl.mlir)."""
    assert name in BLOCK_REDUCE, name
    return _one(name, x.type, [x, scratch], loc=loc)


def broadcast(name: str, x, v, loc=None):
    assert name in BROADCAST, name
    return _one(name, x.type, [x, v], loc=loc)


def mma(name: str, a, b, c, loc=None):
    assert name in MMA, name
    return _one(name, c.type, [a, b, c], loc=loc)


def swap_layout(x, loc=None):
    rt = view(x.type)
    return _one("swap_layout", rt.with_(layout="col" if rt.layout == "row" else "row"), [x], loc=loc)


def transpose(x, layout: str | None = None, loc=None):
    """x.T, in x's layout unless `layout` names the other (tk-layout-selection's choice)."""
    rt = view(x.type)
    return _one("transpose", rt.with_(rows=rt.cols, cols=rt.rows, layout=layout or rt.layout), [x], loc=loc)


def alloc(t, stages: int | None = None, loc=None):
    """A shared buffer; with `stages`, a ring of that many slots (tk.stage picks one)."""
    return _one("alloc", t, attributes=None if stages is None else {"stages": stages}, loc=loc)


def stage(ring, i, loc=None):
    """Slot `i` (an index Value) of a ring."""
    return _one("stage", ring.type, [ring, i], loc=loc)


def subtile(t, x, i, j, loc=None):
    """The part of st/rt `x` of type `t` at (i, j), in units of t's shape."""
    return _one("subtile", t, [x, i, j], loc=loc)


def pipeline_load(dst, src, idx, loc=None):
    return create("pipeline_load", [], [dst, src, *idx], loc=loc)


def pipeline_store(dst, src, idx, add: bool = False, loc=None):
    from mlir import ir
    attrs = {"add": ir.UnitAttr.get()} if add else {}
    return create("pipeline_store", [], [dst, src, *idx], attrs, loc=loc)


def _fill_attr(fill, t):
    """A load's fill: an f32, or for an integer result (i32, i64, an i32 rt
    or rv) an i64 integer (exact: an f32 holds integers only up to 2^24)."""
    from mlir import ir
    t = _ty(t)
    v = view(t)
    if str(t) in ("i32", "i64") or (v is not None and v.dtype == "i32"):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(fill))
    return ir.FloatAttr.get_f32(float(fill))


def load(t, src, idx=(), fill: float | int | None = None, elements: bool = False, loc=None):
    """fill: a ragged load from a gl (what lies outside reads as fill; an int
    gives an integer attribute, for integer results); elements: idx's r and
    c count elements, not tiles."""
    from mlir import ir
    attrs = {"fill": _fill_attr(fill, t)} if fill is not None else {}
    if elements:
        attrs["elements"] = ir.UnitAttr.get()
    return _one("load", t, [src, *idx], attrs, loc=loc)


def load_split(t, src, idx, fill: float | None = None, elements: bool = False, loc=None):
    """(even, odd): columns 2j and 2j + 1 of the gl tile of twice t's width."""
    from mlir import ir
    attrs = {"fill": ir.FloatAttr.get_f32(float(fill))} if fill is not None else {}
    if elements:
        attrs["elements"] = ir.UnitAttr.get()
    op = create("load_split", [t, t], [src, *idx], attrs, loc=loc)
    return op.results[0], op.results[1]


def store_join(dst, even, odd, idx, clip: bool = False, elements: bool = False, loc=None):
    from mlir import ir
    attrs = {k: ir.UnitAttr.get() for k, on in (("clip", clip), ("elements", elements)) if on}
    return create("store_join", [], [dst, even, odd, *idx], attrs, loc=loc)


def store(dst, x, idx=(), clip: bool = False, elements: bool = False, add: bool = False,
          deinterleave: bool = False, packed: bool = False, loc=None):
    """clip: a ragged store to a gl (what lies outside is not written); add:
    atomically add into the gl's values (red.global.add) instead of writing;
    deinterleave: an f32 rt into an f32 st, each 8-column group as its even
    columns, then its odd ones (stmatrix)."""
    from mlir import ir
    attrs = {k: ir.UnitAttr.get() for k, on in (("clip", clip), ("elements", elements), ("add", add),
                                                 ("deinterleave", deinterleave), ("packed", packed)) if on}
    return create("store", [], [dst, x, *idx], attrs, loc=loc)


def group_load(dst, src, idx, warps: int, loc=None):
    return create("group_load", [], [dst, src, *idx], {"warps": warps}, loc=loc)


def group_store(dst, src, idx, warps: int, loc=None):
    return create("group_store", [], [dst, src, *idx], {"warps": warps}, loc=loc)


def _index():
    from mlir import ir
    return ir.IndexType.get()


def worker_id(name: str, loc=None):
    assert name in IDS, name
    return _one(name, _index(), loc=loc)


def block_idx(dim: str, loc=None):
    return _one("block_idx", _index(), attributes={"dim": dim}, loc=loc)


def grid_dim(dim: str, loc=None):
    return _one("grid_dim", _index(), attributes={"dim": dim}, loc=loc)


def ragged_item(count, t, groups, height, span, rows: int, loc=None):
    """(group, item in it, its row blocks, total) of item t over ragged groups
    (docs/tile-ir.md, "Block level": tk.ragged)."""
    op = create("ragged_item", [_index()] * 4, [count, t, groups, height, span], {"rows": rows}, loc=loc)
    return tuple(op.results)


def gl_slice(t, g, axis: str, start, size, loc=None):
    """The gl view of type t: elements start .. start+size-1 of g along axis."""
    return _one("gl_slice", t, [g, start, size], {"axis": axis}, loc=loc)


def peer(g, rank, loc=None):
    """The gl over rank `rank`'s buffer of parallel gl argument g (same type)."""
    return _one("peer", g.type, [g, rank], loc=loc)


def rank(loc=None):
    return _one("rank", _index(), loc=loc)


def world_size(loc=None):
    return _one("world_size", _index(), loc=loc)


def signal(flags, idx, value, loc=None):
    """Lane 0 adds index Value `value` to flags[idx] (release, system scope)."""
    return create("signal", [], [flags, *idx, value], loc=loc)


def wait_signal(flags, idx, value, loc=None):
    """The warp spins until flags[idx] >= index Value `value` (acquire, system scope)."""
    return create("wait_signal", [], [flags, *idx, value], loc=loc)


def dim(g, axis: str, loc=None):
    return _one("dim", _index(), [g], {"axis": axis}, loc=loc)


def sync(id: int | None = None, warps: int | None = None, arrive: bool = False, loc=None):
    """bar.sync: the whole block, or the named barrier `id` for `warps` warps;
    arrive: bar.arrive (the calling warps count toward it and go on)."""
    from mlir import ir
    attrs = {k: v for k, v in (("id", id), ("warps", warps)) if v is not None}
    if arrive:
        attrs["arrive"] = ir.UnitAttr.get()
    return create("sync", attributes=attrs, loc=loc)


# ---- Hopper: mbarriers, TMA, warpgroup mma, register reallocation

WARPGROUP_MMA = ("warpgroup_mma_ab", "warpgroup_mma_abt",
                 "warpgroup_mma_atb", "warpgroup_mma_atbt")


def init_barrier(bar, count: int, loc=None):
    return create("init_barrier", [], [bar], {"count": count}, loc=loc)


def arrive(bar, count: int = 1, loc=None):
    return create("arrive", [], [bar], {"count": count}, loc=loc)


def expect_bytes(bar, nbytes: int, loc=None):
    return create("expect_bytes", [], [bar], {"bytes": nbytes}, loc=loc)


def wait(bar, phase, loc=None):
    """phase: an index Value (its parity is waited on)."""
    return create("wait", [], [bar, phase], loc=loc)


def fence_async(loc=None):
    return create("fence_async", loc=loc)


def tma_load(dst, src, idx, bar, loc=None):
    return create("tma_load", [], [dst, src, *idx, bar], loc=loc)


def tma_load_multicast(dst, src, idx, bar, mask, loc=None):
    """tma_load into every CTA of the cluster in index Value `mask`."""
    return create("tma_load_multicast", [], [dst, src, *idx, bar, mask], loc=loc)


def tma_store_cta(dst, src, cta, bar, loc=None):
    """src's bytes into dst's place in CTA `cta` (an index Value), completing on bar's there."""
    return create("tma_store_cta", [], [dst, src, cta, bar], loc=loc)


def cluster_ctarank(loc=None):
    return _one("cluster_ctarank", _index(), loc=loc)


def cluster_idx(dim: str, loc=None):
    return _one("cluster_idx", _index(), attributes={"dim": dim}, loc=loc)


def cluster_sync(loc=None):
    return create("cluster_sync", loc=loc)


def arrive_cta(bar, cta, count: int = 1, loc=None):
    """Arrive on the barrier at bar's offset in CTA `cta` (an index Value) of the cluster."""
    return create("arrive_cta", [], [bar, cta], {"count": count}, loc=loc)


def tma_prefetch(box, src, idx, loc=None):
    return create("tma_prefetch", [], [box, src, *idx], loc=loc)


def tma_store(dst, src, idx, add: bool = False, loc=None):
    return create("tma_store_add" if add else "tma_store", [], [dst, src, *idx], loc=loc)


def tma_store_wait(pending: int = 0, writes: bool = False, loc=None):
    """Wait until all but `pending` of this thread's TMA stores have read
    their tiles; writes: until their global writes have completed."""
    from mlir import ir
    attrs = {"pending": pending, **({"writes": ir.UnitAttr.get()} if writes else {})}
    return create("tma_store_wait", [], [], attrs, loc=loc)


def atomic_add(dst, scratch, idx, after=(), value: int = 1, warps: int | None = None, loc=None):
    """The old value of gl `dst` at element idx (b, d, r, c), `value` added
    once by the block, or by the group of `warps` warps (tk.irdl.mlir: the
    group, the ordering). `after`: the gl values (arguments or slices of
    them) whose writes come first, recorded as their argument numbers."""
    from mlir import ir

    from . import gl_root
    i32 = ir.IntegerType.get_signless(32)
    attrs = {"value": value, **({"warps": warps} if warps is not None else {})}
    if after:
        attrs["after"] = ir.DenseI64ArrayAttr.get(sorted({gl_root(g)[0].arg_number for g in after}))
    return _one("atomic_add", i32, [dst, scratch, *idx], attrs, loc=loc)


def warpgroup_mma(name: str, a, b, c, negate: bool = False, when=None, loc=None,
                  k_order: str | None = None):
    """d = a @ b + c (negate: d = -(a @ b) + c), transposes as `name` says;
    when (an i1 Value): only where it holds, else d = c (an empty group);
    k_order: the K order of an 8-bit register a (hopper/fp8_lanes.py)."""
    assert name in WARPGROUP_MMA, name
    attrs = {**({"negate": True} if negate else {}), **({"k_order": k_order} if k_order else {})}
    return _one(name, c.type, [a, b, c, *([when] if when is not None else [])], attrs or None, loc=loc)


def warpgroup_mma_wait(tiles, pending: int = 0, loc=None):
    """Returns the op; its results are the waited-on tiles, in order."""
    return create("warpgroup_mma_wait", [t.type for t in tiles], list(tiles),
                  {"pending": pending}, loc=loc)


def set_registers(increase: bool, count: int, loc=None):
    return create("increase_registers" if increase else "decrease_registers", [], [],
                  {"count": count}, loc=loc)
