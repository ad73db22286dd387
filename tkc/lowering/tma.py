"""TMA: tensor maps of a kernel, and the lowering of tk.tma_load, tk.tma_store,
tk.tma_store_add and tk.tma_store_wait (docs/tile-ir.md, "Hopper ops").

A TMA copy moves a box described by a tensor map (CUtensorMap), a 128-byte
descriptor the runtime encodes from the argument tensor and passes by value
after the regular kernel parameters (a `__grid_constant__`: an `!llvm.ptr`
parameter with `llvm.byval = !llvm.array<128 x i8>` and `nvvm.grid_constant`,
which PTX receives as `.param .align 64 .b8 [128]`; the instruction takes the
parameter's generic address).

A swizzled st is stored as column panels of S bytes, and a TMA box with an
S-byte swizzle may be at most S bytes wide, so the box is one panel
(rows x S/E) and a tile takes one instruction per panel, each writing its
panel's slice of shared memory (the box rules: tkc/hopper/tma.py). Kernels sharing a gl, box and swizzle
share one tensor map. Coordinates are elements, innermost first: (c, r, d, b).

The box comes from the st's type, so a view (a ring slot, a subtile) moves
its own rows; but a row subtile of a multi-panel st lives in its parent's
panels, `pitch`*S bytes apart (core.Shared), so the shared address of panel
p is offset + p*pitch*S, not the view's own panel size.

`tk.pipeline_load` / `tk.pipeline_store` are block-level copies whose
synchronisation tk-pipeline-staging writes; they reach this lowering only if
that pass did not run, which is an error here rather than a guess.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from mlir import ir
from mlir.dialects import arith, llvm, nvvm

from ..diagnostics import error
from ..dtypes import itemsize
from ..dialect import gl_root, peer_of, walk
from ..dialect.kernel import MAX_PEERS
from ..dialect.attrs import required_int
from ..dialect.types import GL, ST, SV, view
from ..hopper.tma import Box, box, box_problem, shared_kinds
from . import shared
from .barriers import barrier_ptr, i32, lane0
from .core import Global, Shared, rule
from .access import _v  # an int or index Value, as an index Value

TMA_OPS = ("tk.tma_load", "tk.tma_load_multicast", "tk.tma_prefetch", "tk.tma_store", "tk.tma_store_add")


@dataclass(frozen=True)
class TensorMap:
    """One tensor map parameter: gl argument `param`, box (rows, cols), swizzle."""
    param: int
    name: str
    dtype: str
    box: tuple
    swizzle: str
    peer: int = -1   # 0..7: the map of rank `peer`'s buffer of a parallel gl (-1: the argument's)

    @property
    def key(self) -> tuple:
        return (self.param, self.box, self.swizzle, self.peer)

    def manifest(self) -> dict:
        out = {"param": self.param, "name": self.name, "dtype": self.dtype,
               "box": list(self.box), "swizzle": self.swizzle}
        if self.peer >= 0:
            out["peer"] = self.peer
        return out


def operands(op) -> tuple:
    """(st value, gl value) of a TMA op."""
    return (op.operands[0], op.operands[1]) if op.name in ("tk.tma_load", "tk.tma_load_multicast", "tk.tma_prefetch") \
        else (op.operands[1], op.operands[0])


def gl_index(op, value, args) -> int:
    """Which kernel argument the gl operand is, or views (TMA needs its tensor map)."""
    value = gl_root(value)[0]
    for i, a in enumerate(args):
        if a == value:
            return i
    raise error(op, f"{op.name}: the gl must be a kernel argument")


def plan(func_op, names) -> list[TensorMap]:
    """The kernel's tensor maps, in order of first use (`names`: the arguments')."""
    op = getattr(func_op, "operation", func_op)
    args = list(op.regions[0].blocks[0].arguments)
    maps: dict[tuple, TensorMap] = {}
    for inner in walk(op):
        if inner.name in TMA_OPS:
            m = tensor_map(inner, args, names)
            if peer_of(operands(inner)[1]) is None:
                maps.setdefault(m.key, m)
            else:  # through tk.peer: one map per rank's buffer, picked by rank (lowering/peers.py)
                for k in range(MAX_PEERS):
                    p = replace(m, peer=k)
                    maps.setdefault(p.key, p)
    return list(maps.values())


def tensor_map(op, args, names=None) -> TensorMap:
    st_value, gl_value = operands(op)
    st, gl = view(st_value.type), view(gl_value.type)
    if not (isinstance(st, shared_kinds(op.name)) and isinstance(gl, GL)):
        raise error(op, f"{op.name} moves between an st (or, loading, an sv) and a gl, found "
                        f"{st_value.type} and {gl_value.type}")
    problem = box_problem(st)
    if problem:
        raise error(op, f"{op.name}: {problem}")
    b, i = box(st), gl_index(op, gl_value, args)
    return TensorMap(i, names[i] if names else f"arg{i}", gl.dtype, (b.rows, b.cols), b.swizzle)


# ---------------------------------------------------------------- lowering

def _map_arg(lw, op) -> ir.Value:
    """The tensor-map parameter of this op's (gl, box, swizzle)."""
    m = tensor_map(op, list(lw.func_op.regions[0].blocks[0].arguments))
    g = lw.lookup(operands(op)[1])
    if getattr(g, "rank", None) is None:
        return lw.tensor_maps[m.key]
    from .peers import pick, rank_i32
    return pick([lw.tensor_maps[replace(m, peer=k).key] for k in range(MAX_PEERS)], rank_i32(g.rank))


