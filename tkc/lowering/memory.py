"""Lowering of memory ops: tk.alloc, tk.load, tk.store, tk.group_load, tk.group_store.

Per-warp moves (load/store) follow the fragment layout of fragments.py:

- gl <-> rt: every lane moves its own elements; in the row layout the pairs
  (k, k+1) are adjacent columns, moved as one 4-byte (16-bit types) or
  8-byte (f32) access. In the col layout pairs are adjacent rows: one
  access per element.
- st <-> rt, 16-bit: one `ldmatrix.x4` / `stmatrix.x4` per 16x16 base tile
  (`.trans` for the col layout); lane l names row l%8 of 8x8 matrix l//8,
  and matrix i lands in registers (e_2i, e_2i+1) (`ldmatrix_row_col`).
  f32: per element or pair, like gl.
- gl/sv <-> rv: every lane moves its vector slots. Lanes holding the same
  slot (rv is replicated over quads or columns of lanes) all store the same
  value: the duplicate stores are benign and cost less than a branch.

Group copies (group_load/store) move 16-byte chunks with W*32 threads:
chunk i*32W + thread-in-group in iteration i (unrolled), coalesced on the
global side; a 16-byte chunk stays contiguous under every swizzle.

Addresses are `index` arithmetic folded at trace time where both sides are
Python ints, cast to i64 (global, element GEP) or i32 (shared, byte GEP).
A shared operand's address is its static offset, plus its dynamic part (a
ring slot, a run-time subtile), plus the element's `shared.address` in the
panel layout the tile lives in (`Shared.pitch`: a row subtile keeps its
parent's panel stride).
"""
from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, llvm, scf

from ..diagnostics import error
from ..dtypes import itemsize
from ..dialect.types import RT, RV, ST, SV, view
from . import fragments, shared
from .core import Frag, Global, Shared, frag_len, rule, scalar_type

_DYN = -2147483648  # LLVM dialect GEP: "this index is an operand"


# ---------------------------------------------------------------- alloc

@rule("tk.alloc")
def _alloc(lw, op, args):
    if lw.shared_plan is None or op.result not in lw.shared_plan.offsets:
        raise error(op, "tk.alloc must be in the kernel's entry block")
    return [Shared(view(op.result.type), lw.shared_plan.offset(op.result))]


# ---------------------------------------------------------------- load / store

@rule("tk.load")
def _load(lw, op, args):
    src, idx = args[0], args[1:]
    if str(op.result.type) in ("f32", "i32") and isinstance(src, Global):
        _check_idx(op, idx, 4)
        return [_gl_scalar(lw, op, src, idx, None)]
    out = _out_view(op, op.result.type)
    if isinstance(src, Global):
        _check_idx(op, idx, 4)
        _check_rank(op, src.view, out)
        vals = _gl_load(lw, src, out, *_gl_accesses(lw, op, src, out, idx))
    elif isinstance(src, Shared) and isinstance(src.view, ST) and isinstance(out, RT):
        _check_idx(op, idx, 2)
        _check_subtile(op, src.view, out)
        vals = _st_to_rt(lw, src, out, idx)
    elif isinstance(src, Shared) and isinstance(src.view, SV) and isinstance(out, RV):
        _check_length(op, idx, src.view, out)
        vals = _sv_to_rv(lw, src, out, idx)
    else:
        raise error(op, f"tk.load cannot load a {out.text()} from {op.operands[0].type}")
    return [Frag(out, vals)]


@rule("tk.store")
def _store(lw, op, args):
    dst, x, idx = args[0], args[1], args[2:]
    if isinstance(dst, Global) and isinstance(x, ir.Value) and str(x.type) == "f32":
        _check_idx(op, idx, 4)
        _gl_scalar(lw, op, dst, idx, x)
        return []
    if not isinstance(x, Frag):
        raise error(op, f"tk.store stores an rt or rv, found {op.operands[1].type}")
    if isinstance(dst, Global):
        _check_idx(op, idx, 4)
        _check_rank(op, dst.view, x.view)
        if "packed" in op.attributes:
            _gl_add_packed(lw, op, dst, x, idx)
        else:
            _gl_store(lw, dst, [x], *_gl_accesses(lw, op, dst, x.view, idx), add="add" in op.attributes)
    elif isinstance(dst, Shared) and isinstance(dst.view, ST) and isinstance(x.view, RT):
        _check_idx(op, idx, 2)
        _check_subtile(op, dst.view, x.view)
        if "deinterleave" in op.attributes:
            _rt_to_st_deinterleaved(lw, op, dst, x, idx)
        else:
            _rt_to_st(lw, dst, x, idx)
    elif isinstance(dst, Shared) and isinstance(dst.view, SV) and isinstance(x.view, RV):
        _check_length(op, idx, dst.view, x.view)
        _rv_to_sv(lw, dst, x, idx)
    else:
        raise error(op, f"tk.store cannot store a {x.view.text()} to {op.operands[0].type}")
    return []


@rule("tk.gl_slice")
def _gl_slice(lw, op, args):
    """The same argument's elements from `start` along the axis; its size is
    clamped to what the parent has from there (never past its end, never
    negative), so ragged accesses through it stay inside the argument."""
    g, start, size = args
    if not isinstance(g, Global):
        raise error(op, "tk.gl_slice slices a gl")
    a = "bdrc".index(ir.StringAttr(op.attributes["axis"]).value)
    origin, bounds = list(g.origin), list(g.bounds)
    room = arith.maxsi(arith.subi(_v(bounds[a]), start), _idx(0))
    origin[a] = _add(origin[a], start)
    bounds[a] = arith.maxsi(arith.minsi(size, room), _idx(0))
    return [Global(view(op.result.type), g.ptr, g.dims, origin, bounds)]


