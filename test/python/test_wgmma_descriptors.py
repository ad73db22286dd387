"""wgmma shared-memory operands, checked without a GPU.

`wgmma_read` models how wgmma fetches one k16 slice of an operand through a
matrix descriptor: the descriptor's bit fields and the canonical layouts of
the PTX ISA ("Matrix Descriptor Format", "Canonical Layouts": CuTe layouts
over 16-byte units, then Swizzle<B, 4, 3> on the shared address), written
here from the ISA and independently of tkc/lowering/wgmma.py. It runs on a
shared-memory image holding an st in tkc's layout (placed with
tkc.hopper.shared.address, itself tested against docs/tile-ir.md), so the
tests show that the descriptors tkc computes name exactly the intended
64 x 16 / N x 16 slices, for every k step, both majors and each swizzle.
"""
from __future__ import annotations

import numpy as np
import pytest

from tkc.dialect.types import ST
from tkc.dtypes import itemsize

wgmma = pytest.importorskip("tkc.lowering.wgmma")

from wgmma_model import BASE, image, wgmma_read  # noqa: E402


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


def test_8bit_operands_step_k32_with_no_transpose_immediates():
    text = wgmma.mma_instruction(16, "f8e4m3", False, False, False, b_dtype="f8e5m2")
    assert text == ("wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e5m2 "
                    "{$0, $1, $2, $3, $4, $5, $6, $7}, $16, $17, 1, 1, 1;")
    with pytest.raises(ValueError):
        wgmma.mma_instruction(16, "f8e4m3", False, False, True)
    # a k32 step is 32 bytes of a row, as bf16's k16: a 128-element row is four steps
    lay = wgmma.operand_layout(ST("f8e4m3", 64, 256, "128b"), k_major=True)
    assert lay.steps == (0, 32, 64, 96, 64 * 128, 64 * 128 + 32, 64 * 128 + 64, 64 * 128 + 96)
