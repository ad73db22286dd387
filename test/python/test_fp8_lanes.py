"""An 8-bit A in registers for wgmma (k_order="lanes", docs/tile-ir.md):
the one definition of the order its columns enter in (fp8_lane_order)
against the register fragments of both sides, the interpreter's product
against numpy (and that forgetting to order B gives another answer, as on
the GPU), and the located refusals of the frontend. The lowering's packing:
test/lit/lowering/fp8-wgmma-lanes.py; tk-verify's refusals:
test/lit/dialect/fp8-lanes-invalid.mlir; on the GPU: test/gpu/test_fp8_gpu.py."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import bf16, f8e4m3, f32, gl, rt, st, warpgroup
from tkc.hopper import fragments
from tkc.hopper.fp8_lanes import fp8_lane_order, lane_permutation, register_bytes
from tkc.ops import zero
from fp8_kernels import mma_f8_lanes  # noqa: E402
from helpers import refused_at, staged  # noqa: E402

pytest.importorskip("mlir")
ml_dtypes = pytest.importorskip("ml_dtypes")


def test_the_lane_order_is_where_the_row_layout_puts_wgmmas_k():
    """wgmma's 8-bit A fragment puts byte j of register i of lane (g, q) at row
    g + 8 (i % 2), k = 4q + j + 16 (i // 2) (PTX ISA); the row layout holds
    there the column register_bytes names; that column is fp8_lane_order()[k]."""
    order = fp8_lane_order()
    assert sorted(order) == list(range(32))
    assert warpgroup.fp8_lane_order() == order
    for lane in range(32):
        g, q = lane // 4, lane % 4
        for i, reg in enumerate(register_bytes(0)):
            for j, (tile, e) in enumerate(reg):
                row, col = fragments.base_coord("row", e, lane)
                k = 4 * q + j + 16 * (i // 2)
                assert (row, 16 * tile + col) == (g + 8 * (i % 2), order[k])
    assert lane_permutation(64) == [*order, *(32 + c for c in order)]


def test_a_carried_8bit_tile_travels_in_wgmmas_words():
    """A row-layout 8-bit rt crosses a loop as i32 words whose bytes are those
    of wgmma's A registers (register_bytes), four a word; other layouts and
    dtypes as before."""
    from tkc.dialect.types import RT
    from tkc.hopper.registers import packed, per_word, word_order
    p = RT("f8e4m3", 16, 64, "row")
    assert packed(p) and per_word(p) == 4
    words = [word_order(p)[i:i + 4] for i in range(0, 32, 4)]
    for kk in range(2):
        for w, reg in zip(words[4 * kk:4 * kk + 4], register_bytes(kk)):
            assert w == [fragments.tile_index(16, 64, 0, j, e) for j, e in reg]
    assert not packed(RT("f8e4m3", 16, 128, "wide")) and word_order(RT("bf16", 16, 64, "row")) == list(range(32))


def _operands(M=128, N=72, seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((M, 64)) * 4).astype(np.float32)
    b = (rng.standard_normal((N, 64)) * 4).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    return a, b, a.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


def test_the_interpreter_feeds_a_register_8bit_a_in_lane_order():
    """C[m, n] = sum_p A8[m, order[p]] B[n, p] (products exact, one f32 sum);
    with B ordered (B[n, p] = V[n, order[p]]) that is A8 V^T, and without it
    the answer is wrong, as the GPU's would be."""
    a, b, a8 = _operands()
    c = np.zeros((a.shape[0], b.shape[0]), np.float32)
    mma_f8_lanes.interpret(a, b, c)
    assert np.allclose(c, a8[:, lane_permutation(64)] @ b.astype(np.float64).T, rtol=1e-6, atol=1e-3)
    assert not np.allclose(c, a8 @ b.astype(np.float64).T, rtol=1e-2, atol=1e-1)
    v = b                                    # B given in lane order: the natural product
    ordered = np.empty_like(v)
    ordered[:, :] = v[:, lane_permutation(64)]
    mma_f8_lanes.interpret(a, ordered, c)
    assert np.allclose(c, a8 @ v.astype(np.float64).T, rtol=1e-6, atol=1e-3)


def _wg(body):
    def k(a: gl(f32, 1, 1, 64, 64), c: gl(f32, 1, 1, 64, 64)):
        body(st(f8e4m3, 128, 64), zero(rt(f32, 16, 128)), zero(rt(f32, 16, 64)))
    k.__name__ = body.__name__
    return tkc.kernel(warps=4)(k)


def _unordered(v_s, acc, s):
    warpgroup.mma_ABt(acc, s.to(f8e4m3), v_s)  # @lanes_missing


def _bf16_ordered(v_s, acc, s):
    warpgroup.mma_ABt(acc, s.to(bf16), st(bf16, 128, 64), k_order="lanes")  # @lanes_bf16


def _shared_ordered(v_s, acc, s):
    warpgroup.mma_ABt(acc, st(f8e4m3, 64, 64), v_s, k_order="lanes")  # @lanes_shared


def _other_order(v_s, acc, s):
    warpgroup.mma_ABt(acc, s.to(f8e4m3), v_s, k_order="rows")  # @lanes_other


def _ab_form(v_s, acc, s):
    warpgroup.mma_AB(acc, s.to(f8e4m3), st(f8e4m3, 64, 128), k_order="lanes")  # @lanes_ab


@pytest.mark.parametrize("body, marker, words", [
    (_unordered, "lanes_missing", ("columns in another order", 'k_order="lanes"', "fp8_lane_order()")),
    (_bf16_ordered, "lanes_bf16", ("this mma has none",)),
    (_shared_ordered, "lanes_shared", ("this mma has none",)),
    (_other_order, "lanes_other", ("k_order must be one of ('lanes',)", "'rows'")),
    (_ab_form, "lanes_ab", ("ABt form only",)),
])
def test_what_an_8bit_register_a_needs_is_a_located_error(body, marker, words):
    refused_at(lambda: staged(_wg(body)), __file__, marker, *words)


def _packed_other_dtype(a, c):
    from tkc.ops import load, store
    store(c, load(rt(f32, 16, 64), a, (0, 0, 0, 0)).to(f8e4m3), (0, 0, 0, 0), packed=True)  # @packed8_f32


def test_a_packed_8bit_store_goes_to_a_gl_of_its_dtype():
    """store(packed=True) of an 8-bit tile (lane order, tkc.fp8_v_layout's) into
    an f32 gl is refused where it is written."""
    def k(a: gl(f32, 1, 1, 64, 64), c: gl(f32, 1, 1, 64, 64)):
        _packed_other_dtype(a, c)
    refused_at(lambda: staged(tkc.kernel(warps=1)(k)), __file__, "packed8_f32",
               "stores an 8-bit rt into a gl of its dtype")
