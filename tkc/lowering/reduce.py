"""Row/column reductions and vector broadcasts of register tiles.

In the row layout (fragments.py) lane (g, t) holds, per 16x16 base tile,
rows g and g+8 and columns 2t, 2t+1, 2t+8, 2t+9. So a row reduction first
combines the thread's own elements of each row, then combines across the 4
lanes of a quad (same g, t = 0..3) with butterfly shuffles xor 1, 2; a column
reduction combines across the 8 quads (same t) with xor 4, 8, 16. After the
butterflies every lane holds the full result, which is exactly the
replication the rv layouts promise. Arithmetic is in f32 (in i32 for an i32
tile: sums wrap modulo 2^32, max is signed).

An 8-row tile (fragments.HALF_KS) is the same with its rows g only: a row
reduction still combines the quad (xor 1, 2), a column reduction the 8 row
groups (xor 4, 8, 16: the same three shuffles, with no own pair to add
first), and its "col" rv is one slot a lane.

Broadcasts are shuffle-free: element k of base tile (i, j) meets the rv slot
of its own row (fragments.row_vec_slot) or column (col_vec_slot).

In the wide layout lane l holds row l % 16 of each 16-row block, 8 columns
per base tile: a row reduction combines the thread's elements, then lanes
r and r + 16 (xor 16); the "col" rv it gives (rows g, g+8 on lane 4g + t) is
then gathered from lanes g and g + 8 (two shfl.idx per 16 rows). A row
broadcast reads row r = l % 16 from the "col" rv the other way round: slot
r // 8 of lane 4 (r % 8).

Whole-vector reductions (vec_sum/max/min) combine the lane's slots, then
the lanes holding distinct elements: all 32 for a flat rv, the quads (xor
4, 8, 16) for a "col" rv, the lanes of a quad (xor 1, 2) for a "row" one.
"""
from __future__ import annotations

import functools

from mlir import ir
from mlir.dialects import arith, llvm, nvvm

from ..diagnostics import error
from ..dialect.attrs import constant
from ..dialect.types import RT, RV
from ..hopper import fragments
from .compute import binary_fn, from_f32, frag_arg, result_view, same_shape, scalars, to_f32
from .core import Frag, rule

QUAD_XORS = (1, 2)          # lanes of a quad: same row g
COLUMN_XORS = (4, 8, 16)    # quads: same column pair t

_REDUCE = {"tk.row_max": "max", "tk.row_sum": "add", "tk.col_max": "max", "tk.col_sum": "add"}


def shuffle_xor(lw, v: ir.Value, mask: int) -> ir.Value:
    """The value of v held by lane (lane ^ mask): shfl.sync.bfly over the full warp."""
    return nvvm.shfl_sync(v.type, lw.const_i32(-1), v, lw.const_i32(mask), lw.const_i32(31),
                          nvvm.ShflKind.bfly)


def shuffle_idx(lw, v: ir.Value, src: ir.Value) -> ir.Value:
    """The value of v held by lane `src` (an i32 per lane): shfl.sync.idx."""
    return nvvm.shfl_sync(v.type, lw.const_i32(-1), v, src, lw.const_i32(31), nvvm.ShflKind.idx)


def _lane_fn(lw, key: str, fn) -> ir.Value:
    """fn(lane) on the i32 lane id, computed once per kernel."""
    return lw.once(("lane_fn", key), lambda: fn(lw.lane_i32(), lw.const_i32))


def _tree(fn, vals):
    """Combine vals pairwise (a balanced tree: shorter dependency chains)."""
    while len(vals) > 1:
        vals = [fn(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i]
                for i in range(0, len(vals), 2)]
    return vals[0]


