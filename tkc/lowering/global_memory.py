"""gl <-> registers: every lane moves its own elements of a tile or vector.

In the row layout the pairs (k, k+1) are adjacent columns, moved as one
4-byte (16-bit types) or 8-byte (f32) access; in the col layout pairs are
adjacent rows: one access per element. Lanes holding the same slot of an rv
(replicated over quads or columns of lanes) all store the same value: the
duplicate stores are benign and cost less than a branch. A ragged access
(`Edge`) guards each access by the gl's bounds. Addresses are `index`
arithmetic cast to i64 (an element GEP).
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, llvm, scf

from ..diagnostics import error
from ..dtypes import is_fp8, itemsize
from ..dialect.types import RT, RV
from ..hopper import fragments
from ..hopper.lanes import runs, vec_runs
from .access import (_DYN, _add, _convert, _fill_bits, _gl_ptr, _idx, _load_guarded, _load_piece, _mul,
                     _pieces, _store_piece, _v)
from ..hopper.registers import frag_len, scalar_type
from .core import Frag, Global
from .fp8 import pack_bytes
from .lanes import _lane_rc, _vec_lane
from .reduce import shuffle_xor

def _gl_tile_origin(gl: Global, idx, rows: int, cols: int, vector: bool = False):
    """Element offset of the tile at coordinate (b, d, r, c) in units of its
    shape: rows*cols tiles (r scaled by rows) or, for vectors, row r itself
    (of a slice: from its origin); a strided gl's through its strides."""
    b, d, r, c = idx
    _, D, R, C = gl.dims
    row0 = _add(r if vector else _mul(r, rows), gl.origin[2])
    col0 = _add(_mul(c, cols), gl.origin[3])
    if gl.strides is not None:
        sb, sd, sr = gl.strides
        return _add(_add(_mul(b, sb), _mul(d, sd)), _add(_mul(row0, sr), col0))
    return _add(_mul(_add(_mul(_add(_mul(b, D), d), R), row0), C), col0)


def fill_value(attr) -> float | int:
    """A load's fill: an f32 attribute, or an integer one (an integer result's)."""
    if isinstance(attr, ir.IntegerAttr):
        return ir.IntegerAttr(attr).value
    return ir.FloatAttr(attr).value


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
        return Edge(gl.bounds[2], gl.bounds[3], fill_value(attrs["fill"]))
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
    base = _add(origin, _add(_mul(lr, gl.pitch), lc))
    if edge is not None:
        row0, col0 = _add(_mul(idx[2], rows), lr), _add(_mul(idx[3], cols), lc)
    for i, r, c, n in runs(view):
        at = (_add(row0, r), _add(col0, c * k)) if edge is not None else None
        yield i, _gl_ptr(gl, _add(base, _add(_mul(r, gl.pitch), c * k))), n * k, at


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
    ints = dtype in ("i32", "i64")   # then the element moves as it is (an i32 or i64)
    if x is None:  # an f32, or an i32 / i64 from an integer gl
        out = dtype if ints else "f32"
        v = _convert(_load_piece(arith.select(ok, p, gl.ptr), dtype, 1)[0], dtype, out)
        fill = int(edge.fill) if ints else edge.fill
        return arith.select(ok, v, arith.constant(scalar_type(out), fill))
    first = arith.cmpi(arith.CmpIPredicate.eq, lw.lane(), _idx(0))
    branch = scf.IfOp(arith.andi(ok, first))
    with ir.InsertionPoint(branch.then_block):
        _store_piece(p, [x if ints else _convert(x, "f32", dtype)], dtype)
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


