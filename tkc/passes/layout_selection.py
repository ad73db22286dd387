"""tk-layout-selection: shared-tile swizzles, register-tile layouts, bank report.

Four decisions, in this order (each needs the one before):

1. Swizzles. Every shared tile left "auto" gets the paper's rule
   (docs/tile-ir.md, "Shared tile memory layout"): the widest swizzle of
   128, 64 and 32 bytes that divides its row width in bytes (cols * element
   size), else "none". Tensor-core (wgmma) and TMA accesses need one of
   those swizzles, and the widest spreads a row group's 16-byte chunks over
   the most banks. A tile that only moves to and from registers (loads
   and stores, through its views too) takes the one of those with the
   fewest bank conflicts over its accesses instead (widest on ties). A
   swizzle the author fixed is kept. The `tk.alloc` result's type changes
   in place, so every user sees the decided layout.

2. Register layouts: make every mma operand's layout legal (the mma table
   of tile-ir.md), at the cheapest place.
   - Values tied by layout-agnostic ops (tk.copy, unary and binary
     elementwise ops: result and tile operands share one type but for
     copy's dtype) form a class that must share one layout.
   - A class is *free* when all its values are made by ops that can produce
     either layout at no extra cost (tk.load from st or gl, initialisers,
     elementwise ops) and used only by such ops, by tk.store, or as mma a/b
     operands. Anything else pins it to its current layout ("hard"):
     block arguments (scf.for iter_args: the carried layout stays fixed),
     results of scf ops, mma results, broadcasts, swap_layout, reductions,
     scf.yield and every op not named here.
   - A transpose's result may take either layout: in the other layout than
     its operand's it is the same registers renamed (x's row layout is
     x.T's col layout), in the same one it costs a swap. So a class holding
     one counts a swap against the operand's layout (a transposed tile
     stored to shared memory then goes out by stmatrix.trans, free), unless
     the class goes to global memory, where the row layout's pairs (or wide
     rows) are the wider stores.
   - A free class takes the layout that needs the fewest swaps (ties keep
     the author's): its values are retyped in place, so a load from shared
     becomes ldmatrix.trans (free) and an initialiser or elementwise chain
     simply works in the other layout.
   - Each value that still has mma operand uses wanting the other layout
     gets exactly one `tk.swap_layout`, right after its definition (at the
     start of the block for a block argument: inside a loop body for an
     iter_arg), located at the definition, shared by all those uses.
   Explicit layouts are honoured: a legal program is left unchanged.
   Malformed IR (classes mixing layouts, two hard layouts) is left alone
   for tk-verify to report, so this pass may run before it.

3. Wide tiles (choose_wide): a row class that moves through global memory
   and needs nothing of the fragment layout becomes "wide" (16-byte
   accesses a lane); see choose_wide for the rule.

4. Bank conflicts (banks.py): every shared access's conflict degree is
   computed from the decided layouts; degrees above 1-way are warned on
   stderr as `file:line:col: warning: N-way shared-memory bank conflicts:
   ldmatrix of st<bf16, 64, 64, "none">` (at the library's own lines only
   within `tkc build` and `tkc FILE`: diagnostics.library_warnings; an op's
   first call compiling a library kernel notes nothing its user could act
   on). `tk-bank-report` remarks every degree, 1-way included.
"""
from __future__ import annotations

from collections import Counter

from ..dialect import ops as tk
from ..dialect.ops import BINARY, BROADCAST, INITS, MMA, UNARY
from ..dialect.types import GL, RT, ST, view
from ..dtypes import itemsize
from ..hopper.lanes import extents
from . import banks
from .registry import register
from ..hopper.fragments import HALF
from .verify import MMA_TABLE

WIDTHS = (128, 64, 32)  # swizzle bytes, widest first
OTHER = {"row": "col", "col": "row"}


@register("tk-layout-selection",
          "choose each auto shared tile's swizzle (widest of 128b/64b/32b dividing its row), "
          "legal mma operand layouts (retype or one swap_layout), wide tiles for global "
          "memory; warn on bank conflicts")
def run(module_op) -> None:
    choose_swizzles(module_op)
    legalize_mma_layouts(module_op)
    choose_wide(module_op)
    banks.report(module_op)


# ---------------------------------------------------------------- 1. swizzles

