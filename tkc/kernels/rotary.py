"""Rotary position embedding (RoPE), half-split (GPT-NeoX, Llama) or interleaved (GPT-J).

x is [B, T, H, D] (FLA's and flash-attn's layout), viewed as a gl (B, 1, T,
H*D): a 16-row tile at (b, 0, t, j) is 16 positions of columns j*C.. of the
heads. cos and sin are [T, D/2]. For head h, position t and i < D/2:

    o[i]       = x[i] cos[t, i] - x[i + D/2] sin[t, i]
    o[i + D/2] = x[i + D/2] cos[t, i] + x[i] sin[t, i]

Interleaved, the pairs are (x[2i], x[2i + 1]) instead of (x[i], x[i + D/2]):
load_split reads a head's columns as its even and odd tiles (still 16-byte
accesses) and store_join writes them back.

A block owns 16 positions of one batch row and warps * heads adjacent heads.
Its work items are (position tile, head group, batch row), taken head groups
fastest (order "yxz"), so blocks that run together read whole rows of x.
Each warp loads the cos and sin of its positions (the block's warps read the
same ones: L1 hits) and all of its heads before it computes anything: every
16-byte load (LDG.E.128) of the warp is in flight at once, one DRAM latency
a warp (a warp that walked the heads instead waited once per 2 KB). Nothing
is carried across heads. Positions and heads are ragged (any T and H): loads
fill, stores clip. The backward is the same kernel with -sin.
"""
from __future__ import annotations

import tkc
from tkc import bf16, f32, gl, rt
from tkc.diagnostics import TkcError
from tkc.ops import load, load_split, store, store_join

C = 32  # columns per tile: 16 f32 values a lane, two 16-byte accesses


def rotary(D: int = 128, interleaved: bool = False, warps: int = 4, heads: int = 1):
    """x, o: [B, T, H, D] bf16 (o may be x); cos, sin: [T, D/2] bf16.
    A block: 16 positions x (warps * heads) heads, `heads` of them per warp."""
    if D % (2 * C):
        raise TkcError(f"rotary: the head dim D = {D} must be a multiple of {2 * C}")
    half, steps, G = D // 2, D // 2 // C, warps * heads
    name = f"rotary_{D}{'_interleaved' if interleaved else ''}"
    if (warps, heads) != (4, 1):
        name += f"_w{warps}h{heads}"

    def T():
        return rt(f32, 16, C, "wide")

    @tkc.kernel(name=name, warps=warps, inplace={"o": "x"}, order="yxz",
                grid=lambda x, cos, sin, o: (tkc.cdiv(x.r, 16), tkc.cdiv(x.c, G * D), x.b))
    def rope(x: gl(bf16, "B", 1, "T", "HD"), cos: gl(bf16, 1, 1, "T", half),
             sin: gl(bf16, 1, 1, "T", half), o: gl(bf16, "B", 1, "T", "HD")):
        t, b = tkc.block_idx.x, tkc.block_idx.z
        h0 = (tkc.block_idx.y * warps + tkc.warpid()) * heads

        def pair(h, j):  # (x1, x2): head h's j-th C pairs
            if interleaved:  # pair tiles of 2C columns: head h's are h * steps + j
                return load_split(T(), x, (b, 0, t, h * steps + j), fill=0.0)
            lo = h * 2 * steps + j  # C-column tiles: the first half's j-th, the second half's
            return load(T(), x, (b, 0, t, lo), fill=0.0), load(T(), x, (b, 0, t, lo + steps), fill=0.0)

        def put(h, j, o1, o2):
            if interleaved:
                store_join(o, o1, o2, (b, 0, t, h * steps + j), clip=True)
            else:
                store(o, o1, (b, 0, t, h * 2 * steps + j), clip=True)
                store(o, o2, (b, 0, t, h * 2 * steps + steps + j), clip=True)

        cs = [load(T(), cos, (0, 0, t, j), fill=0.0) for j in range(steps)]
        sn = [load(T(), sin, (0, 0, t, j), fill=0.0) for j in range(steps)]
        work = [(h0 + i, j) for i in range(heads) for j in range(steps)]
        xs = [pair(h, j) for h, j in work]  # every load is issued before the first use
        for (h, j), (x1, x2) in zip(work, xs):
            put(h, j, x1 * cs[j] - x2 * sn[j], x2 * cs[j] + x1 * sn[j])

    return rope
