"""Rotary position embedding (RoPE), half-split (GPT-NeoX, Llama) or interleaved (GPT-J).

x is [B, T, H, D] (FLA's and flash-attn's layout), viewed as a gl (B, 1, T,
H*D): a 16-row tile at (b, 0, t, j) is 16 positions of columns j*C.. of the
heads. cos and sin are [T, D/2]. For head h, position t and i < D/2:

    o[i]       = x[i] cos[t, i] - x[i + D/2] sin[t, i]
    o[i + D/2] = x[i + D/2] cos[t, i] + x[i] sin[t, i]

Interleaved, the pairs are (x[2i], x[2i + 1]) instead of (x[i], x[i + D/2]):
load_split reads a head's columns as its even and odd tiles (still 16-byte
accesses) and store_join writes them back.

A warp owns 16 positions of one batch row: it loads their cos and sin once
and walks the heads, C = 32 pairs at a time, all in the wide layout (16-byte
accesses). Positions are ragged (any T): loads fill, stores clip. The
backward is the same kernel with -sin.
"""
from __future__ import annotations

import tkc
from tkc import bf16, f32, gl, rt
from tkc.diagnostics import TkcError
from tkc.ops import load, load_split, store, store_join

C = 32  # columns per step: 16 f32 registers a tile


def rotary(D: int = 128, interleaved: bool = False, warps: int = 4):
    """x, o: [B, T, H, D] bf16 (o may be x); cos, sin: [T, D/2] bf16."""
    if D % (2 * C):
        raise TkcError(f"rotary: the head dim D = {D} must be a multiple of {2 * C}")
    half, steps = D // 2, D // 2 // C

    def T():
        return rt(f32, 16, C, "wide")

    @tkc.kernel(name=f"rotary_{D}{'_interleaved' if interleaved else ''}", warps=warps,
                inplace={"o": "x"},
                grid=lambda x, cos, sin, o: (tkc.cdiv(x.r, 16 * warps), x.b))
    def rope(x: gl(bf16, "B", 1, "T", "HD"), cos: gl(bf16, 1, 1, "T", half),
             sin: gl(bf16, 1, 1, "T", half), o: gl(bf16, "B", 1, "T", "HD")):
        t, b = tkc.block_idx.x * warps + tkc.warpid(), tkc.block_idx.y
        cs = [load(T(), cos, (0, 0, t, j), fill=0.0) for j in range(steps)]
        sn = [load(T(), sin, (0, 0, t, j), fill=0.0) for j in range(steps)]
        for h in tkc.range(x.c // D):
            for j in range(steps):
                if interleaved:  # pair tiles of 2C columns: head h's are h * steps + j
                    x1, x2 = load_split(T(), x, (b, 0, t, h * steps + j), fill=0.0)
                else:  # C-column tiles: the first half's j-th, the second half's
                    lo, hi = h * (D // C) + j, h * (D // C) + steps + j
                    x1 = load(T(), x, (b, 0, t, lo), fill=0.0)
                    x2 = load(T(), x, (b, 0, t, hi), fill=0.0)
                o1, o2 = x1 * cs[j] - x2 * sn[j], x2 * cs[j] + x1 * sn[j]
                if interleaved:
                    store_join(o, o1, o2, (b, 0, t, h * steps + j), clip=True)
                else:
                    store(o, o1, (b, 0, t, lo), clip=True)
                    store(o, o2, (b, 0, t, hi), clip=True)

    return rope
