"""tk-grid-ordering: the grid level (the paper's persistent grid and block order).

A kernel's grid (X, Y, Z) is its work-item space; `tk.order` says in which
order blocks take the items, `tk.persistent` that one block per SM loops over
them (docs/tile-ir.md, "Block level"; docs/pipelining.md). The pass:

1. resolves `tk.order = "auto"`: when the kernel's loads split into tiles
   that depend only on block_idx.x and tiles that depend only on
   block_idx.y (GEMM's B and A; z does not count: a grouped order runs
   inside one z, a batch), it groups along y ("super-rows", the paper's
   order). A wave of S concurrent blocks then covers W values of y
   and S/W of x, so per K step the wave reads W*b_y + (S/W)*b_x distinct
   bytes (b_y, b_x: the bytes of the tiles that depend on y, on x), least at
   W = sqrt(S * b_x / b_y), provided L2 holds L2_WINDOW steps of that wave
   (its blocks drift apart by a few steps). A group spans several waves as
   it sweeps x, and each wave reads the group's rows of A again: over a
   K loop that is W * b_y * trips bytes, which should stay in L2 while B
   streams past. So when the y-tiles are loaded in a loop the order is
   "grouped(y, W, l2)": the kernel narrows W at run time to the rows whose
   A fits L2_GROUP_SHARE of the L2 (K = 16384, 128-row tiles: 4 MiB a row,
   8 rows). Total traffic is then about A once plus B once per group, so
   the widest group L2 allows is best. Otherwise the hardware's order "xyz"
   is kept. The choice is written back into `tk.order`.
2. rewrites the kernel when the order is not the hardware's or the kernel is
   persistent: the launch becomes 1-D (`tk.grid` = `X*Y*Z`, or
   `min(sms, X*Y*Z)` when persistent), the work-item space is computed in
   the kernel from the original grid expressions (kept in `tk.work`), every
   tk.block_idx becomes the decoded work item and every tk.grid_dim the
   space's extent. A persistent kernel's body (all but its allocations and
   barrier inits) moves into `scf.for %t = block_idx.x to X*Y*Z step
   grid_dim.x {tk.work_items}`; with `tk.persistent = "zigzag"` the loop
   counts the block's rounds r instead, and round r's item is r*P + b
   (r even) or r*P + P-1-b (r odd), P = grid_dim.x, b = block_idx.x.
3. with `tk.ragged = {count, rows}` (a persistent kernel over ragged
   groups: MoE's experts, each with count[z] rows in use), the work items
   are the live ones only: group z (a z of the grid) has ceil(count[z] /
   rows) y values (at most Y) of X items, the groups' items numbered one
   group after another. The item loop ends at their total and an item's
   (x, y) within its group is the order's decode over (X, that height),
   z its group, all from `tk.ragged_item` (computed on the device from
   count): every block gets the floor or ceiling of live / P items and no
   dead item costs a trip through the pipeline. "auto" then looks at the
   tiles with z fixed (one group's GEMM): super-rows as for one GEMM.

With a warp-specialised pipeline (tk-pipeline-staging runs next), the
producer then runs on into the next work item's loads while the consumers
finish the current one: the paper's overlap of a persistent grid.
"""
from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, scf

from ..dialect import ops as tk
from ..dialect import walk
from ..dialect.kernel import cluster_shape, is_zigzag, ragged_of
from ..dialect.types import ST, view
from ..dtypes import itemsize
from .orders import AXES, Order, decode, parse_order
from .registry import register
from .rewrite import (IRArith, backward_slice, clone_ops, defining_op, emit_grid_expr, entry,
                      grid_of, hoist_prologue, index, kernels, strings)

SMS = 132                 # SMs of the sm_90a parts tkc targets (H100 SXM, H200)
L2_BYTES = 50 * 2**20     # the H100's L2 (the H200 has 60 MB)
L2_WINDOW = 32            # K steps a wave's tiles should stay in L2 for (block drift)
# The part of L2 a group's A rows may take. Measured by ncu at 16384³ (K =
# 16384, 4 MiB of A per row): 6 rows (half the L2) read 13.9 GB from HBM,
# 8 rows 11.5 GB, 16 rows 16.8 GB: 2/3 gives 8.
L2_GROUP_SHARE = 2 / 3
LOADS = ("tk.pipeline_load", "tk.tma_load", "tk.group_load")


@register("tk-grid-ordering",
          "persistent grids and L2-aware block orders: resolve tk.order (auto: grouped "
          "super-rows sized from tiles and L2), linearise the grid, loop over work items")
def run(module_op) -> None:
    for fn in kernels(module_op.operation):
        order_kernel(fn)


def order_kernel(fn) -> None:
    if "tk.work" in fn.attributes:
        return  # ordered already (tk.work keeps the original grid)
    persistent = "tk.persistent" in fn.attributes
    zigzag = is_zigzag(fn)
    text = ir.StringAttr(fn.attributes["tk.order"]).value if "tk.order" in fn.attributes else None
    if text is None and not persistent:
        return
    order = parse_order(text or "auto")
    if order == "auto":
        order = choose_order(fn)
    fn.attributes["tk.order"] = ir.StringAttr.get(order.text())
    if order == Order() and not persistent:
        return  # the hardware already launches blocks in this order
    _linearise(fn, order, persistent, zigzag)


