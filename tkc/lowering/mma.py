"""Warp-level mma through mma.sync.m16n8k16, swap_layout and transpose.

mma: for each 16x16 output base tile (i, j) and each 16-wide k block, two
`mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}` (the left and right n8
halves). With the fragment order of fragments.py:

- A registers: pairs (e0,e1) (e2,e3) (e4,e5) (e6,e7) of a row-layout M x K
  base tile are exactly a0..a3 of m16n8k16;
- B registers: a col-layout K x N base tile gives b0, b1 = (e0,e1), (e4,e5)
  for the left half and (e2,e3), (e6,e7) for the right half;
- C/D: e0..e3 of the row-layout f32 accumulator are c0..c3 of the left half,
  e4..e7 of the right half.

An 8-row a or c (M = 8, fragments.HALF_KS) runs the same m16n8k16 with rows
8-15 zero: a1, a3 are zero registers, c2, c3 zero inputs whose results are
dropped. The tensor core then does a 16-row product for 8 rows, half its
throughput; an 8-row b is never needed (N = 8 would be an 8-column c, K = 8
a col-layout 8-row tile: neither is a tile).

The four variants share this register plumbing because the row layout of an
N x K tile *is* the col layout of its K x N transpose (fragments.py: "col"
is the transpose of "row"). So mma_ABt's b (row, N x K) feeds the B operand
as it is, and mma_AtB's a (col, K x M) feeds the A operand as it is; only
which base tile of a and b is used for (i, j, kb) changes.

swap_layout keeps the values and changes the layout: per base tile, each 8x8
quadrant is transposed across the warp (16-bit: movmatrix.trans; f32: two
shuffles per pair) and quadrants 1 and 2 trade places. transpose is
swap_layout followed by renaming base tile (i, j) to (j, i): the col layout
of x read as the row layout of x.T (and vice versa), derived in `transpose`.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, nvvm

from ..diagnostics import error
from ..dialect.types import RT
from ..hopper import fragments
from .compute import frag_arg, result_view
from ..hopper.registers import scalar_type
from .core import Frag, rule

B = fragments.BASE

# op -> (a is transposed (stored K x M, col), b is transposed (stored N x K, row))
VARIANTS = {"tk.mma_ab": (False, False), "tk.mma_abt": (False, True),
            "tk.mma_atb": (True, False), "tk.mma_atbt": (True, True)}

A_PAIRS = ((0, 1), (2, 3), (4, 5), (6, 7))
B_PAIRS = (((0, 1), (4, 5)), ((2, 3), (6, 7)))   # left n8 half, right n8 half
C_HALVES = ((0, 1, 2, 3), (4, 5, 6, 7))


# ---------------------------------------------------------------- mma

def pack(lo: ir.Value, hi: ir.Value, as_i32: bool = True) -> ir.Value:
    """Two 16-bit values as one b32 register (lo in the low half): an i32,
    or the vector<2xf16> NVVM's mma.sync wants for f16 operands."""
    i32 = ir.IntegerType.get_signless(32)
    vec = llvm.mlir_undef(ir.VectorType.get([2], lo.type))
    for pos, v in enumerate((lo, hi)):
        vec = llvm.insertelement(vec, v, arith.constant(i32, pos))
    return llvm.bitcast(i32, vec) if as_i32 else vec


def _operand(lo, hi):
    """An mma.sync A/B register: bf16 pairs as i32, f16 pairs as vector<2xf16>."""
    return pack(lo, hi, as_i32=str(lo.type) == "bf16")


def _mma_shapes(op, a: RT, b: RT, c: RT, at: bool, bt: bool):
    """(M, N, K) of a legal mma, else a located error naming what is wrong."""
    m, ka = (a.cols, a.rows) if at else (a.rows, a.cols)
    n, kb = (b.rows, b.cols) if bt else (b.cols, b.rows)
    want_a, want_b = ("col" if at else "row"), ("row" if bt else "col")
    problems = []
    if a.dtype != b.dtype or a.dtype not in ("bf16", "f16"):
        problems.append(f"a and b must both be bf16 or both f16 (found {a.dtype}, {b.dtype})")
    if a.layout != want_a or b.layout != want_b:
        problems.append(f"a must be {want_a} and b {want_b} layout (found {a.layout}, {b.layout})")
    if ka != kb:
        problems.append(f"inner dims differ ({ka} vs {kb})")
    if c != RT("f32", m, n, "row"):
        problems.append(f"c must be {RT('f32', m, n, 'row').text()} (found {c.text()})")
    if problems:
        raise error(op, f"{op.name}: " + "; ".join(problems))
    return m, n, ka


