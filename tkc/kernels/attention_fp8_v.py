"""V laid out for the FP8 attention forward (tkc.fp8_v_layout's kernel).

vt[b, h, d, 32 g + p] = v[b, h, 32 g + order[p], d], order =
warpgroup.fp8_lane_order(): V transposed (FP8 wgmma reads both operands
K-major, and P V's K is the keys) with each 32 keys in the order the
forward's P enters its wgmma. That order is two halves of 16 keys, each
p = 4q + 2 j1 + j0 <- key 2q + j0 + 8 j1: where a row-layout tile's lane q
holds columns 2q, 2q+1, 2q+8, 2q+9, `store(packed=True)` puts them at 4q ..
4q+3. So a block loads 64 keys [64, D] by TMA (keys past L read as zeros:
vt's padding), and each warp takes 16 of them from shared memory, widens
them to bf16 (exact), transposes them in registers ([D, 16]: movmatrix),
rounds them back (exact) and stores them packed: the permutation costs
nothing, and V is read and written once (one 4-byte store a lane per row
and 16 keys). (Each warp reading its 16 keys from global memory instead,
two bytes a lane a load, ran at 45% of a copy's bandwidth: the L1's
throughput bound it, H200, 2026-11-30.)
"""
from __future__ import annotations

import functools

import tkc.dsl as tkc
from tkc.dsl import bf16, f8e4m3, gl, rt, st, tma
from tkc.ops import load, store, transpose

WARPS = 4
KEYS = 16             # keys a warp moves
TILE = WARPS * KEYS   # keys a TMA load brings
LOADS = (1, 2)        # TMA loads a block (tkc.fp8_v_layout tunes it; the first is the default)


def loads_for(D: int) -> tuple[int, ...]:
    """The block sizes a table may pick at head dim D. `tkc tune` (H200,
    2026-11-30, 15 keys): one load a block won 9 (D 128, 256k keys: 22.7
    against four loads' 24.8 µs), two through a two-deep ring 4, at D 64
    from 32k keys (12.7 against 14.9 at 256k; at D >= 128 they spill 4
    bytes); four (the ring, the default until then) 2, within their
    spread (12-14%): dropped."""
    return tuple(n for n in LOADS if n != 2 or D == 64)


@functools.lru_cache(maxsize=None)
def fp8_v_layout_kernel(D: int = 128, loads: int = LOADS[0]):
    """v [B, H, L, D] e4m3 -> vt [B, H, D, L32] e4m3 (L32 >= L, a multiple of
    32): every column, those past L zero (the module docstring). A block
    walks `loads` 64-key tiles (two: through a two-deep TMA ring, so one is in
    flight while its warps transpose the other)."""
    if loads not in loads_for(D):
        raise ValueError(f"fp8_v_layout_kernel: loads must be one of {loads_for(D)} at D {D}, got {loads!r}")

    @tkc.kernel(name=f"fp8_v_layout_d{D}" + ("" if loads == LOADS[0] else f"_l{loads}"), warps=WARPS,
                divisible={"L32": 32}, grid=lambda v, vt: (tkc.cdiv(vt.c, TILE * loads), v.d, v.b))
    def fp8_v_layout(v: gl(f8e4m3, "B", "H", "L", D), vt: gl(f8e4m3, "B", "H", D, "L32")):
        t, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        w = tkc.warpid()
        v_s = st(f8e4m3, TILE, D)
        first = t * loads                              # this block's first 64-key tile
        for i in tkc.range(tkc.min(tkc.cdiv(vt.c, TILE) - first, loads), stages=min(loads, 2)):
            tma.load(v_s, v, (b, h, first + i, 0))     # rows past L read as zeros
            j = (first + i) * WARPS + w                # this warp's 16 keys
            with tkc.if_(j * KEYS < vt.c):
                x = load(rt(f8e4m3, KEYS, D), v_s, (w, 0)).to(bf16)
                store(vt, transpose(x).to(f8e4m3), (b, h, 0, j), packed=True)
    return fp8_v_layout