# ---------------------------------------------------------------- split loads, joined stores

@rule("tk.load_split")
def _load_split(lw, op, args):
    """Two rt of columns 2j and 2j + 1 of a gl tile twice their width."""
    src, idx = args[0], args[1:]
    out = _out_view(op, op.results[0].type)
    if not (isinstance(src, (Global, Shared)) and isinstance(out, RT)):
        raise error(op, "tk.load_split splits a gl or st tile into two rt")
    if isinstance(src, Shared):
        _check_idx(op, idx, 2)
        return [Frag(out, vals) for vals in _st_pairs(lw, src, out, idx)]
    _check_idx(op, idx, 4)
    halves = _gl_load(lw, src, out, *_gl_accesses(lw, op, src, out, idx, 2), k=2)
    return [Frag(out, vals) for vals in halves]


@rule("tk.store_join")
def _store_join(lw, op, args):
    """The mirror: columns 2j and 2j + 1 of the gl tile from the two rt."""
    dst, xs, idx = args[0], args[1:3], args[3:]
    if not (isinstance(dst, (Global, Shared)) and all(isinstance(x, Frag) and isinstance(x.view, RT) for x in xs)):
        raise error(op, "tk.store_join joins two rt into a gl or st tile")
    if isinstance(dst, Shared):
        _check_idx(op, idx, 2)
        _st_pairs(lw, dst, xs[0].view, idx, store=list(xs))
        return []
    _check_idx(op, idx, 4)
    _gl_store(lw, dst, list(xs), *_gl_accesses(lw, op, dst, xs[0].view, idx, 2))
    return []


# ---------------------------------------------------------------- group copies

@rule("tk.group_load")
def _group_load(lw, op, args):
    _group_copy(lw, op, dst=args[0], src=args[1], idx=args[2:], to_shared=True)
    return []


@rule("tk.group_store")
def _group_store(lw, op, args):
    _group_copy(lw, op, dst=args[0], src=args[1], idx=args[2:], to_shared=False)
    return []


