"""V laid out for the FP8 attention forward (tkc.fp8_v_layout's kernel).

vt[b, h, d, 32 g + p] = v[b, h, 32 g + order[p], d], order =
warpgroup.fp8_lane_order(): V transposed (FP8 wgmma reads both operands
K-major, and P V's K is the keys) with each 32 keys in the order the
forward's P enters its wgmma. That order is two halves of 16 keys, each
p = 4q + 2 j1 + j0 <- key 2q + j0 + 8 j1: where a row-layout tile's lane q
holds columns 2q, 2q+1, 2q+8, 2q+9, `store(packed=True)` puts them at 4q ..
4q+3. So a warp loads 16 keys [16, D] in e4m3, widens them to bf16 (exact),
transposes them in registers ([D, 16]: movmatrix), rounds them back (exact)
and stores them packed: the permutation costs nothing, and V is read and
written once (one 4-byte store a lane per row and 16 keys).

Whole 16-key tiles only (an 8-bit load has no fill): v's L is a multiple
of 16 (tkc.fp8_v_layout passes the whole tiles' keys, and writes the last,
ragged keys and the zero padding to a multiple of 32 itself: fewer than 32
columns); a warp past L does nothing.
"""
from __future__ import annotations

import functools

import tkc.dsl as tkc
from tkc.dsl import bf16, f8e4m3, gl, rt
from tkc.ops import load, store, transpose

WARPS = 4
KEYS = 16             # keys a warp moves


@functools.lru_cache(maxsize=None)
def fp8_v_layout_kernel(D: int = 128):
    """v [B, H, L, D] e4m3 (L a multiple of 16) -> vt [B, H, D, L32] e4m3
    (L32 >= L, a multiple of 32): its first L columns (the module docstring)."""
    @tkc.kernel(name=f"fp8_v_layout_d{D}", warps=WARPS, divisible={"L": KEYS, "L32": 32},
                grid=lambda v, vt: (tkc.cdiv(v.r, WARPS * KEYS), v.d, v.b))
    def fp8_v_layout(v: gl(f8e4m3, "B", "H", "L", D), vt: gl(f8e4m3, "B", "H", D, "L32")):
        t, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        j = t * WARPS + tkc.warpid()                   # this warp's 16 keys
        with tkc.if_(j * KEYS + KEYS <= v.r):
            x = load(rt(f8e4m3, KEYS, D), v, (b, h, j, 0)).to(bf16)
            store(vt, transpose(x).to(f8e4m3), (b, h, 0, j), packed=True)
    return fp8_v_layout