def _a_regs(lw, a: Frag, at: bool, i: int, kb: int) -> list:
    """a0..a3 of the A operand for output row block i, k block kb; of an
    8-row a (rows 0-7 only) a1 and a3, its rows 8-15, are zero."""
    bi, bj = (kb, i) if at else (i, kb)
    t = a.view
    held = {k: a.vals[fragments.tile_index(t.rows, t.cols, bi, bj, k)] for k in fragments.base_ks(t.rows)}
    return [_operand(held[p], held[q]) if p in held else _zero_operand(lw, t.dtype) for p, q in A_PAIRS]


def _zero_operand(lw, dtype: str):
    """An A register of two zeros (an 8-row a's rows 8-15), as _operand types it."""
    zero = lw.once(("mma_zero", dtype), lambda: arith.constant(scalar_type(dtype), 0.0))
    return _operand(zero, zero)


def _b_regs(b: Frag, bt: bool, j: int, kb: int) -> list:
    """[left-half regs, right-half regs] of the B operand for output column block j."""
    bi, bj = (j, kb) if bt else (kb, j)
    base = fragments.tile_index(b.view.rows, b.view.cols, bi, bj, 0)
    return [[_operand(b.vals[base + p], b.vals[base + q]) for p, q in half] for half in B_PAIRS]


def mma_sync(a_regs, b_regs, c_vals, dtype: str) -> list:
    """One m16n8k16 mma.sync: 4 f32 accumulators in, 4 out."""
    f32 = ir.F32Type.get()
    res = llvm.StructType.get_literal([f32] * 4)
    ptx = ir.Attribute.parse(f"#nvvm.mma_type<{dtype}>")
    d = nvvm.mma_sync(res, ir.Attribute.parse("#nvvm.shape<m = 16, n = 8, k = 16>"),
                      ir.Attribute.parse("#nvvm.mma_layout<row>"),
                      ir.Attribute.parse("#nvvm.mma_layout<col>"),
                      a_regs, b_regs, c_vals,
                      multiplicand_a_ptx_type=ptx, multiplicand_b_ptx_type=ptx)
    return [llvm.extractvalue(f32, d, [n]) for n in range(4)]