def _check_reduce(op, x, v, rows: bool):
    layouts = ("row", "wide") if rows else ("row",)
    if not isinstance(x.view, RT) or x.view.layout not in layouts:
        raise error(op, f"{op.name} needs an rt in {' or '.join(layouts)} layout, found {op.operands[0].type}")
    want = RV(v.dtype, x.view.rows if rows else x.view.cols, "col" if rows else "row")
    if v != want:
        raise error(op, f"{op.name} of {x.view.text()} gives {want.text()}, found {v.text()}")


@rule(*_REDUCE)
def _reduce(lw, op, args):
    x, v = frag_arg(op, args[0]), result_view(op)
    rows = op.name.startswith("tk.row")
    _check_reduce(op, x, v, rows)
    init = args[1] if len(args) > 1 else None
    if init is not None and (not isinstance(init, Frag) or init.view.with_(dtype=v.dtype) != v):
        raise error(op, f"{op.name}: init must be {v.with_(dtype='f32').text()}-shaped, found {op.operands[1].type}")
    fn = binary_fn(_REDUCE[op.name], x.view.dtype)
    if x.view.layout == "wide":
        accs = _wide_rows(lw, x, fn)
    else:
        accs = []
        for members in (_row_groups(x.view) if rows else _col_groups(x.view)):
            acc = _tree(fn, [to_f32(x.vals[m], x.view.dtype) for m in members])
            for mask in (QUAD_XORS if rows else COLUMN_XORS):
                acc = fn(acc, shuffle_xor(lw, acc, mask))
            accs.append(acc)
    out = []
    for slot, acc in enumerate(accs):
        if init is not None:
            acc = fn(to_f32(init.vals[slot], init.view.dtype), acc)
        out.append(from_f32(acc, v.dtype))
    return [Frag(v, out)]


