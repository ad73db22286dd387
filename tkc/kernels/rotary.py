"""Rotary position embedding (RoPE), half-split (GPT-NeoX, Llama) or interleaved (GPT-J).

x is [B, T, H, D] (FLA's and flash-attn's layout), viewed as a gl (B, 1, T,
H*D): a block's tile at (b, 0, t, g) is 16 positions of heads g*G .. g*G+G-1
(G = warps * heads). The gl is strided, so a position's H*D elements need
only be adjacent: q or k split from a packed projection [B, T, 3H, D] is
taken as it is. cos and sin are [T, D/2]. For head h, position t and
i < D/2:

    o[i]       = x[i] cos[t, i] - x[i + D/2] sin[t, i]
    o[i + D/2] = x[i + D/2] cos[t, i] + x[i] sin[t, i]

Interleaved, the pairs are (x[2i], x[2i + 1]) instead of (x[i], x[i + D/2]):
load_split reads a head's columns as its even and odd tiles and store_join
writes them back.

The block moves its tile by TMA: x, cos and sin into shared memory, the
result back out of it (written over x's tile: each warp reads its own heads'
columns before it writes them). A register tile read straight from global
memory spans 16 rows, so each 16-byte access of a warp touched 16 cache
lines, and the L1 was the bottleneck (ncu: L1/TEX 99% busy, DRAM 63%, 0.80-0.88
of a copy); TMA moves whole 128-byte rows. Positions and heads are ragged
(any T and H): TMA reads zeros past the edges and clips its stores. Several
small blocks share an SM (blocks_per_sm) so that one block's loads overlap
another's math and stores. Work items (position tile, head group, batch row)
are taken head groups fastest (order "yxz"), so blocks that run together
read whole rows of x. The backward is the inverse rotation, by -theta:
inverse=True, the same kernel with the signs of the sin terms swapped (not a
call with -sin, which would cost the backward a negation's launch and
allocation).
"""
from __future__ import annotations

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, rt, st, tma
from tkc.diagnostics import TkcError
from tkc.ops import load, load_split, store, store_join

C = 32  # columns per register tile (16 f32 a lane): four of them live at a time
SHARED_LIMIT = 228 * 1024   # an SM's shared memory, which blocks_per_sm blocks share


def splits(D: int) -> tuple:
    """A block's heads, (warps, heads a warp), that head dim D's space holds
    (tkc.rotary_embedding tunes among them: torchops/rotary.py): what the H200's
    table picks, 2 x 1 first (every dim's for a few positions); for many, 8 x 1
    below D 128 (at 128 a thread's 40 registers spill 20 bytes), 2 x 2 below 256
    (at 256 it ran slower than 2 x 1). The builder's default, 4 x 1, was picked
    at no key."""
    if D < 128:
        return (2, 1), (8, 1)
    return ((2, 1), (2, 2)) if D < 256 else ((2, 1),)


def fits(D: int, warps: int, heads: int, blocks_per_sm: int = 4) -> bool:
    """Whether blocks_per_sm blocks of warps x heads heads fit an SM's shared
    memory: x's tile (16 positions of the block's heads) and cos's and sin's."""
    return 32 * warps * heads * D + 32 * D + 1024 <= SHARED_LIMIT // blocks_per_sm


def rotary(D: int = 128, interleaved: bool = False, warps: int = 4, heads: int = 1, blocks_per_sm: int = 4,
           inverse: bool = False):
    """x, o: [B, T, H, D] bf16 (o may be x); cos, sin: [T, D/2] bf16.
    A block: 16 positions x (warps * heads) heads, `heads` of them per warp;
    blocks_per_sm blocks share an SM. inverse: rotate by -theta (the backward)."""
    if D % 32:
        raise TkcError(f"rotary: the head dim D = {D} must be a multiple of 32")
    half, G = D // 2, warps * heads
    cols = C if half % C == 0 else 16   # (D 96: three tiles of 16 columns a half)
    steps = half // cols
    name = f"rotary_{D}{'_interleaved' if interleaved else ''}{'_inverse' if inverse else ''}"
    if (warps, heads, blocks_per_sm) != (4, 1, 4):
        name += f"_w{warps}h{heads}b{blocks_per_sm}"

    def T():
        return rt(f32, 16, cols)

    def turn(x1, x2, c, s):  # (x1, x2) rotated by theta, or by -theta
        if inverse:
            return x1 * c + x2 * s, x2 * c - x1 * s
        return x1 * c - x2 * s, x2 * c + x1 * s

    @tkc.kernel(name=name, warps=warps, inplace={"o": "x"}, order="yxz", blocks_per_sm=blocks_per_sm,
                grid=lambda x, cos, sin, o: (tkc.cdiv(x.r, 16), tkc.cdiv(x.c, G * D), x.b))
    def rope(x: gl(bf16, "B", 1, "T", "HD", strided=True), cos: gl(bf16, 1, 1, "T", half),
             sin: gl(bf16, 1, 1, "T", half), o: gl(bf16, "B", 1, "T", "HD", strided=True)):
        t, g, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        x_s, cos_s, sin_s = st(bf16, 16, G * D), st(bf16, 16, half), st(bf16, 16, half)
        tma.load(x_s, x, (b, 0, t, g))
        tma.load(cos_s, cos, (0, 0, t, 0))
        tma.load(sin_s, sin, (0, 0, t, 0))
        for i in range(heads):
            h = tkc.warpid() * heads + i
            for j in range(steps):
                c, s = load(T(), cos_s, (0, j)), load(T(), sin_s, (0, j))
                if interleaved:  # pair tiles of 2 * cols columns: head h's are h * steps + j
                    x1, x2 = load_split(T(), x_s, (0, h * steps + j))
                    store_join(x_s, *turn(x1, x2, c, s), (0, h * steps + j))
                else:  # cols-column tiles: the first half's j-th, the second half's
                    lo = h * 2 * steps + j
                    x1, x2 = load(T(), x_s, (0, lo)), load(T(), x_s, (0, lo + steps))
                    y1, y2 = turn(x1, x2, c, s)
                    store(x_s, y1, (0, lo))
                    store(x_s, y2, (0, lo + steps))
        tma.store(o, x_s, (b, 0, t, g))

    return rope