def swizzles(st: ST) -> list[str]:
    """The swizzles S in WIDTHS dividing an st's row (cols * E), widest first."""
    row_bytes = st.cols * itemsize(st.dtype)
    return [f"{s}b" for s in WIDTHS if row_bytes % s == 0]


def choose_swizzle(st: ST, accesses=()) -> str:
    """The swizzle for an "auto" st: the widest that divides its row ("none"
    if none does), or, for a tile only moved to and from registers
    (`accesses`: its loads and stores, no tensor-core or TMA use), the one
    with the fewest bank conflicts over them, widest on ties: e.g. an f32
    staging tile's 8-byte pairs are 2-way at 128b and conflict-free at 32b."""
    options = swizzles(st)
    if not options:
        return "none"
    return min(options, key=lambda s: sum(banks.degree(a) for a in _swizzled(accesses, s)))


def _swizzled(ops, swizzle: str):
    for op in ops:
        a = banks.access_of(op)
        if a is not None:
            yield banks.Access(a.pattern, a.shared.with_(swizzle=swizzle), a.reg, a.warps)


_REGISTER_ACCESS = ("tk.load", "tk.store", "tk.load_split", "tk.store_join")  # the st: operand 0


def _register_accesses(tile) -> list | None:
    """The loads and stores of `tile` (an alloc's result) and of its subtile
    and stage views; None when any other op uses it (wgmma, TMA, group
    copies: those keep the widest swizzle)."""
    found, todo = [], [tile]
    while todo:
        value = todo.pop()
        for use in value.uses:
            user = use.owner
            if user.name in ("tk.subtile", "tk.stage") and use.operand_number == 0:
                todo.append(user.results[0])
            elif user.name in _REGISTER_ACCESS and use.operand_number == 0:
                found.append(user)
            else:
                return None
    return found


def choose_swizzles(module_op) -> None:
    """Allocs get the rule; ring slots (tk.stage) and subtile views take the
    layout of the tile they are part of (program order: definitions first)."""
    for op in _ops(module_op.operation):
        result = op.results[0] if op.name in ("tk.alloc", "tk.stage", "tk.subtile") else None
        st = _view(result) if result is not None else None
        if not isinstance(st, ST):
            continue
        if op.name == "tk.alloc":
            swizzle = st.swizzle if st.swizzle != "auto" else choose_swizzle(
                st, _register_accesses(result) or ())
        else:
            parent = _view(op.operands[0])
            swizzle = parent.swizzle if isinstance(parent, ST) and parent.swizzle != "auto" \
                else st.swizzle
        if swizzle != st.swizzle:
            result.set_type(st.with_(swizzle=swizzle).mlir(result.type.context))


# ---------------------------------------------------------------- 2. register layouts

_FREE_DEFS = {f"tk.{n}" for n in (*INITS, "fill", "iota", "rand", "load", "load_split", *UNARY, *BINARY,
                                   "fma", "where")}
_TIED = {f"tk.{n}" for n in (*UNARY, *BINARY, "fma", "where")}  # result and tile operands share a layout
_MMA = {f"tk.{n}": MMA_TABLE[n] for n in MMA}
# wgmma takes a register a in row layout (b is always an st: no register demand)
_MMA.update({f"tk.warpgroup_mma_{n}": ("row", 1, None, None) for n in ("ab", "abt")})


def _tie_pairs(classes, op) -> None:
    """load_split's two results and store_join's two tiles have one type."""
    pair = {"tk.load_split": op.results, "tk.store_join": op.operands[1:3]}.get(op.name)
    if pair is not None and len(pair) == 2 and all(_is_rt(v) for v in pair):
        classes.union(pair[0], pair[1])


class _Classes:
    """Union-find over rt values (ir.Value is hashable)."""

    def __init__(self):
        self.parent = {}

    def find(self, v):
        self.parent.setdefault(v, v)
        while self.parent[v] != v:
            self.parent[v] = self.parent[self.parent[v]]
            v = self.parent[v]
        return v

    def union(self, a, b) -> None:
        self.parent[self.find(a)] = self.find(b)

    def groups(self) -> list[list]:
        out: dict = {}
        for v in list(self.parent):
            out.setdefault(self.find(v), []).append(v)
        return list(out.values())


