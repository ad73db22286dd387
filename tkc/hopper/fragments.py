"""Which elements of a register tile or vector each thread of a warp holds.

This is the contract between every lowering pattern (and the tests): a
lowered rt is a flat list of per-thread scalars in the order defined here.

rt<dtype, R, C, layout> is (R/16) x (C/16) base tiles of 16x16, listed
row-major over base tiles; each base tile gives every lane 8 elements.
For lane l, g = l // 4 and t = l % 4. In the "row" layout (the A and C
fragments of mma.m16n8k16) element k of a base tile sits at

    k:   0       1         2         3           4         5         6           7
        (g,2t) (g,2t+1) (g+8,2t) (g+8,2t+1) (g,2t+8) (g,2t+9) (g+8,2t+8) (g+8,2t+9)

so k//2 names a 8x8 quadrant (0: top-left, 1: bottom-left, 2: top-right,
3: bottom-right) and pairs (k, k+1) are adjacent columns. The "col" layout
is its transpose: element k sits at (col, row) of the table above, which is
the B fragment of mma.m16n8k16 (b0..b3 of the left n8 half are k = 0, 1, 4, 5;
of the right half k = 2, 3, 6, 7). The "wide" layout is for memory, not
tensor cores: lane l holds row l % 16, columns 8 (l // 16) + k, so a lane's 8
elements are adjacent and move to and from memory as one 16-byte access, and
the 8 lanes of a shared-memory phase read one 16-byte column chunk of 8 rows,
which every swizzle spreads over all 32 banks.

An 8-row tile rt<dtype, 8, C, row> (a half tile: a GQA group of 8 query heads)
is the top half of each base tile: per 16 columns a lane holds k = 0, 1, 4, 5
(HALF_KS: row g, columns 2t, 2t+1, 2t+8, 2t+9), listed in that order, 4
elements. That is the A fragment of m16n8k16 with its rows 8-15 (a2, a3, a6,
a7) left out, and c0, c1 of each n8 half of its accumulator. Only the row
layout has 8-row tiles: the col layout's top half (k = 0..3) is a K = 8 B
operand, and the wide layout's rows 8-15 would leave half the lanes empty.

rv<dtype, L, "col"> (one value per row of a row-layout tile) gives each lane
2 values per 16 rows: rows g and g+8 of each block, block-major; of 8 rows
(L = 8, an 8-row tile's) 1 value, row g. It is replicated over the 4 lanes of
a quad (same g).
rv<dtype, L, "row"> (one value per column of a row-layout tile) gives each
lane 4 values per 16 columns: columns 2t, 2t+1, 2t+8, 2t+9 of each block,
replicated over the 8 lanes with the same t.
rv<dtype, L, "flat"> (a vector on its own, ThunderKittens' naive layout made
wide) gives each lane L / 32 values, no replication: chunks of c adjacent
elements (c = flat_chunk(L): 8, 4, 2 or 1, the largest with L % 32c == 0)
dealt to lanes 0..31 in turn, so element (j * 32 + l) * c + k is value
j * c + k of lane l.
"""
from __future__ import annotations

from ..dtypes import itemsize

BASE = 16
PER_BASE_TILE = 8  # elements per lane per 16x16 base tile
HALF = 8           # the rows of a half tile (the only extent that is not a multiple of BASE)
HALF_KS = (0, 1, 4, 5)  # the base-tile elements of rows 0..7 in the row layout: an 8-row tile's


def extent_ok(n: int, half: bool = False) -> bool:
    """A tile extent: a positive multiple of 16, or 8 where `half` (an rt's or
    st's rows, a "col" rv's length)."""
    return n > 0 and (n % BASE == 0 or half and n == HALF)


def base_ks(rows: int) -> tuple:
    """The elements k of each 16x16 base tile a lane holds, in list order: all
    8, or HALF_KS for an 8-row tile."""
    return HALF_KS if rows == HALF else tuple(range(PER_BASE_TILE))

