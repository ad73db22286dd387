"""Lowering of worker and grid ops: who am I, how big is the grid, sync.

Ids come from the PTX special registers as i32 and become `index` values
(unsigned casts: they are never negative). laneid and warpid derive from
threadIdx.x (tid % 32, tid / 32), read once per kernel by the Lowering:
blocks are one-dimensional, so this equals %laneid and saves a register read.
With `tk.uniform_ids = "warpgroup"` warpgroupid, with "warp" warpid too, take
the warp id broadcast from lane 0 (shfl.sync.idx), which ptxas knows to be
the same in every lane (tkc.kernel's uniform_ids).
`tk.sync` is `bar.sync 0` for the block, or with `id` / `warps` the named
barrier `bar.sync id, 32*warps` (docs/tile-ir.md, "Block level"); one warp's
is `bar.warp.sync`; with `arrive`, `bar.arrive id, 32*warps`.
`tk.atomic_add` meets like tk.sync around one thread's atom.add.
`tk.ragged_item` walks the groups' counts in a loop (every lane the same
addresses: broadcast loads), branch-free: selects carry the item's group.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, nvvm, scf

from ..diagnostics import error
from ..hopper.sync import checked_sync_group
from .access import _gl_ptr, _load_piece, _sh_ptr, _v
from .core import Global, rule
from .global_memory import _gl_tile_origin

_AXES = ("b", "d", "r", "c")
_SREGS = {
    "tk.block_idx": {"x": nvvm.read_ptx_sreg_ctaid_x, "y": nvvm.read_ptx_sreg_ctaid_y,
                     "z": nvvm.read_ptx_sreg_ctaid_z},
    "tk.grid_dim": {"x": nvvm.read_ptx_sreg_nctaid_x, "y": nvvm.read_ptx_sreg_nctaid_y,
                    "z": nvvm.read_ptx_sreg_nctaid_z},
}


@rule("tk.laneid")
def _laneid(lw, op, args):
    return [lw.lane()]


@rule("tk.warpid")
def _warpid(lw, op, args):
    return [lw.warp()]


@rule("tk.warpgroupid")
def _warpgroupid(lw, op, args):
    def build():
        warp = lw.warp() if lw.uniform_ids() is None else \
            arith.index_cast(ir.IndexType.get(), lw.uniform_warp_i32())
        return arith.divui(warp, _index(4))
    return [lw.once(("warpgroup",), build)]


@rule("tk.block_idx", "tk.grid_dim")
def _grid(lw, op, args):
    dim = _str_attr(op, "dim")
    read = _SREGS[op.name].get(dim)
    if read is None:
        raise error(op, f"{op.name}: dim must be \"x\", \"y\" or \"z\", found {dim!r}")
    # In the entry block, once: ctaid/nctaid are the same everywhere in the kernel.
    return [lw.once((op.name, dim), lambda: arith.index_castui(
        ir.IndexType.get(), read(ir.IntegerType.get_signless(32))))]


@rule("tk.dim")
def _dim(lw, op, args):
    g = args[0]
    if not isinstance(g, Global):
        raise error(op, f"tk.dim takes a gl, found {op.operands[0].type}")
    axis = _str_attr(op, "axis")
    if axis not in _AXES:
        raise error(op, f"tk.dim: axis must be one of b, d, r, c, found {axis!r}")
    d = g.bounds[_AXES.index(axis)]
    return [d if isinstance(d, ir.Value) else _index(d)]


@rule("tk.ragged_item")
def _ragged_item(lw, op, args):
    """scf.for over the groups j carrying (z, start, blocks, acc): group j
    has h = min(max(ceil(count[j] / rows), 0), height) row blocks, its items
    are acc .. end = acc + span * h; t lies past it when end <= t (then z
    counts it and start moves to end) and in it when acc <= t < end."""
    g = args[0]
    if not isinstance(g, Global):
        raise error(op, f"tk.ragged_item takes a gl, found {op.operands[0].type}")
    t, groups, height, span = (_v(a) for a in args[1:])
    rows = ir.IntegerAttr(op.attributes["rows"]).value
    ule = arith.CmpIPredicate.ule
    zero = _index(0)
    loop = scf.ForOp(zero, groups, _index(1), [zero, zero, zero, zero])
    with ir.InsertionPoint(loop.body):
        j = loop.induction_variable
        z, start, blocks, acc = loop.inner_iter_args
        ok = arith.cmpi(arith.CmpIPredicate.ult, j, _v(g.bounds[3]))
        p = _gl_ptr(g, _gl_tile_origin(g, (0, 0, 0, j), 1, 1))
        n = _load_piece(arith.select(ok, p, g.ptr), "i32", 1, ok, 0)[0]
        n = arith.maxsi(arith.index_cast(ir.IndexType.get(), n), zero)
        h = arith.minui(arith.divui(arith.addi(n, _index(rows - 1)), _index(rows)), height)
        end = arith.addi(acc, arith.muli(span, h))
        past = arith.cmpi(ule, end, t)
        here = arith.andi(arith.cmpi(ule, acc, t), arith.xori(past, arith.constant(ir.IntegerType.get_signless(1), 1)))
        scf.YieldOp([arith.addi(z, arith.select(past, _index(1), zero)), arith.select(past, end, start),
                     arith.select(here, h, blocks), end])
    z, start, blocks, total = loop.results
    return [z, arith.subi(t, start), blocks, total]


@rule("tk.sync")
def _sync(lw, op, args):
    """Plain: bar.sync 0 for the whole block. With `id` / `warps`: the named
    barrier `bar.sync id, 32*warps` (warps defaults to the kernel's), which
    lets a warpgroup synchronise without stopping the others."""
    if "arrive" in op.attributes:  # count toward the barrier, do not wait; memory ordered
        ident, warps = checked_sync_group(op, lw.warps)
        llvm.inline_asm(None, [], f"bar.arrive {ident}, {32 * warps};", "~{memory}",
                        has_side_effects=True)
        return []
    _barrier(lw, op)
    return []


def _barrier(lw, op) -> None:
    """bar.sync of op's group (tk.sync's id / warps attributes)."""
    if "id" not in op.attributes and "warps" not in op.attributes:
        nvvm.barrier0()  # bar.sync 0: every thread of the block
        return
    ident, warps = checked_sync_group(op, lw.warps)
    i32 = ir.IntegerType.get_signless(32)
    if warps == 1:  # one warp: its lanes converge (no named barrier needed)
        nvvm.bar_warp_sync(arith.constant(i32, -1))
        return
    nvvm.barrier(None, barrier_id=arith.constant(i32, ident),
                 number_of_threads=arith.constant(i32, 32 * warps))


@rule("tk.atomic_add")
def _atomic_add(lw, op, args):
    """The group (tk.sync's id / warps: warps 0 .. W-1, or one warp) meets,
    so that its earlier writes precede the add (the barrier, then a release
    at GPU scope is cumulative); its first thread adds (atom.acq_rel.gpu: it also acquires what
    the blocks before it released) and leaves the old value in the scratch
    sv; the group meets again and every thread reads it. A later
    atomic_add's first meeting comes after these reads, so the scratch is
    reused safely."""
    gl, scratch, idx = args[0], args[1], args[2:6]
    if not isinstance(gl, Global):
        raise error(op, f"tk.atomic_add adds into a gl, found {op.operands[0].type}")
    i32 = ir.IntegerType.get_signless(32)
    value = ir.IntegerAttr(op.attributes["value"]).value
    slot = _sh_ptr(lw, scratch, 0)
    if "delegated" in op.attributes:   # added by another warp (tk-pipeline-staging)
        return [llvm.load(i32, slot)]
    _barrier(lw, op)
    _, warps = checked_sync_group(op, lw.warps)   # the group's first thread adds
    first = arith.cmpi(arith.CmpIPredicate.eq, arith.remui(lw.tid_i32(), arith.constant(i32, 32 * warps)),
                       arith.constant(i32, 0))
    branch = scf.IfOp(first)
    with ir.InsertionPoint(branch.then_block):
        p = _gl_ptr(gl, _gl_tile_origin(gl, idx, 1, 1))
        old = llvm.inline_asm(i32, [p, arith.constant(i32, value)],
                              "atom.acq_rel.gpu.global.add.u32 $0, [$1], $2;", "=r,l,r,~{memory}",
                              has_side_effects=True)
        llvm.store(old, slot)
        scf.YieldOp([])
    _barrier(lw, op)
    return [llvm.load(i32, slot)]


def _index(n: int):
    return arith.constant(ir.IndexType.get(), n)


def _str_attr(op, name: str) -> str:
    if name not in op.attributes:
        raise error(op, f"{op.name} needs a '{name}' attribute")
    return ir.StringAttr(op.attributes[name]).value