# ---------------------------------------------------------------- auto

def axis_bytes(fn) -> dict:
    """Per grid axis, the bytes of the tiles the kernel loads whose
    coordinates depend on that block index alone."""
    out = {a: 0 for a in AXES}
    for op in walk(fn):
        if op.name not in LOADS:
            continue
        st = view(op.operands[0].type)
        if not isinstance(st, ST):
            continue
        axes = _tile_axes(_coordinates(op))
        if len(axes) == 1:
            out[axes.pop()] += st.rows * st.cols * itemsize(st.dtype)
    return out


def _coordinates(load) -> list:
    """A load's coordinates and the starts of the slices its gl is taken
    from (a tile at a row offset: the MoE counts layout's A, sliced at each
    tile's first row)."""
    values, g = list(load.operands[2:6]), load.operands[1]
    while (op := defining_op(g)) is not None and op.name == "tk.gl_slice":
        values.append(op.operands[1])
        g = op.operands[0]
    return values


def _tile_axes(values) -> set:
    """_block_axes without z: a grouped order runs inside one z (decode puts
    z outermost: a batch's GEMM, a ragged group's), so a tile that follows y
    and z is a row tile there (a batched GEMM's A, the masked MoE GEMM's), one
    that follows x and z a column tile (its B). (Seen with z, a batched GEMM
    kept the hardware's order: 7% slower than the unbatched kernel at 8192^3.)"""
    return _block_axes(values) - {"z"}


def _block_axes(values) -> set:
    """The block_idx axes the values are computed from (through arith; loop
    variables and other values add none)."""
    axes, todo, seen = set(), list(values), set()
    while todo:
        op = defining_op(todo.pop())
        if op is None or op in seen:
            continue
        seen.add(op)
        if op.name == "tk.block_idx":
            axes.add(ir.StringAttr(op.attributes["dim"]).value)
        elif op.name.startswith("arith."):
            todo.extend(op.operands)
    return axes


def choose_order(fn) -> Order:
    b = axis_bytes(fn)
    if not (b["x"] and b["y"]):
        return Order()
    w = group_width(b["x"], b["y"])
    if not fits_l2(w, b["x"], b["y"]):
        return Order()
    return Order(group_axis="y", width=w, l2=_row_loop(fn) is not None)


def _row_loop(fn):
    """The loop around the loads that follow block_idx.y alone (the A tiles),
    whose trip count says how many bytes a group row reads; None if none."""
    for op in walk(fn):
        if op.name in LOADS and _tile_axes(_coordinates(op)) == {"y"}:
            parent = op.parent
            parent = parent.operation if parent is not None else None
            if parent is not None and parent.name == "scf.for":
                return parent
    return None


def l2_width(fn, order: Order):
    """The group width at run time for a "grouped(y, W, l2)" order: W, or
    fewer rows when a group's A panels (per row: the y-tiles' bytes times
    the loop's trip count) would not fit L2_GROUP_SHARE of the L2 (the rest
    holds the B panels streaming past). Emitted at the insertion point; the
    trip count's computation is cloned there."""
    loop = _row_loop(fn)
    row = axis_bytes(fn)["y"]
    f = loop.opview
    values = [f.lowerBound, f.upperBound, f.step]
    mapping = {a: a for a in entry(fn).arguments}
    clone_ops(backward_slice(values, stop=lambda v: v in mapping), mapping)
    lb, ub, step = (mapping[v] for v in values)
    trips = arith.ceildivsi(arith.subi(ub, lb), step)
    budget = int(L2_BYTES * L2_GROUP_SHARE)
    fit = arith.divui(index(budget), arith.muli(trips, index(row)))
    return arith.maxui(arith.minui(fit, index(order.width)), index(1))


def group_width(b_x: int, b_y: int, sms: int = SMS) -> int:
    """The super-row width W minimising a wave's distinct bytes per step,
    W*b_y + (sms/W)*b_x. L2 enters as a check, not a term: the wave's tiles
    must stay in L2 while its blocks drift apart by L2_WINDOW steps, which
    holds for every tile size tkc uses (the GEMM's: 520 KB a step, 16 MB for
    the window, of 50 MB); a kernel where it fails keeps the hardware order."""
    return max(1, min(sms, round(math.sqrt(sms * b_x / b_y))))


def fits_l2(w: int, b_x: int, b_y: int, sms: int = SMS, l2: int = L2_BYTES) -> bool:
    return (w * b_y + sms / w * b_x) * L2_WINDOW <= l2


# ---------------------------------------------------------------- rewrite

