"""Lane maps on Hopper: where a lane's elements of a register tile sit, as
the memory instructions see them.

fragments.py says which elements a lane holds; these say how they move:
the lane's own offset in every fragment coordinate (`lane_offset`), its runs
of adjacent columns that move as one access (`runs`, `vec_runs`), the rows
whose addresses a lane gives to ldmatrix / stmatrix (`ldmatrix_row_col`,
`deinterleaved_row_col`), and what one access of a tile covers of a gl
(`extents`, the launch requirement). Pure Python: the lowering emits the
same maps as IR (tkc/lowering/lanes.py), tk-bank-report models their bank
conflicts, tk-verify and the runtime check the extents.
"""
from __future__ import annotations

from ..dialect.types import RT, RV, ST, SV
from ..dtypes import itemsize
from . import fragments


# ---------------------------------------------------------------- registers <-> memory

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


def runs(view: RT):
    """(index, static row, static col, n) per run of a lane's elements in an
    rt: elements index .. index+n-1 are adjacent columns, moved together."""
    n = fragments.RUNS[view.layout]
    for i in range(0, fragments.tile_elems(view.rows, view.cols), n):
        r, c = fragments.tile_coord(view.rows, view.cols, view.layout, i, 0)
        yield i, r, c, n


def byte_pairs(t, gl_dtype: str) -> bool:
    """Whether a store of rt t into a gl of 1-byte elements moves 16 bytes a
    lane: the wide layout's two lanes of a row (l, l ^ 16) trade 8-byte
    halves of each pair of base tiles, so each store fills whole 32-byte
    sectors (lowering/global_memory.py); a ragged one then needs rows of a
    multiple of 16 bytes (extents)."""
    return isinstance(t, RT) and t.layout == "wide" and t.cols % 32 == 0 and itemsize(gl_dtype) == 1


def vec_runs(view: RV):
    """(index, static element, n) per run of a lane's vector slots; the lane's
    own part of the element is _vec_lane's."""
    n = fragments.vec_run(view.length, view.kind)
    for i in range(0, fragments.vec_elems(view.length, view.kind), n):
        yield i, fragments.vec_coord(view.length, view.kind, i, 0), n


# ---------------------------------------------------------------- ldmatrix / stmatrix

def ldmatrix_row_col(layout: str, lane: int, half: bool = False) -> tuple[int, int]:
    """(row, col) in a 16x16 base tile of the 8-element row whose address
    `lane` gives to ldmatrix/stmatrix .x4. Matrix q = lane // 8 must land in
    registers (e_2q, e_2q+1) of fragments.py: quadrant order
    (0,0), (8,0), (0,8), (8,8) for the row layout; with .trans (col layout)
    e_2q holds the transposed matrix, so the order is (0,0), (0,8), (8,0), (8,8).
    `half`: an 8-row tile's .x2, whose two matrices are its quadrants (0,0)
    and (0,8) (e0, e1 and e4, e5, fragments.HALF_KS): lanes 0-15 give their
    rows, lanes 16-31 repeat them (.x2 reads only lanes 0-15's addresses)."""
    if half:
        return lane % 8, 8 * ((lane // 8) % 2)
    q, r = divmod(lane, 8)
    lo, hi = q & 1, q >> 1
    if layout == "row":
        return lo * 8 + r, hi * 8
    return hi * 8 + r, lo * 8


def deinterleaved_row_col(lane: int) -> tuple[int, int]:
    """(row, col) in an 8-column half of an f32 base tile of the 16-byte row
    whose address `lane` gives to a deinterleaving stmatrix .x4: matrix
    q = lane // 8 is the half's register q (fragments.py: rows 8 (q // 2) up,
    the even columns for q even, the odd ones for q odd), whose 4 words of a
    row land at columns 4 (q % 2) .. 4 (q % 2) + 3."""
    q, r = divmod(lane, 8)
    return (q >> 1) * 8 + r, (q & 1) * 4


# ---------------------------------------------------------------- gl extents

def extents(t, gl_dtype: str = "f32", ragged: bool = False, k: int = 1,
            run: int | None = None) -> tuple[int, int, int, int]:
    """What an access of t needs of (b, d, r, c); k = 2 for a split/joined pair
    (columns 2j and 2j + 1 of a tile twice t's width); run: a lane's adjacent
    columns an access, where the layout's runs are not what moves (packed)."""
    if ragged and isinstance(t, (RT, RV)):
        run = run or (fragments.RUNS[t.layout] if isinstance(t, RT) else fragments.vec_run(t.length, t.kind))
        return (1, 1, 1, fragments.access_elems(k * run, gl_dtype))
    if isinstance(t, (RT, ST)):
        return (1, 1, t.rows, k * t.cols)
    if isinstance(t, (RV, SV)):
        return (1, 1, 1, t.length)
    return (1, 1, 1, 1)  # a malformed access: tk-verify reports it