def _group_copy(lw, op, dst, src, idx, to_shared: bool) -> None:
    """Copy between the Shared `dst`/`src` and the Global one, 16 bytes a thread."""
    sh, gl = (dst, src) if to_shared else (src, dst)
    name = op.name
    if not isinstance(sh, Shared) or not isinstance(gl, Global):
        raise error(op, f"{name} copies between an st/sv and a gl")
    _check_idx(op, idx, 4)
    if sh.view.dtype != gl.view.dtype:
        raise error(op, f"{name} copies without converting: {sh.view.text()} and "
                        f"{gl.view.text()} must have the same dtype")
    warps = ir.IntegerAttr(op.attributes["warps"]).value
    if warps < 1 or lw.warps % warps:
        raise error(op, f"{name}: warps = {warps} must divide the kernel's {lw.warps} warps")
    e = itemsize(sh.view.dtype)
    rows, cols = (sh.view.rows, sh.view.cols) if isinstance(sh.view, ST) else (1, sh.view.length)
    per_row = cols * e // 16  # 16-byte chunks per row (cols is a multiple of 16: >= 2)
    chunks, threads = rows * per_row, 32 * warps
    me = arith.remui(_tid(lw), _idx(threads))  # thread index within the group
    origin = _gl_tile_origin(gl, idx, rows, cols, vector=isinstance(sh.view, SV))
    for it in range((chunks + threads - 1) // threads):
        chunk = _add(me, it * threads)
        if (it + 1) * threads > chunks:  # the last round: not every thread has a chunk
            inside = arith.cmpi(arith.CmpIPredicate.ult, chunk, _idx(chunks))
            branch = scf.IfOp(inside)
            with ir.InsertionPoint(branch.then_block):
                _copy_chunk(lw, sh, gl, origin, chunk, per_row, e, to_shared)
                scf.YieldOp([])
        else:
            _copy_chunk(lw, sh, gl, origin, chunk, per_row, e, to_shared)


def _copy_chunk(lw, sh, gl, origin, chunk, per_row, e, to_shared) -> None:
    row = arith.divui(chunk, _idx(per_row))
    col = arith.muli(arith.remui(chunk, _idx(per_row)), _idx(16 // e))
    g = _gl_ptr(gl, _add(origin, _add(_mul(row, gl.dims[3]), col)))
    s = _sh_ptr(lw, sh, _shared_offset(sh, row, col))
    v4 = ir.VectorType.get([4], ir.IntegerType.get_signless(32))
    if to_shared:
        llvm.store(llvm.load(v4, g, alignment=16), s, alignment=16)
    else:
        llvm.store(llvm.load(v4, s, alignment=16), g, alignment=16)


# ---------------------------------------------------------------- gl <-> registers

def _gl_tile_origin(gl: Global, idx, rows: int, cols: int, vector: bool = False):
    """Element offset of the tile at coordinate (b, d, r, c) in units of its
    shape: rows*cols tiles (r scaled by rows) or, for vectors, row r itself
    (of a slice: from its origin)."""
    b, d, r, c = idx
    _, D, R, C = gl.dims
    row0 = _add(r if vector else _mul(r, rows), gl.origin[2])
    return _add(_mul(_add(_mul(_add(_mul(b, D), d), R), row0), C), _add(_mul(c, cols), gl.origin[3]))


def lane_offset(layout: str, lane: int) -> tuple[int, int]:
    """The lane-dependent part of every fragment coordinate: fragments.py's
    (row, col) of any element is its lane-0 coordinate plus this, (g, 2t) in
    the row layout, (2t, g) in the col layout (g = lane // 4, t = lane % 4)
    and (lane % 16, 8 (lane // 16)) in the wide layout. Splitting it off
    computes the lane's address once per tile."""
    if layout == "wide":
        return lane % 16, 8 * (lane // 16)
    g, t = divmod(lane, 4)
    return (g, 2 * t) if layout == "row" else (2 * t, g)


def _lane_rc(lw, layout: str):
    """lane_offset as index Values (computed once per kernel)."""
    return lw.once(("lane_offset", layout), lambda: lane_offset_ir(layout, lw.lane()))


def lane_offset_ir(layout: str, lane):
    """lane_offset on an index Value: emits arith, returns (row, col)."""
    if layout == "wide":
        return arith.andi(lane, _idx(15)), arith.shli(arith.shrui(lane, _idx(4)), _idx(3))
    g = arith.shrui(lane, _idx(2))
    t2 = arith.shli(arith.andi(lane, _idx(3)), _idx(1))
    return (g, t2) if layout == "row" else (t2, g)


def runs(view: RT):
    """(index, static row, static col, n) per run of a lane's elements in an
    rt: elements index .. index+n-1 are adjacent columns, moved together."""
    n = fragments.RUNS[view.layout]
    for i in range(0, fragments.tile_elems(view.rows, view.cols), n):
        r, c = fragments.tile_coord(view.rows, view.cols, view.layout, i, 0)
        yield i, r, c, n


def vec_runs(view: RV):
    """(index, static element, n) per run of a lane's vector slots; the lane's
    own part of the element is _vec_lane's."""
    n = fragments.vec_run(view.length, view.kind)
    for i in range(0, fragments.vec_elems(view.length, view.kind), n):
        yield i, fragments.vec_coord(view.length, view.kind, i, 0), n


def _vec_lane(lw, view: RV):
    """The lane part of a vector element, as an index Value: lane * chunk
    ("flat"), g ("col") or 2t ("row")."""
    if view.kind == "flat":
        c = fragments.flat_chunk(view.length)
        return lw.once(("flat_lane", c), lambda: arith.muli(lw.lane(), _idx(c)))
    g, t2 = _lane_rc(lw, "row")
    return g if view.kind == "col" else t2


@dataclass
class Edge:
    """A ragged access (tk.load {fill}, tk.store {clip}): each access of a lane
    happens only if its (row, col) lies inside the gl's rows x cols; a load
    reads `fill` there instead (a predicated load, or one from a clamped,
    valid address and a select: no branch)."""
    rows: object
    cols: object
    fill: float | None = None

    def inside(self, row, col):
        lt = arith.CmpIPredicate.ult
        return arith.andi(arith.cmpi(lt, _v(row), _v(self.rows)), arith.cmpi(lt, _v(col), _v(self.cols)))


def edge_of(op, gl: Global) -> Edge | None:
    """The Edge of a ragged tk.load/tk.store on a gl, None for a plain one."""
    attrs = op.attributes
    if "fill" in attrs:
        return Edge(gl.bounds[2], gl.bounds[3], ir.FloatAttr(attrs["fill"]).value)
    return Edge(gl.bounds[2], gl.bounds[3]) if "clip" in attrs else None


def _gl_accesses(lw, op, gl: Global, view, idx, k: int = 1):
    """(accesses, edge) of a load or store of `view` with a gl, as its
    attributes say (fill/clip: ragged; elements: element coordinates)."""
    edge, elements = edge_of(op, gl), "elements" in op.attributes
    if isinstance(view, RT):
        return _tile_accesses(lw, gl, view, idx, edge, elements, k), edge
    return _vec_accesses(lw, gl, view, idx, edge, elements), edge


def _tile_accesses(lw, gl: Global, view: RT, idx, edge, elements: bool = False, k: int = 1):
    """(index, pointer, n, (row, col) or None) per run of an rt at coordinate
    idx (in tiles, or in elements); row and col (absolute in the gl) only for
    a ragged access. k = 2 reads the columns in pairs (load_split): tile
    column j covers gl columns 2j and 2j + 1, a run of n moves 2n elements."""
    rows, cols = (1, 1) if elements else (view.rows, view.cols * k)
    origin = _gl_tile_origin(gl, idx, rows, cols)
    lr, lc = _lane_rc(lw, view.layout)
    lc = _mul(lc, k)
    base = _add(origin, _add(_mul(lr, gl.dims[3]), lc))
    if edge is not None:
        row0, col0 = _add(_mul(idx[2], rows), lr), _add(_mul(idx[3], cols), lc)
    for i, r, c, n in runs(view):
        at = (_add(row0, r), _add(col0, c * k)) if edge is not None else None
        yield i, _gl_ptr(gl, _add(base, _add(_mul(r, gl.dims[3]), c * k))), n * k, at


def _vec_accesses(lw, gl: Global, view: RV, idx, edge, elements: bool = False):
    """As _tile_accesses for an rv: row idx[2], elements from idx[3] * L (idx[3])."""
    length = 1 if elements else view.length
    lane = _vec_lane(lw, view)
    base = _add(_gl_tile_origin(gl, idx, 1, length, vector=True), lane)
    if edge is not None:
        col0 = _add(_mul(idx[3], length), lane)
    for i, e, n in vec_runs(view):
        at = (idx[2], _add(col0, e)) if edge is not None else None
        yield i, _gl_ptr(gl, _add(base, e)), n, at


def _gl_load(lw, gl: Global, out, accesses, edge, k: int = 1):
    """The fragment values (k = 1), or the k fragments of a split load
    (element 2j of each run to the first, 2j + 1 to the second)."""
    dtype, frags = gl.view.dtype, [[None] * frag_len(out) for _ in range(k)]
    same = out.dtype == dtype  # then the fill is selected into the loaded vector, whole
    bits = _fill_bits(edge.fill, dtype, same) if edge is not None else None
    for i, p, n, at in accesses:
        run = []
        for q, c, m in _pieces(p, dtype, n):
            ok = edge.inside(at[0], _add(at[1], c)) if edge is not None else None
            if ok is not None and bits is not None and m * itemsize(dtype) % 4 == 0:
                run += [_convert(v, dtype, out.dtype) for v in _load_guarded(q, dtype, m, ok, bits)]
                continue
            if ok is not None:
                q = arith.select(ok, q, gl.ptr)
            for v in _load_piece(q, dtype, m, ok if same else None, edge.fill if edge is not None else None):
                v = _convert(v, dtype, out.dtype)
                if ok is not None and not same:
                    v = arith.select(ok, v, arith.constant(scalar_type(out.dtype), edge.fill))
                run.append(v)
        for j, v in enumerate(run):
            frags[j % k][i + j // k] = v
    return frags[0] if k == 1 else frags


def _gl_scalar(lw, op, gl: Global, idx, x):
    """One element at element coordinates (b, d, r, c), bounds-checked on r
    and c like a ragged access: a load by every lane (one address: a
    broadcast) giving `fill` outside, or a store by lane 0 where inside."""
    edge = edge_of(op, gl)
    if edge is None or "elements" not in op.attributes:
        raise error(op, f"{op.name} of one element needs element coordinates and "
                        f"{'fill' if x is None else 'clip'}")
    p = _gl_ptr(gl, _gl_tile_origin(gl, idx, 1, 1))
    ok = edge.inside(idx[2], idx[3])
    dtype = gl.view.dtype
    if x is None:  # an f32, or an i32 from an index gl
        out = "i32" if dtype == "i32" else "f32"
        v = _convert(_load_piece(arith.select(ok, p, gl.ptr), dtype, 1)[0], dtype, out)
        fill = int(edge.fill) if out == "i32" else edge.fill
        return arith.select(ok, v, arith.constant(scalar_type(out), fill))
    first = arith.cmpi(arith.CmpIPredicate.eq, lw.lane(), _idx(0))
    branch = scf.IfOp(arith.andi(ok, first))
    with ir.InsertionPoint(branch.then_block):
        _store_piece(p, [_convert(x, "f32", dtype)], dtype)
        scf.YieldOp([])


def _gl_store(lw, gl: Global, xs: list, accesses, edge, add: bool = False) -> None:
    """Store fragment xs[0], or interleave the k fragments xs (store_join);
    add: atomically add each f32 element instead (red.global.add.f32)."""
    dtype, k = gl.view.dtype, len(xs)
    put = _add_piece if add else _store_piece
    for i, p, n, at in accesses:
        vals = [_convert(xs[j % k].vals[i + j // k], xs[0].view.dtype, dtype) for j in range(n)]
        for q, c, m in _pieces(p, dtype, n):
            if edge is None:
                put(q, vals[c:c + m], dtype)
                continue
            branch = scf.IfOp(edge.inside(at[0], _add(at[1], c)))
            with ir.InsertionPoint(branch.then_block):
                put(q, vals[c:c + m], dtype)
                scf.YieldOp([])


def _gl_add_packed(lw, op, gl: Global, x: Frag, idx) -> None:
    """tk.store {add, packed}: an f32 row-layout rt added into an f32 gl, a
    lane's four values of each 16-column block and row (columns 2t, 2t + 1,
    2t + 8, 2t + 9) at columns 4t .. 4t + 3 of that block: one 16-byte
    red.global.add.v4.f32 where the pairs take two."""
    view = x.view
    if not (view.dtype == gl.view.dtype == "f32" and view.layout == "row" and "add" in op.attributes):
        raise error(op, f"tk.store {{packed}} adds an f32 row-layout rt into an f32 gl, got {view.text()}")
    edge = edge_of(op, gl)
    g, t2 = _lane_rc(lw, "row")
    lc = _mul(t2, 2)
    base = _add(_gl_tile_origin(gl, idx, view.rows, view.cols), _add(_mul(g, gl.dims[3]), lc))
    row0, col0 = _add(_mul(idx[2], view.rows), g), _add(_mul(idx[3], view.cols), lc)
    for bi in range(view.rows // 16):
        for bj in range(view.cols // 16):
            first = fragments.tile_index(view.rows, view.cols, bi, bj, 0)
            for half, ks in ((0, (0, 1, 4, 5)), (1, (2, 3, 6, 7))):
                r, c = 16 * bi + 8 * half, 16 * bj
                p = _gl_ptr(gl, _add(base, _add(_mul(r, gl.dims[3]), c)))
                vals = [x.vals[first + k] for k in ks]

                def red(p=p, vals=vals):
                    llvm.inline_asm(None, [p, *vals], "red.global.add.v4.f32 [$0], {$1, $2, $3, $4};",
                                    "l,f,f,f,f", has_side_effects=True)
                if edge is None:
                    red()
                    continue
                branch = scf.IfOp(edge.inside(_add(row0, r), _add(col0, c)))
                with ir.InsertionPoint(branch.then_block):
                    red()
                    scf.YieldOp([])


def _add_piece(ptr, vals: list, dtype: str) -> None:
    """Atomic adds of consecutive f32 elements at ptr: no value comes back
    (red, not atom); a pair as one red.global.add.v2.f32 (PTX ISA 8.1,
    sm_90: half the L2 reductions, which bound the atomic dQ of attention's
    backward), an odd one alone."""
    for k in range(0, len(vals), 2):
        q = ptr if k == 0 else llvm.getelementptr(ptr.type, ptr, [], ir.DenseI32ArrayAttr.get([k]),
                                                  scalar_type(dtype), 0)
        if k + 1 < len(vals):
            llvm.inline_asm(None, [q, vals[k], vals[k + 1]], "red.global.add.v2.f32 [$0], {$1, $2};",
                            "l,f,f", has_side_effects=True)
        else:
            llvm.inline_asm(None, [q, vals[k]], "red.global.add.f32 [$0], $1;", "l,f",
                            has_side_effects=True)


# ---------------------------------------------------------------- shared <-> registers

def ldmatrix_row_col(layout: str, lane: int) -> tuple[int, int]:
    """(row, col) in a 16x16 base tile of the 8-element row whose address
    `lane` gives to ldmatrix/stmatrix .x4. Matrix q = lane // 8 must land in
    registers (e_2q, e_2q+1) of fragments.py: quadrant order
    (0,0), (8,0), (0,8), (8,8) for the row layout; with .trans (col layout)
    e_2q holds the transposed matrix, so the order is (0,0), (0,8), (8,0), (8,8)."""
    q, r = divmod(lane, 8)
    lo, hi = q & 1, q >> 1
    if layout == "row":
        return lo * 8 + r, hi * 8
    return hi * 8 + r, lo * 8


def _ldmatrix_lane(lw, layout: str):
    """ldmatrix_row_col as index Values (computed once per kernel)."""
    return lw.once(("ldmatrix", layout), lambda: ldmatrix_row_col_ir(layout, lw.lane()))


def ldmatrix_row_col_ir(layout: str, lane):
    """ldmatrix_row_col on an index Value: emits arith, returns (row, col)."""
    r = arith.andi(lane, _idx(7))
    lo = arith.shli(arith.andi(arith.shrui(lane, _idx(3)), _idx(1)), _idx(3))
    hi = arith.shli(arith.shrui(lane, _idx(4)), _idx(3))
    return (arith.addi(lo, r), hi) if layout == "row" else (arith.addi(hi, r), lo)


def _uses_ldmatrix(st: ST, rt: RT) -> bool:
    return itemsize(st.dtype) == 2 and rt.layout != "wide"


def _st_to_rt(lw, sh: Shared, out: RT, idx):
    st = sh.view
    r0, c0 = _mul(idx[0], out.rows), _mul(idx[1], out.cols)
    if not _uses_ldmatrix(st, out):
        return _st_elems(lw, sh, out, r0, c0, store=None)
    lr, lc = _ldmatrix_lane(lw, out.layout)
    vals = []
    regs_t = ir.Type.parse("!llvm.struct<(i32, i32, i32, i32)>")
    for bi in range(out.rows // 16):
        for bj in range(out.cols // 16):
            addr, imm = _matrix_address(lw, sh, out, r0, bi * 16, lr, c0, bj * 16, lc)
            regs = llvm.inline_asm(
                regs_t, [addr], f"ldmatrix.sync.aligned.m8n8.x4{_trans(out)}.shared.b16 "
                f"{{$0, $1, $2, $3}}, [$4+{imm}];", "=r,=r,=r,=r,r", has_side_effects=True)
            for q in range(4):
                pair = llvm.bitcast(_vec2(st.dtype), llvm.extractvalue(ir.IntegerType.get_signless(32), regs, ir.DenseI64ArrayAttr.get([q])))
                for h in range(2):
                    vals.append(_convert(llvm.extractelement(pair, _i32(h)), st.dtype, out.dtype))
    return vals


def _rt_to_st(lw, sh: Shared, x: Frag, idx) -> None:
    st, out = sh.view, x.view
    r0, c0 = _mul(idx[0], out.rows), _mul(idx[1], out.cols)
    if not _uses_ldmatrix(st, out):
        _st_elems(lw, sh, out, r0, c0, store=x)
        return
    lr, lc = _ldmatrix_lane(lw, out.layout)
    i32 = ir.IntegerType.get_signless(32)
    for bi in range(out.rows // 16):
        for bj in range(out.cols // 16):
            addr, imm = _matrix_address(lw, sh, out, r0, bi * 16, lr, c0, bj * 16, lc)
            first = fragments.tile_index(out.rows, out.cols, bi, bj, 0)
            regs = []
            for q in range(4):
                pair = [_convert(x.vals[first + 2 * q + h], out.dtype, st.dtype) for h in range(2)]
                regs.append(llvm.bitcast(i32, _pack(pair, st.dtype)))
            llvm.inline_asm(None, [addr, *regs], f"stmatrix.sync.aligned.m8n8.x4{_trans(out)}"
                            f".shared.b16 [$0+{imm}], {{$1, $2, $3, $4}};", "r,r,r,r,r",
                            has_side_effects=True)


def deinterleaved_row_col(lane: int) -> tuple[int, int]:
    """(row, col) in an 8-column half of an f32 base tile of the 16-byte row
    whose address `lane` gives to a deinterleaving stmatrix .x4: matrix
    q = lane // 8 is the half's register q (fragments.py: rows 8 (q // 2) up,
    the even columns for q even, the odd ones for q odd), whose 4 words of a
    row land at columns 4 (q % 2) .. 4 (q % 2) + 3."""
    q, r = divmod(lane, 8)
    return (q >> 1) * 8 + r, (q & 1) * 4


def _rt_to_st_deinterleaved(lw, op, sh: Shared, x: Frag, idx) -> None:
    """tk.store {deinterleave}: an f32 row-layout rt into an f32 st by
    stmatrix, each 32-bit register one b16 pair of the instruction. An
    8-column group of the tile lands as its 4 even columns, then its 4 odd
    ones: 16-byte rows, which a 128B swizzle spreads over every bank, in half
    the instructions of the 8-byte pair stores. Whoever reads the st (a TMA
    store to tkc's own accumulator) takes the columns in that order."""
    st, out = sh.view, x.view
    if not (st.dtype == out.dtype == "f32" and out.layout == "row"):
        raise error(op, f"tk.store {{deinterleave}} stores an f32 row-layout rt into an f32 st, got "
                        f"{out.text()} into {st.text()}")
    r0, c0 = _mul(idx[0], out.rows), _mul(idx[1], out.cols)
    lane = lw.lane()
    lr = lw.once("deinterleaved_row", lambda: arith.addi(
        arith.shli(arith.shrui(lane, _idx(4)), _idx(3)), arith.andi(lane, _idx(7))))
    lc = lw.once("deinterleaved_col", lambda: arith.shli(arith.andi(arith.shrui(lane, _idx(3)), _idx(1)),
                                                         _idx(2)))
    i32 = ir.IntegerType.get_signless(32)
    for bi in range(out.rows // 16):
        for bj in range(out.cols // 16):
            first = fragments.tile_index(out.rows, out.cols, bi, bj, 0)
            for h in range(2):
                addr, imm = _matrix_address(lw, sh, out, r0, bi * 16, lr, c0, bj * 16 + 8 * h, lc)
                regs = [llvm.bitcast(i32, x.vals[first + 4 * h + q]) for q in range(4)]
                llvm.inline_asm(None, [addr, *regs], "stmatrix.sync.aligned.m8n8.x4.shared.b16 "
                                f"[$0+{imm}], {{$1, $2, $3, $4}};", "r,r,r,r,r", has_side_effects=True)


def _address(sh: Shared, rt: RT, r0, r: int, lr, c0, c: int, lc):
    """shared.address of element (r0 + r + lr, c0 + c + lc) of an `rt`-shaped
    access at run-time subtile (r0, c0) (multiples of rt's rows and cols),
    static offsets r, c and the lane's lr, lc."""
    return _add(*_address_parts(sh, rt, r0, r, lr, c0, c, lc))


def _address_parts(sh: Shared, rt: RT, r0, r: int, lr, c0, c: int, lc):
    """_address as (run-time part, constant bytes). The parts that are whole
    swizzle periods (rows in eights, columns in whole panels) are added
    after the swizzle, not XOR-ed into it: then every tile and subtile
    position shares the lane's swizzled offset and differs from it by a
    warp-uniform or constant term (an immediate or uniform register in
    SASS), instead of holding one address register per position."""
    st = sh.view
    s, e = shared.swizzle_bytes(st), itemsize(st.dtype)
    panel = s // e if s else 1                  # columns of one panel (unswizzled: any column)
    row_step = s if s else st.cols * e          # bytes per row inside a panel
    col_step = sh.pitch * e if s else e         # bytes per column, over whole panels
    c_in, c_out = (0, c0) if rt.cols % panel == 0 else (c0, 0)
    inner = shared.address(st, _v(_add(lr, r % 8)), _v(_add(_add(lc, c % panel), c_in)), sh.pitch)
    terms = [inner, _mul(r0, row_step), _mul(c_out, col_step),
             (r - r % 8) * row_step + (c - c % panel) * col_step]
    return (functools.reduce(_add, [t for t in terms if not isinstance(t, int)]),
            sum(t for t in terms if isinstance(t, int)))


def _matrix_address(lw, sh: Shared, rt: RT, r0, r: int, lr, c0, c: int, lc):
    """_address for ldmatrix / stmatrix as (i32 shared address, constant byte
    offset): the constant goes into the instruction ([addr+imm]) so that
    every tile and subtile position of a loop shares the lane's address
    register; a separate pointer per position (what nvvm.ldmatrix takes)
    was hoisted out of the loop as a register each, and spilled."""
    off, const = _address_parts(sh, rt, r0, r, lr, c0, c, lc)
    ptr = _sh_ptr(lw, sh, off, static=False)
    return llvm.ptrtoint(ir.IntegerType.get_signless(32), ptr), const + sh.offset


def _st_elems(lw, sh: Shared, view: RT, r0, c0, store):
    """ld/st.shared per run of adjacent columns (runs): the f32 and wide paths.
    A run of at most 16 bytes never crosses a swizzle chunk or a panel."""
    st = sh.view
    lr, lc = _lane_rc(lw, view.layout)
    vals = [None] * fragments.tile_elems(view.rows, view.cols)
    for i, r, c, n in runs(view):
        p = _sh_ptr(lw, sh, _address(sh, view, r0, r, lr, c0, c, lc))
        if store is None:
            for k, v in enumerate(_load_n(p, st.dtype, n)):
                vals[i + k] = _convert(v, st.dtype, view.dtype)
        else:
            _store_n(p, [_convert(store.vals[i + k], view.dtype, st.dtype) for k in range(n)], st.dtype)
    return vals


def _st_pairs(lw, sh: Shared, view: RT, idx, store=None):
    """load_split (store None: returns the even and odd fragments) or
    store_join (store: the two Frags) with an st: a lane's run of n columns
    of `view` is 2n adjacent st columns, moved in pieces of up to 16 bytes,
    each at its own swizzled address (aligned: 2n divides the run's start)."""
    st, k = sh.view, 2
    r0, c0 = _mul(idx[0], view.rows), _mul(idx[1], k * view.cols)
    lr, lc = _lane_rc(lw, view.layout)
    frags = [[None] * fragments.tile_elems(view.rows, view.cols) for _ in range(k)]
    step = fragments.access_elems(16, st.dtype)
    for i, r, c, n in runs(view):
        for e in range(0, k * n, step):
            p = _sh_ptr(lw, sh, _address(sh, view.with_(cols=k * view.cols), r0, r, lr,
                                         c0, k * c + e, _mul(lc, k)))
            m = min(step, k * n - e)
            if store is None:
                for j, v in enumerate(_load_n(p, st.dtype, m), e):
                    frags[j % k][i + j // k] = _convert(v, st.dtype, view.dtype)
            else:
                _store_n(p, [_convert(store[j % k].vals[i + j // k], view.dtype, st.dtype)
                             for j in range(e, e + m)], st.dtype)
    return frags


def _sv_to_rv(lw, sh: Shared, out: RV, idx):
    """The rv at piece idx[0] (in units of its length; 0 without one) of the sv."""
    e, sv = itemsize(sh.view.dtype), sh.view
    lane = _add(_vec_lane(lw, out), _mul(idx[0], out.length) if idx else 0)
    vals = [None] * fragments.vec_elems(out.length, out.kind)
    for i, el, n in vec_runs(out):
        for k, v in enumerate(_load_n(_sh_ptr(lw, sh, _mul(_add(lane, el), e)), sv.dtype, n)):
            vals[i + k] = _convert(v, sv.dtype, out.dtype)
    return vals


def _rv_to_sv(lw, sh: Shared, x: Frag, idx) -> None:
    e, sv, v = itemsize(sh.view.dtype), sh.view, x.view
    lane = _add(_vec_lane(lw, v), _mul(idx[0], v.length) if idx else 0)
    for i, el, n in vec_runs(v):
        _store_n(_sh_ptr(lw, sh, _mul(_add(lane, el), e)),
                 [_convert(x.vals[i + k], v.dtype, sv.dtype) for k in range(n)], sv.dtype)


def _shared_offset(sh: Shared, row, col):
    """Byte offset inside the st/sv of element (row, col) (row 0 for an sv)."""
    if isinstance(sh.view, SV):
        return arith.muli(_v(col), _idx(itemsize(sh.view.dtype)))
    return shared.address(sh.view, _v(row), _v(col), sh.pitch)


# ---------------------------------------------------------------- pointers and scalars

def _tid(lw):
    return lw.once(("tid_index",), lambda: arith.index_castui(ir.IndexType.get(), lw.tid_i32()))


def _gl_ptr(gl: Global, elems):
    """&gl[elems] (an element offset, index Value or int)."""
    off = arith.index_cast(ir.IntegerType.get_signless(64), _v(elems))
    return llvm.getelementptr(ir.Type.parse("!llvm.ptr<1>"), gl.ptr, [off], ir.DenseI32ArrayAttr.get([_DYN]),
                              scalar_type(gl.view.dtype), 0)


def _sh_ptr(lw, sh: Shared, byte_off, static: bool = True):
    """&shared[sh.offset + sh.dynamic + byte_off] as an !llvm.ptr<3>
    (static=False: without sh.offset)."""
    base = lw.once(("shared_base",), lambda: shared.base(lw))
    off = _add(byte_off, sh.offset if static else 0)
    if sh.dynamic is not None:  # a ring slot or a subtile at a run-time index
        off = _add(off, sh.dynamic)
    off = arith.index_cast(ir.IntegerType.get_signless(32), _v(off))
    return llvm.getelementptr(ir.Type.parse("!llvm.ptr<3>"), base, [off], ir.DenseI32ArrayAttr.get([_DYN]),
                              ir.IntegerType.get_signless(8), 0)


def _pieces(ptr, dtype: str, n: int):
    """(pointer, first element, count) of the accesses moving n consecutive
    elements at ptr: as few as possible, each at most 16 bytes and aligned to
    its size (the caller guarantees ptr is aligned to the first one's)."""
    m = fragments.access_elems(n, dtype)
    for k in range(0, n, m):
        p = ptr if k == 0 else llvm.getelementptr(ptr.type, ptr, [], ir.DenseI32ArrayAttr.get([k]),
                                                   scalar_type(dtype), 0)
        yield p, k, min(m, n - k)


def _load_piece(ptr, dtype: str, m: int, keep=None, fill: float | None = None) -> list:
    """m consecutive elements at ptr as one access (aligned to its size); where
    the i1 `keep` is false they read `fill` instead (one select per register)."""
    el = scalar_type(dtype)
    if m == 1:
        v = llvm.load(el, ptr, alignment=itemsize(dtype))
        return [v if keep is None else arith.select(keep, v, arith.constant(el, fill))]
    t = ir.VectorType.get([m], el)
    vec = llvm.load(t, ptr, alignment=m * itemsize(dtype))
    if keep is not None:
        vec = arith.select(keep, vec, arith.constant(t, ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(el, fill))))
    return [llvm.extractelement(vec, _i32(k)) for k in range(m)]


def _fill_bits(fill: float, dtype: str, rounded: bool) -> int | None:
    """fill's bit pattern in dtype (rounded to nearest even), or None where
    it is not exact and not `rounded` (a converting load must give the fill
    in the result's dtype: then it is selected in after the conversion)."""
    f32 = struct.unpack("<I", struct.pack("<f", fill))[0]
    if dtype == "f32":
        return f32
    if dtype == "bf16":
        out = (f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16 if fill == fill else 0x7FC0
        return out if rounded or out << 16 == f32 else None
    try:
        out = struct.unpack("<H", struct.pack("<e", fill))[0]
    except OverflowError:
        return None
    return out if rounded or struct.unpack("<e", struct.pack("<H", out))[0] == fill else None


def _load_guarded(ptr, dtype: str, m: int, ok, bits: int) -> list:
    """m consecutive elements at ptr (a multiple of 4 bytes, aligned to the
    access) read only where the i1 `ok` holds, else the fill `bits`: the
    registers are preset and the load predicated (`@p ld.global`), as Triton
    does for masked loads. Unlike a load followed by a select, this leaves
    ptxas free to issue every load of a kernel before the first use (with a
    select right behind each load it reuses one register quad and waits on
    each load in turn: docs/tile-ir.md, on ragged accesses). No address is
    clamped: a load that is off is not made."""
    words, el = m * itemsize(dtype) // 4, scalar_type(dtype)
    half = itemsize(dtype) == 2
    word_t = ir.VectorType.get([2], el) if half else el
    fill = (bits | bits << 16) if half else bits
    presets = "".join(f"mov.b32 ${w}, 0x{fill:08x}; " if half else f"mov.b32 ${w}, 0f{fill:08X}; "
                      for w in range(words))
    dst = ", ".join(f"${w}" for w in range(words))
    shape = {1: "", 2: ".v2", 4: ".v4"}[words]
    text = (f"{{ {presets}"
            f"@${words + 1} ld.global{shape}.b32 {'{' + dst + '}' if words > 1 else dst}, [${words}]; }}")
    res_t = word_t if words == 1 else llvm.StructType.get_literal([word_t] * words)
    res = llvm.inline_asm(res_t, [ptr, ok], text, ",".join(["=" + ("r" if half else "f")] * words) + ",l,b",
                          has_side_effects=True)
    regs = [res] if words == 1 else [llvm.extractvalue(word_t, res, ir.DenseI64ArrayAttr.get([w]))
                                     for w in range(words)]
    if not half:
        return regs
    return [llvm.extractelement(r, _i32(h)) for r in regs for h in range(2)]


def _store_piece(ptr, vals: list, dtype: str) -> None:
    v = vals[0] if len(vals) == 1 else _pack(vals, dtype)
    llvm.store(v, ptr, alignment=len(vals) * itemsize(dtype))


def _load_n(ptr, dtype: str, n: int) -> list:
    """n consecutive elements at ptr, in accesses of up to 16 bytes."""
    return [v for p, _, m in _pieces(ptr, dtype, n) for v in _load_piece(p, dtype, m)]


def _store_n(ptr, vals: list, dtype: str) -> None:
    for p, k, m in _pieces(ptr, dtype, len(vals)):
        _store_piece(p, vals[k:k + m], dtype)


def _pack(vals: list, dtype: str):
    vec = llvm.mlir_undef(ir.VectorType.get([len(vals)], scalar_type(dtype)))
    for k, v in enumerate(vals):
        vec = llvm.insertelement(vec, v, _i32(k))
    return vec


def _convert(v, src: str, dst: str):
    """Element type conversion; narrowing rounds to nearest even (fptrunc)."""
    if src == dst:
        return v
    if src != "f32":
        v = arith.extf(ir.F32Type.get(), v)
    return v if dst == "f32" else arith.truncf(scalar_type(dst), v)


def _vec2(dtype: str):
    return ir.VectorType.get([2], scalar_type(dtype))


def _trans(rt: RT) -> str:
    """ldmatrix / stmatrix's qualifier for a tile of rt's layout."""
    return ".trans" if rt.layout == "col" else ""


def _i32(n: int):
    i32 = ir.IntegerType.get_signless(32)
    return llvm.ConstantOp(i32, ir.IntegerAttr.get(i32, n)).result


# ---------------------------------------------------------------- index arithmetic (folds ints)

def _idx(n: int):
    return arith.constant(ir.IndexType.get(), int(n))


def _v(x):
    return x if isinstance(x, ir.Value) else _idx(x)


def _add(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(b, int) and b == 0:
        return a
    if isinstance(a, int) and a == 0:
        return b
    return arith.addi(_v(a), _v(b))


def _mul(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if (isinstance(a, int) and a == 0) or (isinstance(b, int) and b == 0):
        return 0
    if isinstance(b, int) and b == 1:
        return a
    if isinstance(a, int) and a == 1:
        return b
    return arith.muli(_v(a), _v(b))


# ---------------------------------------------------------------- checks (located errors)

def _out_view(op, t):
    v = view(t)
    if not isinstance(v, (RT, RV)):
        raise error(op, f"tk.load gives an rt or rv, found {t}")
    return v


def _check_idx(op, idx, n: int) -> None:
    if len(idx) != n:
        raise error(op, f"{op.name} here needs {n} index operands, found {len(idx)}")
    for i in idx:
        if not isinstance(i, ir.Value):
            raise error(op, f"{op.name}: coordinates must be index values")


def _check_rank(op, gl, x) -> None:
    if isinstance(x, RT) and x.rows % 16 or isinstance(x, RT) and x.cols % 16:
        raise error(op, f"{x.text()}: rows and cols must be multiples of 16")


def _check_subtile(op, st: ST, rt: RT) -> None:
    if st.rows % rt.rows or st.cols % rt.cols:
        raise error(op, f"{op.name}: a {rt.rows}x{rt.cols} rt does not tile the "
                        f"{st.rows}x{st.cols} st (its shape must divide the st's)")


def _check_length(op, idx, sv: SV, rv: RV) -> None:
    if len(idx) > 1:
        raise error(op, f"{op.name}: an sv takes 0 or 1 index operands, found {len(idx)}")
    _check_idx(op, idx, len(idx))
    if sv.length % rv.length:
        raise error(op, f"{op.name}: rv length {rv.length} does not divide sv length {sv.length}")
