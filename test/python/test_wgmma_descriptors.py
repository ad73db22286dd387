"""wgmma shared-memory operands, checked without a GPU.

`wgmma_read` models how wgmma fetches one k16 slice of an operand through a
matrix descriptor: the descriptor's bit fields and the canonical layouts of
the PTX ISA ("Matrix Descriptor Format", "Canonical Layouts": CuTe layouts
over 16-byte units, then Swizzle<B, 4, 3> on the shared address), written
here from the ISA and independently of tkc/lowering/wgmma.py. It runs on a
shared-memory image holding an st in tkc's layout (placed with
tkc.lowering.shared.address, itself tested against docs/tile-ir.md), so the
tests show that the descriptors tkc computes name exactly the intended
64 x 16 / N x 16 slices, for every k step, both majors and each swizzle.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tkc.dialect.types import ST
from tkc.dtypes import itemsize
from tkc.lowering import shared

wgmma = pytest.importorskip("tkc.lowering.wgmma")

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


def _fits(dtype, cols, swz):
    return (cols * itemsize(dtype)) % {"32b": 32, "64b": 64, "128b": 128}[swz] == 0


SWIZZLES = ("32b", "64b", "128b")
K_MAJOR = [ST(d, mn, k, s) for d in ("bf16", "f16") for s in SWIZZLES
           for mn, k in ((64, 16), (64, 64), (64, 128), (16, 32), (128, 64), (256, 32))
           if _fits(d, k, s)]
MN_MAJOR = [ST(d, k, mn, s) for d in ("bf16", "f16") for s in SWIZZLES
            for k, mn in ((16, 64), (64, 64), (32, 128), (48, 16), (32, 256), (16, 192))
            if _fits(d, mn, s)]


@pytest.mark.parametrize("st", K_MAJOR, ids=lambda s: s.text())
def test_k_major_steps_read_the_k16_column_blocks(st):
    """st<MN, K> (a st<64, K>, b st<N, K>): step kk reads columns 16kk.. of every row."""
    memory, ids = image(st)
    layout = wgmma.operand_layout(st, k_major=True)
    assert len(layout.steps) == st.cols // 16
    for kk in range(st.cols // 16):
        got = wgmma_read(memory, layout.descriptor(BASE, kk), True, st.rows, itemsize(st.dtype))
        np.testing.assert_array_equal(got, ids[:, 16 * kk:16 * kk + 16], err_msg=f"k step {kk}")


@pytest.mark.parametrize("st", MN_MAJOR, ids=lambda s: s.text())
def test_mn_major_steps_read_the_k16_row_blocks(st):
    """st<K, MN> (b st<K, N>, a st<K, 64>): step kk reads rows 16kk.., transposed."""
    memory, ids = image(st)
    layout = wgmma.operand_layout(st, k_major=False)
    assert len(layout.steps) == st.rows // 16
    for kk in range(st.rows // 16):
        got = wgmma_read(memory, layout.descriptor(BASE, kk), False, st.cols, itemsize(st.dtype))
        np.testing.assert_array_equal(got, ids[16 * kk:16 * kk + 16, :].T, err_msg=f"k step {kk}")


def test_descriptor_fields_round_trip_and_match_the_isa_examples():
    # PTX ISA example "MN-major, 64B swizzling, bf16": LBO 256 * 2 bytes, SBO 512 * 2 bytes.
    d = wgmma.encode(0x12340, 512, 1024, 64)
    assert wgmma.decode(d) == {"address": 0x12340, "lbo": 512, "sbo": 1024,
                               "base_offset": 0, "swizzle": 64}
    assert (d >> 16) & 0x3FFF == 32 and (d >> 32) & 0x3FFF == 64 and d >> 62 == 2
    # K-major 128B bf16 (CUTLASS's common case): SBO = 8 rows of 128 bytes, LBO unused (1).
    lay = wgmma.operand_layout(ST("bf16", 64, 64, "128b"), k_major=True)
    assert (lay.sbo, lay.lbo, lay.steps) == (1024, 16, (0, 32, 64, 96))
    # the address keeps only bits 4..17 (matrix-descriptor-encode)
    assert wgmma.decode(wgmma.encode((1 << 18) + 0x400, 16, 1024, 128))["address"] == 0x400


def test_auto_resolves_like_the_layout_and_none_is_refused():
    auto = wgmma.operand_layout(ST("bf16", 64, 32, "auto"), k_major=True)
    assert auto == wgmma.operand_layout(ST("bf16", 64, 32, "64b"), k_major=True)
    with pytest.raises(ValueError, match="swizzled"):
        wgmma.operand_layout(ST("bf16", 64, 64, "none"), k_major=True)


@pytest.mark.parametrize("n,regs,ta,tb,want", [
    (64, False, False, True, "m64n64k16.f32.bf16.bf16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
     "$11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, "
     "$29, $30, $31}, $64, $65, 1, 1, 1, 0, 1;"),
    (16, True, False, False, "m64n16k16.f32.bf16.bf16 {$0, $1, $2, $3, $4, $5, $6, $7}, "
     "{$16, $17, $18, $19}, $20, 1, 1, 1, 0;"),
])
def test_instruction_text_numbers_operands_after_the_tied_accumulators(n, regs, ta, tb, want):
    text = wgmma.mma_instruction(n, "bf16", regs, ta, tb)
    assert text == "wgmma.mma_async.sync.aligned." + want