@rule(*VARIANTS)
def _mma(lw, op, args):
    a, b, c = (frag_arg(op, x, n) for n, x in enumerate(args))
    at, bt = VARIANTS[op.name]
    m, n, k = _mma_shapes(op, a.view, b.view, c.view, at, bt)
    out = list(c.vals)
    ks = fragments.base_ks(m)
    zero = lw.const_f32(0.0)
    for i in range(-(-m // B)):
        for kb in range(k // B):
            a_regs = _a_regs(lw, a, at, i, kb)  # reused across j
            for j in range(n // B):
                at_e = {e: fragments.tile_index(m, n, i, j, e) for e in ks}
                for half, regs in zip(C_HALVES, _b_regs(b, bt, j, kb)):
                    # an 8-row c: rows 8-15 (c2, c3) in as zeros, their results dropped
                    acc = [out[at_e[e]] if e in at_e else zero for e in half]
                    for e, v in zip(half, mma_sync(a_regs, regs, acc, a.view.dtype)):
                        if e in at_e:
                            out[at_e[e]] = v
    return [Frag(result_view(op), out)]


# ---------------------------------------------------------------- layouts

# New pair p of a base tile comes from old pair SWAP_PAIRS[p], transposed
# across the warp: quadrants 1 (bottom-left) and 2 (top-right) trade places.
SWAP_PAIRS = (0, 2, 1, 3)


def _movmatrix(reg: ir.Value) -> ir.Value:
    i32 = ir.IntegerType.get_signless(32)
    return llvm.inline_asm(i32, [reg], "movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;", "=r,r",
                           has_side_effects=True)


def _unpack(reg: ir.Value, dtype: str) -> list:
    t = scalar_type(dtype)
    vec = llvm.bitcast(ir.VectorType.get([2], t), reg)
    i32 = ir.IntegerType.get_signless(32)
    return [llvm.extractelement(vec, arith.constant(i32, n)) for n in range(2)]


def _transpose_pair_16(lo, hi, dtype) -> list:
    return _unpack(_movmatrix(pack(lo, hi)), dtype)


def _quad_ids(lw):
    """(g odd, source lane of round 1, of round 2) as i1/i32 Values, once per kernel.

    An 8x8 quadrant transposed: lane (g, t) needs M[2t][g] and M[2t+1][g],
    held by lanes A = 8t + g//2 and A + 4 as their element g & 1. Both lanes
    g = 2m, 2m+1 read the same source, wanting different elements, so each
    pair takes two shuffles: in round 1 even-g lanes read A and odd-g lanes
    read A + 4 (every source is read for one element only, which it selects
    by its own g's parity); in round 2 the other way round."""
    def build():
        i32 = ir.IntegerType.get_signless(32)
        c = lambda n: arith.constant(i32, n)  # noqa: E731
        lane = lw.lane_i32()
        g, t = arith.shrui(lane, c(2)), arith.andi(lane, c(3))
        odd = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(g, c(1)), c(0))
        src_a = arith.addi(arith.shli(t, c(3)), arith.shrui(g, c(1)))
        src_b = arith.addi(src_a, c(4))
        return odd, arith.select(odd, src_b, src_a), arith.select(odd, src_a, src_b)
    return lw.once("swap_f32_ids", build)


def _shfl_idx(lw, v, src):
    return nvvm.shfl_sync(v.type, lw.const_i32(-1), v, src, lw.const_i32(31), nvvm.ShflKind.idx)


def _transpose_pair_32(lw, lo, hi) -> list:
    odd, round1, round2 = _quad_ids(lw)
    r1 = _shfl_idx(lw, arith.select(odd, hi, lo), round1)
    r2 = _shfl_idx(lw, arith.select(odd, lo, hi), round2)
    # even g: r1 came from A (M[2t][g]) and r2 from A + 4; odd g the other way.
    return [arith.select(odd, r2, r1), arith.select(odd, r1, r2)]


def swap_base_tiles(lw, x: Frag) -> list:
    """x's values in the other layout, base tile by base tile (same positions)."""
    out = []
    for blk in range(0, len(x.vals), fragments.PER_BASE_TILE):
        e = x.vals[blk:blk + fragments.PER_BASE_TILE]
        for p in SWAP_PAIRS:
            lo, hi = e[2 * p], e[2 * p + 1]
            if x.view.dtype in ("f32", "i32"):   # 32-bit elements: shuffles
                out += _transpose_pair_32(lw, lo, hi)
            else:
                out += _transpose_pair_16(lo, hi, x.view.dtype)
    return out


def _check_rt(op, x: Frag, want: RT):
    if isinstance(x.view, RT) and x.view.rows == fragments.HALF:
        raise error(op, f"{op.name}: an 8-row rt is row layout only, and stays in it ({x.view.text()})")
    if not isinstance(x.view, RT) or result_view(op) != want:
        raise error(op, f"{op.name} of {op.operands[0].type} gives "
                        f"{want.text() if isinstance(x.view, RT) else 'nothing'}, found {op.results[0].type}")


@rule("tk.swap_layout")
def _swap_layout(lw, op, args):
    x = frag_arg(op, args[0])
    other = "col" if getattr(x.view, "layout", "") == "row" else "row"
    _check_rt(op, x, x.view.with_(layout=other) if isinstance(x.view, RT) else None)
    return [Frag(result_view(op), swap_base_tiles(lw, x))]


@rule("tk.transpose")
def _transpose(lw, op, args):
    """out = x.T, in x's layout or the other one.

    The row layout of x holds, as element k of base tile (i, j), what the
    col layout of x.T holds as element k of base tile (j, i) (fragments.py:
    col is row's transpose), so out in the other layout is x's registers
    with the base tiles renamed. In x's layout: swap_layout(x) holds, as
    element k of base tile (i, j), x[16i + c, 16j + r] where (r, c) is
    element k's place in x's layout; read as base tile (j, i) of a R'=C x
    C'=R tile in the same layout, element k names out[16j + r, 16i + c] =
    x[16i + c, 16j + r]: exactly x.T. So only the base tiles move."""
    x = frag_arg(op, args[0])
    t, layout = x.view, getattr(result_view(op), "layout", None)
    _check_rt(op, x, t.with_(rows=t.cols, cols=t.rows, layout=layout if layout in ("row", "col")
                             else t.layout) if isinstance(t, RT) else None)
    frags = swap_base_tiles(lw, x) if layout == t.layout else list(x.vals)
    out = [None] * len(frags)
    for i in range(t.rows // B):
        for j in range(t.cols // B):
            src = fragments.tile_index(t.rows, t.cols, i, j, 0)
            dst = fragments.tile_index(t.cols, t.rows, j, i, 0)
            out[dst:dst + 8] = frags[src:src + 8]
    return [Frag(result_view(op), out)]