def legalize_mma_layouts(module_op) -> None:
    """Retype free classes and insert swap_layouts so every mma a/b is legal."""
    classes, hard, wants, flips, to_global = _analyse(module_op)
    for members in classes.groups():
        # a transpose's free layout counts where the class stays off global memory (module docstring)
        _fix_class(members, hard, wants, {} if to_global.intersection(members) else flips)


def _analyse(module_op):
    """Classes of rt values, the hard layout constraints on each value,
    each value's mma operand demands: wants[v] = [(op, operand index, layout)],
    each transpose result's operand: flips[v] = x (free in x's other layout),
    and the values stored to global memory."""
    classes, hard, wants, flips, to_global = _Classes(), {}, {}, {}, set()

    def pin(v):
        hard.setdefault(v, set()).add(_view(v).layout)

    for op in _ops(module_op.operation):
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    if _is_rt(arg):
                        classes.find(arg)
                        pin(arg)
        for r in op.results:
            if _is_rt(r):
                classes.find(r)
                if op.name == "tk.transpose" and _view(r).layout != "wide":
                    flips[r] = op.operands[0]
                elif op.name not in _FREE_DEFS:
                    pin(r)
        _tie_pairs(classes, op)
        for i, v in enumerate(op.operands):
            if not _is_rt(v):
                continue
            if op.name in _TIED and _is_rt(op.results[0]):
                classes.union(v, op.results[0])
            elif op.name in _MMA and i < 2:
                layout = _MMA[op.name][0 if i == 0 else 2]
                wants.setdefault(v, []).append((op, i, layout))
            elif not (op.name == "tk.store" and i == 1 and not _ordered(op)):
                pin(v)   # (deinterleave and packed stores take the row fragment)
            if op.name == "tk.store" and i == 1 and isinstance(_view(op.operands[0]), GL):
                to_global.add(v)
    return classes, hard, wants, flips, to_global


def _ordered(op) -> bool:
    """A tk.store that places the row fragment's columns in its own order."""
    return "deinterleave" in op.attributes or "packed" in op.attributes


def _fix_class(members, hard, wants, flips) -> None:
    layouts = {_view(v).layout for v in members}
    pinned = set().union(*(hard.get(v, set()) for v in members))
    if len(layouts) != 1 or len(pinned) > 1:
        return  # malformed: tk-verify reports it
    current = layouts.pop()
    if current == "wide" or "wide" in pinned:
        return  # a wide value never feeds an mma (tk-verify reports one that does)
    half = any(_view(v).rows == HALF for v in members)   # 8-row tiles are row layout only
    target = pinned.pop() if pinned else "row" if half else _cheapest(members, wants, flips, current)
    if target != current:
        for v in members:
            v.set_type(_view(v).with_(layout=target).mlir(v.type.context))
    for v in members:
        uses = [(op, i) for op, i, layout in wants.get(v, ()) if layout != target]
        if uses and not half:   # (an 8-row tile cannot be col: tk-verify names the mma)
            _swap_for(v, uses)


def _cheapest(members, wants, flips, current: str) -> str:
    """The layout that leaves the fewest values needing a swap (an mma
    operand's, or a transpose's kept in its operand's layout); ties: current.
    (A transpose's operand is read as typed now: a class fixed later may
    still retype it, which costs a swap here and changes no result.)"""
    cost = Counter()
    for layout in ("row", "col"):
        cost[layout] = sum(any(w != layout for _, _, w in wants.get(v, ())) for v in members)
        cost[layout] += sum(v in flips and _view(flips[v]).layout == layout for v in members)
    return current if cost[current] <= cost[OTHER[current]] else OTHER[current]


# ---------------------------------------------------------------- 3. wide tiles

# Uses a wide rt supports besides elementwise ops: (op, operand index).
_ROW_BROADCASTS = {f"tk.{n}" for n in BROADCAST if n.endswith("_row")}
_WIDE_USES = {("tk.store", 1), ("tk.store_join", 1), ("tk.store_join", 2), ("tk.row_max", 0),
              ("tk.row_sum", 0)} | {(n, 0) for n in _ROW_BROADCASTS}