def _gl_store_byte_pairs(lw, gl: Global, x: Frag, accesses, edge) -> None:
    """A 1-byte wide tile in 16-byte stores. A wide lane holds 8 columns of
    each base tile (lanes l and l ^ 16 the two halves of one row): stored as
    they are, a store instruction writes 16 of each 32-byte sector it
    touches (half sectors: ncu counts a quarter of the store sectors as
    excess, and the quantisation kernel ran at half a copy's bandwidth).
    So the two lanes of a row trade one 8-byte half per pair of base tiles
    (columns 32p ..): the low lane then stores columns 32p .. 32p + 15, the
    high one 32p + 16 .. 32p + 31, 16 bytes each, whole sectors. A ragged
    store (clip) guards each 16-byte piece: its gl's columns are a multiple
    of 16 (the launch requirement, hopper/lanes.byte_pairs), so a piece lies
    wholly inside or outside."""
    i8, i32 = ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(32)
    high = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(lw.lane_i32(), lw.const_i32(16)), lw.const_i32(0))
    lc = _lane_rc(lw, "wide")[1]                       # 0 (low lane) or 8 (high lane)
    cells: dict = {}                                   # (row, column) of a run -> (values, pointer, at)
    for (i, p, n, at), (_, r, c, _) in zip(accesses, runs(x.view)):
        cells[r, c] = ([_convert(v, x.view.dtype, gl.view.dtype) for v in x.vals[i:i + n]], p, at)
    for (r, c), (own0, p0, at0) in cells.items():
        if c % 32 == 0:                                # base tiles c / 16 and c / 16 + 1
            own1 = cells[r, c + 16][0]
            w0, w1 = ([pack_bytes(own[k:k + 4]) for k in (0, 4)] for own in (own0, own1))
            send = [arith.select(high, a, b) for a, b in zip(w0, w1)]   # high: run 2p, low: run 2p + 1
            got = [shuffle_xor(lw, w, 16) for w in send]
            words = [arith.select(high, g, a) for g, a in zip(got, w0)] + \
                    [arith.select(high, b, g) for g, b in zip(got, w1)]
            q = llvm.getelementptr(p0.type, p0, [arith.index_cast(i32, lc)], ir.DenseI32ArrayAttr.get([_DYN]), i8, 0)
            if edge is None:
                _store_piece(q, words, "i32")
                continue
            branch = scf.IfOp(edge.inside(at0[0], _add(at0[1], lc)))   # 16 columns, all in or all out
            with ir.InsertionPoint(branch.then_block):
                _store_piece(q, words, "i32")
                scf.YieldOp([])


def _gl_add_packed(lw, op, gl: Global, x: Frag, idx) -> None:
    """tk.store {packed}: a lane's four values of each 16-column block and
    row of a row-layout rt (columns 2t, 2t + 1, 2t + 8, 2t + 9) at columns
    4t .. 4t + 3 of that block. An f32 rt added into an f32 gl {add}: one
    16-byte red.global.add.v4.f32 where the pairs take two. An 8-bit rt into
    a gl of its dtype: one 4-byte st.global.b32 (the block's columns then
    lie in warpgroup.fp8_lane_order()'s order, what an FP8 V^T wants)."""
    view = x.view
    fp8 = is_fp8(view.dtype) and view.dtype == gl.view.dtype and "add" not in op.attributes
    if not (view.layout == "row" and (fp8 or view.dtype == gl.view.dtype == "f32" and "add" in op.attributes)):
        raise error(op, f"tk.store {{packed}} adds an f32 row-layout rt into an f32 gl or stores an 8-bit "
                        f"one into a gl of its dtype, got {view.text()}")
    edge = edge_of(op, gl)
    g, t2 = _lane_rc(lw, "row")
    lc = _mul(t2, 2)
    base = _add(_gl_tile_origin(gl, idx, view.rows, view.cols), _add(_mul(g, gl.pitch), lc))
    row0, col0 = _add(_mul(idx[2], view.rows), g), _add(_mul(idx[3], view.cols), lc)
    halves = ((0, (0, 1, 4, 5)), (1, (2, 3, 6, 7)))[:2 if view.rows % 16 == 0 else 1]  # 8 rows: one
    for bi in range(-(-view.rows // 16)):
        for bj in range(view.cols // 16):
            for half, ks in halves:
                r, c = 16 * bi + 8 * half, 16 * bj
                p = _gl_ptr(gl, _add(base, _add(_mul(r, gl.pitch), c)))
                vals = [x.vals[fragments.tile_index(view.rows, view.cols, bi, bj, k)] for k in ks]

                def red(p=p, vals=vals):
                    if fp8:
                        llvm.inline_asm(None, [p, pack_bytes(vals)], "st.global.b32 [$0], $1;", "l,r",
                                        has_side_effects=True)
                        return
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