def _origin(op, st: ST | SV, idx, gl: Global) -> list:
    """Element coordinates (c, r, d, b) of the tile's first panel, as i32 (a
    slice's tile coordinates count from its origin in the argument).

    A coordinate computed from a value read from memory (an index table:
    anything at all) is computed in 64 bits and clamped to [-extent, dim]
    (extent: the box's elements along that axis, dim: the argument's) before
    it narrows to i32: a tile past the gl's edges, however far, stays out of
    bounds, and TMA fills it with zeros (a store drops it), as the
    interpreter does, instead of wrapping around into the tensor. Others
    (block indices, loop counters, dims) are in range by construction and
    keep the cheaper 32-bit arithmetic, as does a gl slice's origin (its
    start is checked where the slice is made: tk.gl_slice)."""
    if len(idx) != 4 or not all(isinstance(x, ir.Value) for x in idx):
        raise error(op, f"{op.name} takes 4 index coordinates (b, d, r, c), found {len(idx)}")
    i32t = ir.IntegerType.get_signless(32)
    out = []
    for a, extent in ((3, st.cols), (2, st.rows), (1, 1), (0, 1)):   # c, r, d, b (an sv: one row)
        x, o = idx[a], gl.origin[a]
        if _read_from_memory(op.operands[2 + a]):
            x = arith.muli(x, _v(extent)) if extent != 1 else x
            x = x if isinstance(o, int) and o == 0 else arith.addi(x, _v(o))
            x = arith.minsi(arith.maxsi(x, _v(-extent)), _v(gl.dims[a]))
            out.append(arith.index_cast(i32t, x))
        else:
            x = arith.index_cast(i32t, x)
            x = arith.muli(x, i32(extent)) if extent != 1 else x
            out.append(x if isinstance(o, int) and o == 0 else arith.addi(x, arith.index_cast(i32t, _v(o))))
    return out


def _read_from_memory(value) -> bool:
    """Whether the source IR computes this value from a tk.load of an element."""
    todo, seen = [value], set()
    while todo:
        owner = todo.pop().owner
        src = owner.operation if isinstance(owner, ir.OpView) else owner
        if not isinstance(src, ir.Operation) or src in seen:
            continue   # a block argument: a kernel parameter or a loop counter
        if src.name == "tk.load":
            return True
        seen.add(src)
        todo.extend(src.operands)
    return False


def _panel(origin: list, b: Box, panel: int) -> list:
    """The coordinates of panel `panel`: b.cols columns further per panel."""
    if not panel:
        return origin
    return [arith.addi(origin[0], i32(panel * b.cols)), *origin[1:]]


def _panel_ptr(lw, sh: Shared, b: Box, panel: int) -> ir.Value:
    """The shared address of panel `panel` of `sh`: panels are pitch*S bytes
    apart (b.panel_bytes when the tile is not a row subtile of a wider one)."""
    return shared.pointer(lw, sh, panel * sh.pitch * b.cols * itemsize(sh.view.dtype))