def choose_wide(module_op) -> None:
    """Retype to "wide" every row-layout class that never needs the fragment
    layout (made by loads, initialisers, elementwise ops and row broadcasts,
    used by those, stores, row reductions and row broadcasts; not a block
    argument or an scf result) and either
    - moves through global memory and not through shared memory (where
      ldmatrix is as fast): its global accesses then move 16 bytes a lane
      instead of 4 (bf16 pairs); or
    - is split or joined with an st (load_split/store_join) and has fewer
      bank conflicts over its shared accesses when wide: a lane's pairs are
      then 32 adjacent bytes of one row instead of 8 bytes of 4 rows."""
    classes, narrow, memory, shared = _Classes(), set(), {}, {}
    for op in _ops(module_op.operation):
        for region in op.regions:
            for block in region.blocks:
                narrow.update(a for a in block.arguments if _is_rt(a))
        tied = op.name in _TIED or op.name in _ROW_BROADCASTS
        for r in op.results:
            if _is_rt(r):
                classes.find(r)
                if op.name not in _FREE_DEFS and op.name not in _ROW_BROADCASTS:
                    narrow.add(r)
        _tie_pairs(classes, op)
        for i, v in enumerate(op.operands):
            if not _is_rt(v):
                continue
            if tied and (i == 0 or op.name in _TIED):
                classes.union(v, op.results[0])
            elif (op.name, i) not in _WIDE_USES or _ordered(op):
                narrow.add(v)
        moved = {"tk.load": list(op.results), "tk.load_split": list(op.results),
                 "tk.store": list(op.operands[1:2]), "tk.store_join": list(op.operands[1:3])}
        for value in moved.get(op.name, ()):
            memory.setdefault(value, set()).add(type(_view(op.operands[0])))
            if isinstance(_view(op.operands[0]), ST):
                shared.setdefault(value, []).append(op)
            if _is_rt(value) and not _wide_fits(op, _view(op.operands[0]), _view(value)):
                narrow.add(value)
    for members in classes.groups():
        kinds = set().union(*(memory.get(v, set()) for v in members))
        if narrow.intersection(members) or not all(_view(v).layout == "row" and _view(v).rows % 16 == 0
                                                   for v in members):
            continue   # (an 8-row tile stays in rows: wide, lanes 8-15 of each 16 would hold nothing)
        if (GL in kinds and ST not in kinds) or _wide_pairs([op for v in members for op in shared.get(v, ())]):
            for v in members:
                v.set_type(_view(v).with_(layout="wide").mlir(v.type.context))


def _wide_pairs(ops) -> bool:
    """Some of `ops` (a class's shared accesses) split or join pairs, and
    their bank-conflict degrees sum lower with the class wide than in rows."""
    if not any(op.name in ("tk.load_split", "tk.store_join") for op in ops):
        return False
    cost = {layout: sum(banks.degree(a) for a in (banks.access_of(op, layout) for op in ops) if a is not None)
            for layout in ("row", "wide")}
    return cost["wide"] < cost["row"]


def _wide_fits(op, mem, t) -> bool:
    """A ragged access asks only for its access width on c (requirements.py):
    widening it would ask for more (16 bytes), so it is widened only where a
    static c already allows that; any other access asks for the same."""
    if not isinstance(mem, GL) or not ("fill" in op.attributes or "clip" in op.attributes):
        return True
    k = 2 if op.name in ("tk.load_split", "tk.store_join") else 1
    need = extents(t.with_(layout="wide"), mem.dtype, True, k)[3]
    return mem.c != -1 and mem.c % need == 0


def _swap_for(v, uses) -> None:
    """One swap_layout of v right after its definition, feeding `uses`."""
    from mlir import ir
    owner = v.owner
    if isinstance(owner, ir.Block):
        ip, loc = ir.InsertionPoint.at_block_begin(owner), _block_loc(v, owner)
    else:
        ip, loc = ir.InsertionPoint.after(owner.operation), owner.operation.location
    with ip:
        swapped = tk.swap_layout(v, loc=loc)
    for op, i in uses:
        op.operands[i] = swapped


def _block_loc(arg, block):
    """A block argument's location, or its region's op's (args often have none)."""
    from mlir import ir
    if "unknown" not in str(arg.location):
        return arg.location
    parent = block.owner
    return parent.location if parent is not None else ir.Location.unknown()


# ---------------------------------------------------------------- helpers

def _view(value):
    try:
        return view(value.type)
    except ValueError:  # malformed: tk-verify reports it
        return None


def _is_rt(value) -> bool:
    return isinstance(_view(value), RT)


def _ops(op):
    """Every op nested in op, in IR order (a snapshot: callers may edit)."""
    found = []
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                found.append(child)
                found.extend(_ops(child))
    return found
