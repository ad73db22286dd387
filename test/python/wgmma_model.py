"""A model of how wgmma reads shared memory through a matrix descriptor,
written from the PTX ISA ("Matrix Descriptor Format", "Canonical Layouts":
CuTe layouts over 16-byte units, then Swizzle<B, 4, 3> on the shared
address) independently of tkc/lowering/wgmma.py; shared by the descriptor
and lowering tests."""
from __future__ import annotations

import itertools

import numpy as np

from tkc.dialect.types import ST
from tkc.dtypes import itemsize
from tkc.hopper import shared

SMEM = 96 * 1024
BASE = 3 * 1024   # 1024-aligned like every swizzled st, and not 0


# ---------------------------------------------------------------- the ISA model

def fields(desc: int) -> dict:
    """The descriptor's bit fields (PTX ISA table), in bytes where they are sizes."""
    return {"start": (desc & ((1 << 14) - 1)) << 4,
            "lbo": ((desc >> 16) & ((1 << 14) - 1)) << 4,
            "sbo": ((desc >> 32) & ((1 << 14) - 1)) << 4,
            "base_offset": (desc >> 49) & 0b111,
            "mode": desc >> 62,
            "reserved": desc & ~((0x3FFF) | (0x3FFF << 16) | (0x3FFF << 32) | (0b111 << 49) | (3 << 62))}


SWIZZLE_OF_MODE = {1: 128, 2: 64, 3: 32}


def cute_swizzle(addr: int, s: int) -> int:
    """Swizzle<B, 4, 3> with 2^B = S/16: bits [7, 7+B) XOR-ed into bits [4, 4+B)."""
    b = {32: 1, 64: 2, 128: 3}[s]
    yyy = ((1 << b) - 1) << 7
    return addr ^ ((addr & yyy) >> 3)


def canonical_offset(k_major: bool, i: int, k: int, s: int, e: int, lbo: int, sbo: int) -> int:
    """Byte offset of element (mn = i, k) of one k16 slice, before swizzling.

    K-major  ((8, m), (T, 2k)) : ((S/16 T, SBO), (1, T))
    MN-major ((T, S/16, m), (8, k)) : ((1, T, LBO), (S/16 T, SBO))
    with T = 16/E elements; strides in elements except LBO/SBO (bytes)."""
    t = 16 // e
    row = (s // 16) * t  # elements in one S-byte row
    if k_major:
        assert k < 2 * t
        return ((i % 8) * row + (k % t) + t * (k // t)) * e + (i // 8) * sbo
    i0, i1, i2 = i % t, (i // t) % (s // 16), i // (t * (s // 16))
    return (i0 + t * i1) * e + i2 * lbo + (k % 8) * row * e + (k // 8) * sbo


def wgmma_read(memory: np.ndarray, desc: int, k_major: bool, mn: int, e: int) -> np.ndarray:
    """The mn x 16 slice wgmma reads through `desc` (memory: one id per element slot)."""
    f = fields(desc)
    assert f["reserved"] == 0 and f["base_offset"] == 0
    s = SWIZZLE_OF_MODE[f["mode"]]
    out = np.empty((mn, 16), memory.dtype)
    for i, k in itertools.product(range(mn), range(16)):
        addr = cute_swizzle(f["start"] + canonical_offset(k_major, i, k, s, e, f["lbo"], f["sbo"]), s)
        assert addr % e == 0
        out[i, k] = memory[addr // e]
    return out


# ---------------------------------------------------------------- st images

def image(st: ST):
    """(memory, ids): shared memory with element (r, c) of st at BASE +
    shared.address(st, r, c), holding its id r * cols + c (-1 elsewhere)."""
    e = itemsize(st.dtype)
    memory = np.full(SMEM // e, -1, np.int64)
    ids = np.arange(st.rows * st.cols).reshape(st.rows, st.cols)
    for r, c in itertools.product(range(st.rows), range(st.cols)):
        memory[(BASE + shared.address(st, r, c)) // e] = ids[r, c]
    return memory, ids