def _linearise(fn, order: Order, persistent: bool, zigzag: bool = False) -> None:
    """The rewrite of step 2 (module docstring). In clusters of cx along x
    (tk-verify allows no other shape here) the items are those of the space
    (X / cx, Y, Z), one a cluster: CTA `rank` of it takes x * cx + rank, so
    a cluster's CTAs share y and z (what tk-pipeline-staging multicasts).
    X must be a multiple of cx, as without the pass: the launch refuses
    another (`whole` in the grid language), where padding the grid would
    run blocks the kernel as written does not."""
    work = grid_of(fn)
    cx = cluster_shape(fn)[0]
    ids = [op for op in walk(fn) if op.name in ("tk.block_idx", "tk.grid_dim")]
    first = hoist_prologue(fn)
    with ir.InsertionPoint(first), fn.location:
        dims = [1 if g.strip() == "1" else emit_grid_expr(fn, g) for g in work]
        space = [dims[0] if cx == 1 else arith.divui(_value(dims[0]), index(cx)), *dims[1:]]
        ragged = ragged_of(fn)
        if ragged is not None:   # the live items' total, from the groups' counts
            total = tk.ragged_item(ragged[0], index(0), *map(_value, dims[::-1]), ragged[1])[3]
        else:
            total = IRArith.mul(IRArith.mul(space[0], space[1]), space[2])
        b = t = tk.block_idx("x")
        if cx > 1:   # the cluster's item, and this CTA's place in it
            rank, b = arith.remui(b, index(cx)), arith.divui(b, index(cx))
            t = b
        if persistent:
            P = tk.grid_dim("x") if cx == 1 else arith.divui(tk.grid_dim("x"), index(cx))
            loop = _zigzag_rounds(b, P, _value(total)) if zigzag else scf.ForOp(b, _value(total), P, [])
            loop.operation.attributes["tk.work_items"] = ir.UnitAttr.get()
            with ir.InsertionPoint(loop.body):
                scf.YieldOp([])
    if persistent:
        _move_into(fn, loop)
        at, t = ir.InsertionPoint.at_block_begin(loop.body), loop.induction_variable
        if zigzag:      # round r's item: r*P + b, or r*P + P-1-b when r is odd
            with at, fn.location:
                t = arith.addi(arith.muli(t, P), _zigzag_offset(t, P, b))
    else:
        at = ir.InsertionPoint(first)
    with at, fn.location:
        width = l2_width(fn, order) if order.l2 else None
        if ragged is not None:   # t's group z, then (x, y) inside it
            z, r, height, _ = tk.ragged_item(ragged[0], t, *map(_value, dims[::-1]), ragged[1])
            xyz = [_value(v) for v in decode(order, r, (dims[0], height, 1), IRArith, width)[:2]] + [z]
        else:   # (in 64 bits: ptxas guards its 64-bit division subroutine with a 32-bit fast
            # path, which these values take; a 32-bit decode saved nothing and ran the persistent
            # D 128 attention forward 8% slower at L 1k, H200, 11-30)
            xyz = [_value(v) for v in decode(order, t, space, IRArith, width)]
            if cx > 1:
                xyz[0] = arith.addi(arith.muli(xyz[0], index(cx)), rank)
        extents = [_value(v) for v in dims]
    _replace_ids(ids, dict(zip(AXES, xyz)), dict(zip(AXES, extents)))
    spans = [f"whole({work[0]}, {cx})" if cx > 1 else work[0], *work[1:]]   # x in whole clusters
    product = " * ".join(f"({g})" if " " in g.strip() else g.strip()
                         for g in spans if g.strip() != "1") or "1"
    if cx > 1:
        launch = f"min(sms // {cx}, {product}) * {cx}" if persistent else f"({product}) * {cx}"
    else:
        launch = f"min(sms, {product})" if persistent else product
    fn.attributes["tk.grid"] = strings([launch, "1", "1"])
    fn.attributes["tk.work"] = strings(work)


def _value(v):
    return index(v) if isinstance(v, int) else v


def _zigzag_rounds(b, P, total):
    """scf.for over block b's rounds of P items: R = total / P whole ones,
    and the last, partial one where b's item there is below total % P."""
    R = arith.divui(total, P)
    more = arith.cmpi(arith.CmpIPredicate.ult, _zigzag_offset(R, P, b), arith.remui(total, P))
    count = arith.addi(R, arith.select(more, index(1), index(0)))
    return scf.ForOp(index(0), count, index(1), [])


def _zigzag_offset(r, P, b):
    """Block b's place in round r: b, or P-1-b when r is odd."""
    odd = arith.cmpi(arith.CmpIPredicate.eq, arith.remui(r, index(2)), index(1))
    return arith.select(odd, arith.subi(arith.subi(P, index(1)), b), b)


def _move_into(fn, loop) -> None:
    """Every entry-block op after `loop` but the terminator goes into its body."""
    ops = [o.operation for o in entry(fn).operations]
    after = ops[ops.index(loop.operation) + 1:-1]
    y = list(loop.body.operations)[-1].operation
    for o in after:
        o.move_before(y)


def _replace_ids(ids, items: dict, extents: dict) -> None:
    """The author's block_idx -> the work item's coordinate, grid_dim -> the
    space's extent (`ids`: those ops, collected before the pass made its own)."""
    for op in ids:
        axis = ir.StringAttr(op.attributes["dim"]).value
        new = items[axis] if op.name == "tk.block_idx" else extents[axis]
        op.results[0].replace_all_uses_with(new)
        op.erase()