# (row, col) offsets in a base tile of element k, as functions of (g, t)
_ROW_LAYOUT = (
    lambda g, t: (g, 2 * t),
    lambda g, t: (g, 2 * t + 1),
    lambda g, t: (g + 8, 2 * t),
    lambda g, t: (g + 8, 2 * t + 1),
    lambda g, t: (g, 2 * t + 8),
    lambda g, t: (g, 2 * t + 9),
    lambda g, t: (g + 8, 2 * t + 8),
    lambda g, t: (g + 8, 2 * t + 9),
)


def base_coord(layout: str, k: int, lane: int) -> tuple[int, int]:
    """(row, col) inside a 16x16 base tile of element k held by `lane`."""
    if layout == "wide":
        return lane % 16, 8 * (lane // 16) + k
    g, t = divmod(lane, 4)
    r, c = _ROW_LAYOUT[k](g, t)
    return (r, c) if layout == "row" else (c, r)


def tile_elems(rows: int, cols: int) -> int:
    """How many scalars each lane holds for an rt of this shape."""
    return -(-rows // BASE) * (cols // BASE) * len(base_ks(rows))


def tile_index(rows: int, cols: int, i: int, j: int, k: int) -> int:
    """Position in the flat per-lane list of element k of base tile (i, j)
    (k one of base_ks(rows))."""
    ks = base_ks(rows)
    return (i * (cols // BASE) + j) * len(ks) + ks.index(k)


def tile_slot(rows: int, cols: int, index: int) -> tuple[int, int, int]:
    """(i, j, k): the base tile and element of flat per-lane position `index`."""
    ks = base_ks(rows)
    blk, p = divmod(index, len(ks))
    i, j = divmod(blk, cols // BASE)
    return i, j, ks[p]


def tile_coord(rows: int, cols: int, layout: str, index: int, lane: int) -> tuple[int, int]:
    """(row, col) in the whole tile of flat per-lane element `index` of `lane`."""
    i, j, k = tile_slot(rows, cols, index)
    r, c = base_coord(layout, k, lane)
    return i * BASE + r, j * BASE + c


# Adjacent columns per run of a lane's elements: pairs (k, k+1) in the row
# layout, single elements in the col layout, a base tile's 8 in the wide one.
RUNS = {"row": 2, "col": 1, "wide": 8}


def vec_run(length: int, kind: str) -> int:
    """Adjacent elements per run of a lane's vector slots: a flat vector's
    chunk, the pairs (2t, 2t+1) of a "row" vector, single "col" slots."""
    return flat_chunk(length) if kind == "flat" else 2 if kind == "row" else 1


def access_elems(run: int, dtype: str) -> int:
    """Elements per memory access of a run: at most 16 bytes."""
    return min(run, 16 // itemsize(dtype))


def flat_chunk(length: int) -> int:
    """Adjacent elements per chunk of a "flat" rv (0: the length is not a multiple of 32)."""
    return next((c for c in (8, 4, 2, 1) if length % (32 * c) == 0), 0)


def vec_elems(length: int, kind: str) -> int:
    """How many scalars each lane holds for an rv ("col": 2 per 16 (1 of 8),
    "row": 4 per 16, "flat": 1 per 32)."""
    if kind == "flat":
        return length // 32
    if length == HALF:
        return 1
    return (length // BASE) * (2 if kind == "col" else 4)


def vec_coord(length: int, kind: str, index: int, lane: int) -> int:
    """The vector element held at flat per-lane position `index` by `lane`."""
    if kind == "flat":
        c = flat_chunk(length)
        j, k = divmod(index, c)
        return (j * 32 + lane) * c + k
    g, t = divmod(lane, 4)
    if kind == "col":
        blk, h = divmod(index, 2)
        return blk * BASE + g + 8 * h
    blk, h = divmod(index, 4)
    return blk * BASE + 2 * t + (h & 1) + 8 * (h >> 1)


def row_vec_slot(k: int) -> int:
    """For element k of a row-layout base tile: its slot (0/1) in the "col" rv block."""
    return (k >> 1) & 1


def col_vec_slot(k: int) -> int:
    """For element k of a row-layout base tile: its slot (0..3) in the "row" rv block."""
    return (k & 1) + 2 * (k >> 2)
