"""The K order of an 8-bit A operand in registers (wgmma m64nNk32 .e4m3/.e5m2).

wgmma's register fragment of an 8-bit A for one k32 step (PTX ISA, "Register
Fragments" of wgmma .e4m3/.e5m2): lane l, g = l/4, q = l%4, four b32
registers of four bytes each (byte 0 the lowest k):

    a0 = row g,   k 4q .. 4q+3          a2 = row g,   k 16+4q .. 16+4q+3
    a1 = row g+8, k 4q .. 4q+3          a3 = row g+8, k 16+4q .. 16+4q+3

An rt<f8, 16, K, row> holds its elements where an f32 tile's would be
(fragments.py's row layout: per 16 columns a lane has columns 2q, 2q+1,
2q+8, 2q+9 of rows g and g+8), so a lane holds 8 bytes of each of its rows
per 32 columns, not 4 adjacent k twice. FlashAttention-3 does not shuffle
them across lanes: it packs the lane's own bytes as they are, (2q, 2q+1,
2q+8, 2q+9) into a0 and (16+2q, 16+2q+1, 16+2q+8, 16+2q+9) into a2 (a1, a3
row g+8). Then column c of the tile enters the product at another k than
c: the mma sums A[m, order[p]] * B[n, p] over p, `order` = fp8_lane_order()
per 32-column group. A product that sums over the columns without caring
about their order (P V over keys) is right when B's K is permuted the same
way (B[n, p] = V[order[p], n]).

The mma says so: `k_order="lanes"` on warpgroup.mma_ABt with an 8-bit A in
registers (the only place it means anything); tk-verify refuses an 8-bit
register A without it, and the interpreter applies the same permutation.
"""
from __future__ import annotations

K_GROUP = 32            # one wgmma k32 step of 8-bit operands
K_ORDERS = ("lanes",)   # the values of a warpgroup mma's k_order


def fp8_lane_order() -> tuple[int, ...]:
    """The 32 columns of a k32 group of an 8-bit register A in the order
    wgmma consumes them: entry p is the column that enters at k = p."""
    half = [c for q in range(4) for c in (2 * q, 2 * q + 1, 2 * q + 8, 2 * q + 9)]
    return tuple(half + [16 + c for c in half])


def lane_permutation(cols: int) -> list[int]:
    """fp8_lane_order() repeated over `cols` columns (a multiple of 32):
    entry p is the column of the tile at k = p of the product."""
    order = fp8_lane_order()
    return [g + order[p] for g in range(0, cols, K_GROUP) for p in range(K_GROUP)]


def register_bytes(kk: int) -> list[tuple]:
    """Where a0..a3 of k32 step kk come from in a row-layout rt<f8, 16, K>:
    per register its bytes 0..3 as (base tile along K, element k of the base
    tile): a0 = tile 2kk's e0, e1, e4, e5 (row g: columns 2q, 2q+1, 2q+8,
    2q+9), a1 = its e2, e3, e6, e7 (row g+8), a2 and a3 the same of tile
    2kk + 1."""
    top, bottom = (0, 1, 4, 5), (2, 3, 6, 7)
    return [tuple((2 * kk + half, e) for e in rows) for half in (0, 1) for rows in (top, bottom)]


def k_order_problems(name: str, k_order, a_in_registers: bool, fp8: bool) -> list[str]:
    """A warpgroup mma's k_order against its operands: an 8-bit A in
    registers needs k_order="lanes" (and only that one has one)."""
    if k_order is not None and k_order not in K_ORDERS:
        return [f"{name}: k_order must be one of {K_ORDERS}, got {k_order!r}"]
    wants = fp8 and a_in_registers
    if wants and k_order is None:
        return [f"{name}: an 8-bit a in registers enters wgmma with its columns in another order "
                f"(each lane's own bytes packed as they are: per 32 columns the order "
                f"warpgroup.fp8_lane_order() gives); say k_order=\"lanes\" and give b's K in that "
                f"order (b[n, p] = B[order[p], n] per 32 keys), or read a from shared memory"]
    if k_order is not None and not wants:
        return [f"{name}: k_order=\"lanes\" is the K order of an 8-bit a in registers; this mma "
                f"has none (its k order is the natural one)"]
    if wants and name != "warpgroup_mma_abt":
        return [f"{name}: an 8-bit a in registers is the ABt form only (warpgroup.mma_ABt: b "
                f"st<N, K>, K-major)"]
    return []
