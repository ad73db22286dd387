"""Bank-conflict degrees (tkc/passes/banks.py): hand-derived answers, and a
brute-force model written here from the specs alone (the swizzle formula of
docs/tile-ir.md, ldmatrix's lane -> matrix row rule, the fragment layout of
fragments.py), which must agree with the analysis on every pattern."""
from __future__ import annotations

import itertools

import pytest

from tkc.dialect.types import RT, RV, ST, SV
from tkc.hopper import fragments
from tkc.passes.banks import Access, degree, lanes_per_phase, phase_degree

SIZE = {"bf16": 2, "f16": 2, "f32": 4}


# ---------------------------------------------------------------- the independent model

def byte_of(st: ST, row: int, col: int) -> int:
    """docs/tile-ir.md: column panels of S bytes, row-major inside, then the
    XOR of bits 7.. into the 16-byte chunk index."""
    e = SIZE[st.dtype]
    s = {"none": 0, "32b": 32, "64b": 64, "128b": 128}[st.swizzle]
    if s == 0:
        return (row * st.cols + col) * e
    per_panel = s // e
    o = (col // per_panel) * st.rows * s + row * s + (col % per_panel) * e
    return o ^ (((o >> 7) & (s // 16 - 1)) << 4)


def cycles(requests: list[tuple[int, int]]) -> int:
    """Serve (byte address, width) requests the way the banks do: each cycle
    every bank delivers one word, and a word delivered serves every lane
    that asked for it. Count the cycles."""
    pending = {(a + k) // 4 for a, w in requests for k in range(0, max(w, 4), 4)}
    n = 0
    while pending:
        served = {}
        for word in sorted(pending):
            served.setdefault(word % 32, word)
        pending -= set(served.values())
        n += 1
    return n


def split(lanes: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """A warp's requests into hardware phases of 128 bytes' worth of lanes."""
    width = lanes[0][1]
    size = 32 if width <= 4 else 128 // width
    return [lanes[i:i + size] for i in range(0, len(lanes), size)]


def matrix_corner(layout: str, q: int) -> tuple[int, int]:
    """ldmatrix .x4 fills registers (e_2q, e_2q+1) from matrix q: the 8x8
    quadrant where fragment element 2q lies (its smallest coordinate)."""
    return min(fragments.base_coord(layout, 2 * q, lane) for lane in range(32))


def model_matrix(st: ST, rt: RT) -> int:
    """Lanes 8q..8q+7 give the 16-byte rows 0..7 of matrix q (PTX ldmatrix)."""
    worst = 1
    for r0, c0 in itertools.product(range(0, st.rows, rt.rows), range(0, st.cols, rt.cols)):
        for bi, bj in itertools.product(range(0, rt.rows, 16), range(0, rt.cols, 16)):
            for q in range(4):
                # With .trans too, lane 8q+i names row i of the quadrant as
                # stored (row-major in the st); only the registers transpose.
                mr, mc = matrix_corner(rt.layout, q)
                lanes = [(byte_of(st, r0 + bi + mr + i, c0 + bj + mc), 16) for i in range(8)]
                worst = max(worst, cycles(lanes))
    return worst


def model_elements(st: ST, rt: RT) -> int:
    """f32 st: every lane moves the elements fragments.py gives it; two
    adjacent columns (row layout) in one 8-byte access."""
    worst = 1
    step = 2 if rt.layout == "row" else 1
    for r0, c0 in itertools.product(range(0, st.rows, rt.rows), range(0, st.cols, rt.cols)):
        for i in range(0, fragments.tile_elems(rt.rows, rt.cols), step):
            lanes = []
            for lane in range(32):
                r, c = fragments.tile_coord(rt.rows, rt.cols, rt.layout, i, lane)
                lanes.append((byte_of(st, r0 + r, c0 + c), 4 * step))
            worst = max([worst] + [cycles(p) for p in split(lanes)])
    return worst


def model_group(sh, warps: int) -> int:
    """Thread t of a W-warp group copies 16-byte chunks t, t + 32W, ... of
    the tile taken row-major; each warp's access splits into 4 phases."""
    e = SIZE[sh.dtype]
    rows, cols = (sh.rows, sh.cols) if isinstance(sh, ST) else (1, sh.length)
    per_row = cols * e // 16
    chunks = list(range(rows * per_row))
    worst = 1
    for warp_start in range(0, len(chunks), 32):
        lanes = []
        for ch in chunks[warp_start:warp_start + 32]:
            row, col = ch // per_row, (ch % per_row) * 16 // e
            lanes.append((byte_of(sh, row, col) if isinstance(sh, ST) else col * e, 16))
        worst = max([worst] + [cycles(p) for p in split(lanes)])
    return worst


# ---------------------------------------------------------------- hand-derived answers

def test_unswizzled_ldmatrix_is_8_way():
    """bf16 64 wide: a row is 128 bytes, all 32 banks. The 8 lanes of one
    phase read rows r..r+7 at the same column: the same 4 banks, 8 times."""
    st = ST("bf16", 64, 64, "none")
    assert degree(Access("ldmatrix", st, RT("bf16", 16, 16, "row"))) == 8
    assert degree(Access("ldmatrix", st, RT("bf16", 16, 64, "col"))) == 8
    assert degree(Access("stmatrix", st, RT("bf16", 32, 32, "row"))) == 8


@pytest.mark.parametrize("swizzle", ["128b", "64b", "32b"])
def test_swizzled_ldmatrix_is_conflict_free(swizzle):
    """Swizzling moves the same 16-byte column chunk of 8 consecutive rows
    to 8 different chunk positions of the 128-byte bank window: 1-way."""
    st = ST("bf16", 64, 64, swizzle)
    for layout in ("row", "col"):
        assert degree(Access("ldmatrix", st, RT("bf16", 16, 32, layout))) == 1


def test_f32_pairs_of_a_16_wide_tile():
    """f32 16x16 row-major: row = 64 bytes. Row layout: lane (g, t) reads 8
    bytes at 64g + 8t; a half warp (g = 0..3) covers bytes 0-31, 64-95,
    128-159, 192-223: rows g and g+2 share banks, 2-way. Col layout: lane
    reads 4 bytes at row 2t, col g: word 32t + g, bank g for all four t:
    4-way."""
    st = ST("f32", 16, 16, "none")
    assert degree(Access("f32 pair", st, RT("f32", 16, 16, "row"))) == 2
    assert degree(Access("f32 pair", st, RT("f32", 16, 16, "col"))) == 4


def test_group_copy_panels():
    """16-byte copies of a 64-wide bf16 tile, 8 threads per phase = one
    128-byte tile row. Unswizzled or 128b (one panel per row): the row is
    contiguous, 1-way. 32b: the row spans 4 panels 2 KiB apart, two chunks
    each, all four on the same 8 banks: 4-way; 64b: 2 panels, 2-way."""
    want = {"none": 1, "128b": 1, "64b": 2, "32b": 4}
    for swizzle, n in want.items():
        assert degree(Access("group copy", ST("bf16", 64, 64, swizzle), None, 4)) == n


def test_replicated_vector_broadcasts():
    """rv<f32, 64, col>: the 4 lanes of a quad read the same element, which
    is one word: a broadcast, not a conflict."""
    assert degree(Access("vector", SV("f32", 64), RV("f32", 64, "col"))) == 1


def test_phase_rules():
    assert [lanes_per_phase(w) for w in (2, 4, 8, 16)] == [32, 32, 16, 8]
    assert phase_degree([0] * 32, 4) == 1                       # broadcast
    assert phase_degree([128 * i for i in range(32)], 4) == 32  # one bank, 32 words
    assert phase_degree([0, 2], 2) == 1                         # halves of one word
    assert phase_degree([0, 128], 16) == 2                      # 16 bytes = 4 banks, twice


def test_describe():
    st = ST("bf16", 64, 64, "none")
    assert Access("ldmatrix", st, RT("bf16", 16, 16, "col")).describe() == \
        'ldmatrix.trans of st<bf16, 64, 64, "none">'
    assert Access("group copy", SV("f32", 64), None, 2).describe() == "group copy of sv<f32, 64>"


# ---------------------------------------------------------------- cross-check with the model

SWIZZLES = ("none", "32b", "64b", "128b")


def _fits(st: ST) -> bool:
    s = {"none": 0, "32b": 32, "64b": 64, "128b": 128}[st.swizzle]
    return s == 0 or (st.cols * SIZE[st.dtype]) % s == 0


MATRIX_CASES = [(ST(d, r, c, s), RT(d, rr, rc, lay))
                for d in ("bf16", "f16") for r, c in ((16, 16), (32, 64), (64, 128))
                for s in SWIZZLES for rr, rc in ((16, 16), (16, 32)) for lay in ("row", "col")
                if c % rc == 0 and r % rr == 0]


@pytest.mark.parametrize("st, rt", [(s, r) for s, r in MATRIX_CASES if _fits(s)])
def test_matrix_matches_model(st, rt):
    assert degree(Access("ldmatrix", st, rt)) == model_matrix(st, rt)
    assert degree(Access("stmatrix", st, rt)) == model_matrix(st, rt)


@pytest.mark.parametrize("st, rt", [
    (ST("f32", r, c, s), RT("f32", 16, 16, lay))
    for r, c in ((16, 16), (16, 32), (32, 48), (16, 64)) for s in SWIZZLES for lay in ("row", "col")
    if _fits(ST("f32", r, c, s))])
def test_elements_match_model(st, rt):
    assert degree(Access("f32 pair", st, rt)) == model_elements(st, rt)


@pytest.mark.parametrize("sh, warps", [
    (ST(d, r, c, s), w) for d in ("bf16", "f32") for r, c in ((16, 16), (64, 64), (32, 96))
    for s in SWIZZLES for w in (1, 4) if _fits(ST(d, r, c, s))] + [
    (SV("bf16", 64), 1), (SV("f32", 48), 2)])
def test_group_matches_model(sh, warps):
    assert degree(Access("group copy", sh, None, warps)) == model_group(sh, warps)


def test_a_warning_is_printed_once_per_process(capsys):
    """interpret() and build() rerun the tile pipeline; the warning does not repeat."""
    import numpy as np
    import tkc
    from tkc import f32, gl, rt, st
    from tkc.ops import group_load, load, store

    @tkc.kernel(warps=1)
    def conflicted(a: gl(f32, 1, 1, 16, 16), o: gl(f32, 1, 1, 16, 16)):
        s = st(f32, 16, 16, "none")
        group_load(s, a, (0, 0, 0, 0))
        tkc.sync()
        for _ in range(3):  # three copies of one line
            store(o, load(rt(f32, 16, 16), s, (0, 0)), (0, 0, 0, 0))
    for _ in range(3):
        conflicted.interpret(np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32))
    assert capsys.readouterr().err.count("2-way shared-memory bank conflicts") == 1


def test_a_library_kernels_notes_are_written_only_where_asked_for(capsys, monkeypatch):
    """An op's first call compiles a library kernel: its bank conflicts (known,
    measured, the library's) are not its user's to act on, so they are noted
    only within diagnostics.library_warnings (`tkc build`'s summary, `tkc
    FILE`); a user's kernel is noted either way (the test above)."""
    from tkc.compiler import compile_to
    from tkc.diagnostics import library_warnings
    from tkc.kernels import gemm_hopper
    from tkc.passes import banks
    kernel = gemm_hopper("f32", True)   # f32 pairs of its epilogue tiles: 2-way (gemm_hopper.py)
    monkeypatch.setattr(banks, "_WARNED", set())
    compile_to(kernel.trace(), "tile")
    assert "bank conflicts" not in capsys.readouterr().err
    with library_warnings():
        compile_to(kernel.trace(), "tile")
    err = capsys.readouterr().err
    assert "gemm_hopper.py:" in err and "2-way shared-memory bank conflicts" in err