def _tile(op, arg, what: str) -> tuple:
    kinds = shared_kinds(op.name)
    if not (isinstance(arg, Shared) and isinstance(arg.view, kinds)):
        raise error(op, f"{op.name}: {what} must be an st{' or sv' if SV in kinds else ''}, "
                        f"found {type(arg).__name__}")
    return arg, arg.view, box(arg.view)


@rule("tk.tma_load", "tk.tma_load_multicast")
def _tma_load(lw, op, args):
    """A multicast's mask (its last operand, 16 bits) names the CTAs whose
    shared memory each panel lands in, at this CTA's offsets (their barrier
    at bar's offset counts the bytes)."""
    multicast = op.name == "tk.tma_load_multicast"
    sh, st, b = _tile(op, args[0], "the destination")
    if not isinstance(args[1], Global):
        raise error(op, f"{op.name}: the source must be a gl")
    bar_arg = args[-2] if multicast else args[-1]
    tmap, bar = _map_arg(lw, op), barrier_ptr(lw, op, bar_arg)
    idx = args[2:-2] if multicast else args[2:-1]
    mask = arith.index_cast(ir.IntegerType.get_signless(16), args[-1]) if multicast else None
    with lane0(lw):
        origin = _origin(op, st, idx, args[1])
        for p in range(b.panels):
            # The instruction names its destination in the cluster's shared window.
            dst = llvm.addrspacecast(ir.Type.parse("!llvm.ptr<7>"), _panel_ptr(lw, sh, b, p))
            nvvm.cp_async_bulk_tensor_shared_cluster_global(dst, tmap, _panel(origin, b, p), bar, [],
                                                            multicast_mask=mask)
    return []


@rule("tk.tma_prefetch")
def _tma_prefetch(lw, op, args):
    """cp.async.bulk.prefetch.tensor of each panel of the box into L2, by lane 0."""
    _, st, b = _tile(op, args[0], "the box")
    if not isinstance(args[1], Global):
        raise error(op, f"{op.name}: the source must be a gl")
    tmap = _map_arg(lw, op)
    with lane0(lw):
        origin = _origin(op, st, args[2:], args[1])
        for p in range(b.panels):
            nvvm.cp_async_bulk_tensor_prefetch(tmap, _panel(origin, b, p), [])
    return []


@rule("tk.tma_store", "tk.tma_store_add")
def _tma_store(lw, op, args):
    if not isinstance(args[0], Global):
        raise error(op, f"{op.name}: the destination must be a gl")
    sh, st, b = _tile(op, args[1], "the source")
    tmap, idx = _map_arg(lw, op), args[2:]
    add = ir.Attribute.parse("#nvvm.tma_redux_kind<add>")
    with lane0(lw):
        origin = _origin(op, st, idx, args[0])
        for p in range(b.panels):
            src = _panel_ptr(lw, sh, b, p)
            coords = _panel(origin, b, p)
            if op.name == "tk.tma_store_add":
                nvvm.cp_async_bulk_tensor_reduce(tmap, src, add, coords)
            else:
                nvvm.cp_async_bulk_tensor_global_shared_cta(tmap, src, coords)
        nvvm.cp_async_bulk_commit_group()
    return []


@rule("tk.tma_store_wait")
def _tma_store_wait(lw, op, args):
    pending = required_int(op, "pending", 0)
    with lane0(lw):  # writes: the global writes completed, not only the shared reads
        nvvm.cp_async_bulk_wait_group(pending, read=None if "writes" in op.attributes else True)
    # The other lanes may overwrite the st only once lane 0 saw the reads done.
    nvvm.bar_warp_sync(i32(-1))
    return []


@rule("tk.pipeline_load", "tk.pipeline_store")
def _pipeline_copy(lw, op, args):
    raise error(op, f"{op.name} is a block-level, compiler-synchronised TMA copy: it must be "
                    "staged by tk-pipeline-staging (the tile pipeline runs it) and is never "
                    "lowered directly; run the tile pipeline before tk-lower-to-nvvm")
