"""st/sv <-> registers.

16-bit tiles move by one `ldmatrix.x4` / `stmatrix.x4` per 16x16 base tile
(`.trans` for the col layout); lane l names row l%8 of 8x8 matrix l//8, and
matrix i lands in registers (e_2i, e_2i+1) (hopper.lanes.ldmatrix_row_col).
An 8-row tile moves by `.x2` (its two 8x8 matrices per 16 columns).
f32 tiles and the wide layout move per element or run, like gl. An address
is the operand's static offset, plus its dynamic part (a ring slot, a
run-time subtile), plus the element's `smem.address` in the panel layout the
tile lives in (`Shared.pitch`: a row subtile keeps its parent's panel
stride), cast to i32 (a byte GEP).
"""
from __future__ import annotations

import functools

from mlir import ir
from mlir.dialects import arith, llvm

from ..diagnostics import error
from ..dtypes import itemsize
from ..dialect.types import RT, RV, ST, SV
from ..hopper import fragments, shared as smem
from ..hopper.lanes import runs, vec_runs
from .access import _add, _convert, _i32, _idx, _load_n, _mul, _pack, _sh_ptr, _store_n, _trans, _v, _vec2
from .core import Frag, Shared
from .lanes import _ldmatrix_lane, _lane_rc, _vec_lane

def _uses_ldmatrix(st: ST, rt: RT) -> bool:
    return itemsize(st.dtype) == 2 and rt.layout != "wide"


def _st_to_rt(lw, sh: Shared, out: RT, idx):
    st = sh.view
    r0, c0 = _mul(idx[0], out.rows), _mul(idx[1], out.cols)
    if not _uses_ldmatrix(st, out):
        return _st_elems(lw, sh, out, r0, c0, store=None)
    half = out.rows == fragments.HALF
    n = 2 if half else 4                  # 8x8 matrices per base tile (an 8-row tile's: 2)
    lr, lc = _ldmatrix_lane(lw, out.layout, half)
    vals = []
    regs_t = ir.Type.parse(f"!llvm.struct<({', '.join(['i32'] * n)})>")
    outs = ", ".join(f"${q}" for q in range(n))
    for bi in range(-(-out.rows // 16)):
        for bj in range(out.cols // 16):
            addr, imm = _matrix_address(lw, sh, out, r0, bi * 16, lr, c0, bj * 16, lc)
            regs = llvm.inline_asm(
                regs_t, [addr], f"ldmatrix.sync.aligned.m8n8.x{n}{_trans(out)}.shared.b16 "
                f"{{{outs}}}, [${n}+{imm}];", "=r," * n + "r", has_side_effects=True)
            for q in range(n):
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
    half = out.rows == fragments.HALF
    n = 2 if half else 4
    lr, lc = _ldmatrix_lane(lw, out.layout, half)
    i32 = ir.IntegerType.get_signless(32)
    for bi in range(-(-out.rows // 16)):
        for bj in range(out.cols // 16):
            addr, imm = _matrix_address(lw, sh, out, r0, bi * 16, lr, c0, bj * 16, lc)
            first = fragments.tile_index(out.rows, out.cols, bi, bj, 0)
            regs = []
            for q in range(n):
                pair = [_convert(x.vals[first + 2 * q + h], out.dtype, st.dtype) for h in range(2)]
                regs.append(llvm.bitcast(i32, _pack(pair, st.dtype)))
            ins = ", ".join(f"${q + 1}" for q in range(n))
            llvm.inline_asm(None, [addr, *regs], f"stmatrix.sync.aligned.m8n8.x{n}{_trans(out)}"
                            f".shared.b16 [$0+{imm}], {{{ins}}};", "r," * n + "r",
                            has_side_effects=True)


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
    half = out.rows == fragments.HALF     # .x2: registers 0, 1 of each half (rows 0-7), lanes 0-15
    n = 2 if half else 4
    lr = lw.once(("deinterleaved_row", half), lambda: arith.andi(lane, _idx(7)) if half else arith.addi(
        arith.shli(arith.shrui(lane, _idx(4)), _idx(3)), arith.andi(lane, _idx(7))))
    lc = lw.once("deinterleaved_col", lambda: arith.shli(arith.andi(arith.shrui(lane, _idx(3)), _idx(1)),
                                                         _idx(2)))
    i32 = ir.IntegerType.get_signless(32)
    ins = ", ".join(f"${q + 1}" for q in range(n))
    for bi in range(-(-out.rows // 16)):
        for bj in range(out.cols // 16):
            first = fragments.tile_index(out.rows, out.cols, bi, bj, 0)
            for h in range(2):
                addr, imm = _matrix_address(lw, sh, out, r0, bi * 16, lr, c0, bj * 16 + 8 * h, lc)
                regs = [llvm.bitcast(i32, x.vals[first + n * h + q]) for q in range(n)]
                llvm.inline_asm(None, [addr, *regs], f"stmatrix.sync.aligned.m8n8.x{n}.shared.b16 "
                                f"[$0+{imm}], {{{ins}}};", "r," * n + "r", has_side_effects=True)


def _address(sh: Shared, rt: RT, r0, r: int, lr, c0, c: int, lc):
    """smem.address of element (r0 + r + lr, c0 + c + lc) of an `rt`-shaped
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
    s, e = smem.swizzle_bytes(st), itemsize(st.dtype)
    panel = s // e if s else 1                  # columns of one panel (unswizzled: any column)
    row_step = s if s else st.cols * e          # bytes per row inside a panel
    col_step = sh.pitch * e if s else e         # bytes per column, over whole panels
    c_in, c_out = (0, c0) if rt.cols % panel == 0 else (c0, 0)
    inner = smem.address(st, _v(_add(lr, r % 8)), _v(_add(_add(lc, c % panel), c_in)), sh.pitch)
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


def _sv_scalar(lw, sh: Shared, i):
    """Element i of an f32 sv, the same address for every lane (a broadcast)."""
    return _load_n(_sh_ptr(lw, sh, _mul(i, itemsize(sh.view.dtype))), sh.view.dtype, 1)[0]


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
    return smem.address(sh.view, _v(row), _v(col), sh.pitch)