def _wide_rows(lw, x: Frag, fn) -> list:
    """Row reduction of a wide tile, in f32, as the slots of a "col" rv."""
    t, per_block = x.view, 8 * (x.view.cols // fragments.BASE)
    srcs = [_lane_fn(lw, f"wide_row_src{h}", lambda lane, c, h=h: arith.addi(arith.shrui(lane, c(2)), c(8 * h)))
            for h in range(2)]
    out = []
    for i in range(t.rows // fragments.BASE):
        acc = _tree(fn, [to_f32(e, t.dtype) for e in x.vals[i * per_block:(i + 1) * per_block]])
        acc = fn(acc, shuffle_xor(lw, acc, 16))
        out.extend(shuffle_idx(lw, acc, src) for src in srcs)
    return out


def _row_groups(t: RT) -> list[list[int]]:
    """For each slot of the "col" rv (2 per 16 rows, 1 of an 8-row tile), the
    flat fragment positions of the thread's elements in that row."""
    nj, ks = t.cols // fragments.BASE, fragments.base_ks(t.rows)
    return [[fragments.tile_index(t.rows, t.cols, i, j, k)
             for j in range(nj) for k in ks if fragments.row_vec_slot(k) == h]
            for i in range(-(-t.rows // fragments.BASE)) for h in range(2 if t.rows % fragments.BASE == 0 else 1)]


def _col_groups(t: RT) -> list[list[int]]:
    """For each slot of the "row" rv (4 per 16 columns): the thread's elements
    in that column (one of an 8-row tile's: its 8 rows are the 8 quads')."""
    ni, ks = -(-t.rows // fragments.BASE), fragments.base_ks(t.rows)
    return [[fragments.tile_index(t.rows, t.cols, i, j, k)
             for i in range(ni) for k in ks if fragments.col_vec_slot(k) == s]
            for j in range(t.cols // fragments.BASE) for s in range(4)]


# ---------------------------------------------------------------- broadcasts

def _broadcast_slot(t: RT, index: int, rows: bool) -> int:
    """The rv position element `index` of a row-layout tile reads."""
    i, j, k = fragments.tile_slot(t.rows, t.cols, index)
    return 2 * i + fragments.row_vec_slot(k) if rows else 4 * j + fragments.col_vec_slot(k)


@rule(*(f"tk.{o}_{d}" for o in ("add", "sub", "mul", "div") for d in ("row", "col")))
def _broadcast(lw, op, args):
    x, vec, out_view = frag_arg(op, args[0]), frag_arg(op, args[1], 1), result_view(op)
    rows = op.name.endswith("_row")
    layouts = ("row", "wide") if rows else ("row",)
    if not isinstance(x.view, RT) or x.view.layout not in layouts or out_view != x.view:
        raise error(op, f"{op.name} needs an rt in {' or '.join(layouts)} layout and gives the same "
                        f"type, found {op.operands[0].type} -> {op.results[0].type}")
    want = RV(vec.view.dtype, x.view.rows if rows else x.view.cols, "col" if rows else "row")
    if vec.view != want:
        raise error(op, f"{op.name} of {x.view.text()} needs a vector {want.text()}, found {vec.view.text()}")
    fn = binary_fn(op.name[3:6], x.view.dtype)
    vs = _broadcast_values(lw, x.view, vec, rows)
    out = [from_f32(fn(to_f32(e, x.view.dtype), v), x.view.dtype) for e, v in zip(x.vals, vs)]
    return [Frag(out_view, out)]


def row_broadcast(lw, t: RT, vec: Frag) -> list:
    """The f32 value of "col" vector `vec` (one per row of t) at each of t's
    fragment elements: its row's (a row broadcast, e.g. fma's operand)."""
    return _broadcast_values(lw, t, vec, rows=True)


def _broadcast_values(lw, t: RT, vec: Frag, rows: bool) -> list:
    vs = [to_f32(e, vec.view.dtype) for e in vec.vals]
    if t.layout == "wide":
        vs, slot = _wide_row_values(lw, vs), lambda n: n // (8 * (t.cols // fragments.BASE))
    else:
        slot = lambda n: _broadcast_slot(t, n, rows)  # noqa: E731
    return [vs[slot(n)] for n in range(fragments.tile_elems(t.rows, t.cols))]


def _wide_row_values(lw, vs: list) -> list:
    """Per 16-row block, the "col" rv's value of the wide lane's row l % 16."""
    src = _lane_fn(lw, "wide_bcast_src", lambda lane, c: arith.shli(arith.andi(lane, c(7)), c(2)))
    upper = _lane_fn(lw, "wide_bcast_upper", lambda lane, c: arith.cmpi(
        arith.CmpIPredicate.ne, arith.andi(lane, c(8)), c(0)))
    return [arith.select(upper, shuffle_idx(lw, vs[2 * i + 1], src), shuffle_idx(lw, vs[2 * i], src))
            for i in range(len(vs) // 2)]


# tk.fma lives here, not with the elementwise rules (compute.py), for its
# vector operand: a row broadcast.
@rule("tk.fma")
def _fma(lw, op, args):
    if scalars(args):
        return [llvm.intr_fma(*args)]
    x, v = frag_arg(op, args[0]), result_view(op)
    same_shape(op, x.view, v)
    ins = []
    for pos, a in ((1, args[1]), (2, args[2])):
        if isinstance(a, Frag) and a.view == x.view:
            ins.append([to_f32(e, a.view.dtype) for e in a.vals])
        elif isinstance(a, ir.Value) and str(a.type) == "f32":
            ins.append([a] * len(x.vals))
        elif isinstance(a, Frag) and isinstance(a.view, RV) and isinstance(x.view, RT):
            ins.append(row_broadcast(lw, x.view, a))  # a "col" vector of x's rows, along each row
        else:
            raise error(op, f"tk.fma: operand {pos} must be {x.view.text()}, f32 or a vector of its "
                            f"rows, found {op.operands[pos].type}")
    xs = [to_f32(e, x.view.dtype) for e in x.vals]
    return [Frag(v, [from_f32(llvm.intr_fma(a, b, c), v.dtype) for a, b, c in zip(xs, *ins)])]


# ---------------------------------------------------------------- whole-vector reductions

# lanes holding distinct elements of an rv, as butterfly masks
_VEC_XORS = {"flat": (1, 2, 4, 8, 16), "col": (4, 8, 16), "row": (1, 2)}
_VEC_REDUCE = {"tk.vec_sum": "add", "tk.vec_max": "max", "tk.vec_min": "min"}


@rule(*_VEC_REDUCE)
def _vec_reduce(lw, op, args):
    x = frag_arg(op, args[0])
    if not isinstance(x.view, RV):
        raise error(op, f"{op.name} reduces an rv, found {op.operands[0].type}")
    fn = binary_fn(_VEC_REDUCE[op.name], x.view.dtype)
    acc = _tree(fn, [to_f32(e, x.view.dtype) for e in x.vals])
    for mask in _VEC_XORS[x.view.kind]:
        acc = fn(acc, shuffle_xor(lw, acc, mask))
    return [acc]


# ---------------------------------------------------------------- picks

@rule("tk.row_pick", "tk.col_pick")
def _pick(lw, op, args):
    """x[:, j] (row_pick) or x[i, :] (col_pick) of a row-layout rt: every
    slot of the result rv is one shfl.idx from the lane holding it. For
    column j, the holder of row g (+8) is lane 4g + (j % 8) // 2 of the
    quad, sending its element at (j // 16, (j % 16) // 8, j % 2); for row i,
    lane 4 (i % 8) + t sends its element at (i // 16, (i % 16) // 8). A run-time
    index picks what every lane sends with a select chain."""
    x, v = frag_arg(op, args[0]), result_view(op)
    rows = op.name == "tk.row_pick"
    if not isinstance(x.view, RT) or x.view.layout != "row":
        raise error(op, f"{op.name} needs an rt in row layout, found {op.operands[0].type}")
    t, B = x.view, fragments.BASE
    fixed = constant(op.operands[1])
    i32 = lambda n: lw.const_i32(n)  # noqa: E731
    at = fixed if fixed is not None else arith.index_cast(ir.IntegerType.get_signless(32), args[1])

    def part(div, mod):
        """(at // div) % mod, an int for a constant index, else an i32 value."""
        if fixed is not None:
            return (fixed // div) % mod
        return arith.remui(arith.divui(at, i32(div)), i32(mod))

    val = lambda a: i32(a) if isinstance(a, int) else a  # noqa: E731
    add = lambda a, b: a + b if isinstance(a, int) and isinstance(b, int) else arith.addi(val(a), val(b))  # noqa: E731
    mul = lambda a, n: a * n if isinstance(a, int) else arith.muli(a, i32(n))  # noqa: E731

    def sent(candidates, key):
        """The candidate at `key` (an int, or an i32 value: a select chain)."""
        if isinstance(key, int):
            return candidates[key]
        return _by_key(lw, key, range(len(candidates)), candidates)

    lane = lw.lane_i32()
    nj = t.cols // B
    if rows:     # key: (block column, 8-column half, parity) of column j
        key = add(mul(part(B, nj), 4), add(mul(part(8, 2), 2), part(1, 2)))
        src = arith.ori(arith.andi(lane, i32(~3)), val(part(2, 4)))
        out = []
        for i in range(-(-t.rows // B)):
            for h in range(2 if t.rows % B == 0 else 1):   # an 8-row tile: its rows g only
                cands = [to_f32(x.vals[fragments.tile_index(t.rows, t.cols, i, jb, p + 2 * h + 4 * c8)],
                                t.dtype) for jb in range(nj) for c8 in range(2) for p in range(2)]
                out.append(from_f32(shuffle_idx(lw, sent(cands, key), src), v.dtype))
        return [Frag(v, out)]
    ni = -(-t.rows // B)     # key: (block row, 8-row half) of row i
    key = add(mul(part(B, ni), 2), part(8, 2))
    src = arith.ori(val(mul(part(1, 8), 4)), arith.andi(lane, i32(3)))
    out = []
    for jb in range(nj):
        for s in range(4):
            k = lambda h: (s & 1) + 2 * h + 4 * (s >> 1)  # noqa: E731
            cands = [to_f32(x.vals[fragments.tile_index(t.rows, t.cols, ib, jb, k(h))], t.dtype)
                     for ib in range(ni) for h in range(2 if t.rows % B == 0 else 1)]
            out.append(from_f32(shuffle_idx(lw, sent(cands, key), src), v.dtype))
    return [Frag(v, out)]


# ---------------------------------------------------------------- roll

@rule("tk.roll")
def _roll(lw, op, args):
    """numpy.roll of a row-layout rt by a constant shift s: one shfl.idx a
    register. Along columns, lane r of a quad holds columns 2r, 2r + 1 (+ 8,
    + 16 jb); the reader of column j takes column j - s from the quad's lane
    ((j - s) % 8) // 2, and for each register that is a bijection of the
    quad, so every lane sends the register its one reader wants (a select
    on its lane bits). Along rows alike over the 8 row groups (lane // 4)."""
    x = frag_arg(op, args[0])
    t, B = x.view, fragments.BASE
    if not isinstance(t, RT) or t.layout != "row":
        raise error(op, f"tk.roll needs an rt in row layout, found {op.operands[0].type}")
    axis = ir.IntegerAttr(op.attributes["axis"]).value
    s = ir.IntegerAttr(op.attributes["shift"]).value % t.shape[axis]
    if s == 0:
        return [x]
    vals = [to_f32(v, t.dtype) for v in x.vals]
    i32 = lw.const_i32
    lane = lw.lane_i32()
    key = arith.andi(lane, i32(3)) if axis else arith.shrui(lane, i32(2))
    slot = lambda r, c: fragments.tile_index(  # noqa: E731  register of the lane-independent parts of (r, c)
        t.rows, t.cols, r // B, c // B, c % 2 + 2 * ((r % B) // 8) + 4 * ((c % B) // 8))
    out = [None] * len(vals)
    for ib in range(-(-t.rows // B)):
        for jb in range(t.cols // B):
            for k in fragments.base_ks(t.rows):
                p, h, c8 = k % 2, (k // 2) % 2, k // 4
                r0, c0 = B * ib + 8 * h, B * jb + 8 * c8 + p   # the register's row and column at lane 0
                if axis:   # provider q's reader r: ((2r + p - s) % 8) // 2 == q
                    reader = {((2 * r + p - s) % 8) // 2: r for r in range(4)}
                    sends = [slot(r0, (c0 + 2 * reader[q] - s) % t.cols) for q in range(4)]
                    src = arith.ori(arith.andi(lane, i32(~3)),
                                    arith.andi(arith.addi(lane, i32(((p - s) % 8) // 2)), i32(3)))
                else:      # provider g's reader: row group (g + s) % 8
                    sends = [slot((r0 + (g + s) % 8 - s) % t.rows, c0) for g in range(8)]
                    src = arith.ori(arith.shli(arith.andi(arith.addi(key, i32(8 - s % 8)), i32(7)), i32(2)),
                                    arith.andi(lane, i32(3)))
                sent = _by_key(lw, key, sends, vals)
                out[fragments.tile_index(t.rows, t.cols, ib, jb, k)] = from_f32(shuffle_idx(lw, sent, src), t.dtype)
    return [Frag(t, out)]


def _by_key(lw, key, choice: list, vals: list):
    """vals[choice[key]] for an i32 `key` per lane: a select chain, one select
    per distinct choice after key 0's (on the keys that pick it)."""
    acc = vals[choice[0]]
    for c in dict.fromkeys(choice):
        if c != choice[0]:
            hit = [arith.cmpi(arith.CmpIPredicate.eq, key, lw.const_i32(n)) for n, u in enumerate(choice) if u == c]
            acc = arith.select(functools.reduce(arith.ori, hit), vals[c], acc)
    return acc
