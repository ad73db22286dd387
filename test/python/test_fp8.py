"""8-bit floats (docs/dsl.md, "8-bit floats"): f8e4m3 and f8e5m2 in the
dialect and the frontend, the interpreter's rounding against ml_dtypes (to
nearest even, saturating to the finite max as PTX's cvt.rn.satfinite, NaN
kept), conversions of register tiles, the runtime's dtype names, and the
located refusals of what an 8-bit tile does not do. The lowering is checked
by test/lit/lowering/fp8-convert.py, on the GPU by test/gpu/test_fp8_gpu.py."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import bf16, f8e4m3, f8e5m2, f32, gl, i32, rt, st, warpgroup
from tkc.dialect.types import GL, RT, ST, view
from tkc.interpreter.values import round_f8e4m3, round_f8e5m2
from tkc.ops import col_pick, exp, load, row_sum, store, zero
from fp8_kernels import SHARED_LOADS, convert, mma_f8, shared_load_at, store_ragged, tma_roundtrip  # noqa: E402
from helpers import refused_at, staged  # noqa: E402

pytest.importorskip("mlir")
ml_dtypes = pytest.importorskip("ml_dtypes")

FORMATS = [(f8e4m3, round_f8e4m3, ml_dtypes.float8_e4m3fn, 448.0),
           (f8e5m2, round_f8e5m2, ml_dtypes.float8_e5m2, 57344.0)]


def reference(x, np_type, finite_max):
    """PTX's cvt.rn.satfinite: ml_dtypes' cast (nearest even) of x saturated to the finite max
    (ml_dtypes itself overflows to NaN or infinity)."""
    with np.errstate(invalid="ignore"):
        return np.clip(np.asarray(x, np.float32), -finite_max, finite_max).astype(np_type).astype(np.float32)


def same_bits(a, b) -> bool:
    """Equal as float32 bit patterns (so -0 differs from +0), any NaN equal to any NaN."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return bool(np.all((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))))


def edge_values(np_type):
    """Every finite value of the format, the midpoints between neighbours and the floats
    next to them (ties and near-ties), and the specials."""
    grid = np.arange(256, dtype=np.uint8).view(np_type).astype(np.float32)
    grid = np.unique(grid[np.isfinite(grid)])
    mids = ((grid[:-1].astype(np.float64) + grid[1:]) / 2).astype(np.float32)
    near = [np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))]
    specials = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38], np.float32)
    return np.concatenate([grid, mids, *near, specials])


@pytest.mark.parametrize("dtype, rnd, np_type, finite_max", FORMATS)
def test_rounding_matches_ml_dtypes_with_saturation(dtype, rnd, np_type, finite_max):
    rng = np.random.default_rng(3)
    random_bits = rng.integers(0, 2 ** 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([edge_values(np_type), random_bits])
    got = rnd(x)
    assert same_bits(got, reference(x, np_type, finite_max))
    assert np.nanmax(np.abs(got)) == finite_max          # infinities and overflow saturate
    assert np.isnan(rnd(np.float32(np.nan)))
    assert np.signbit(rnd(np.float32(-1e-30)))           # underflow keeps the sign: -0


def test_types_print_as_mlir_float8_and_read_back():
    assert RT(f8e4m3, 16, 32).text() == '!tk.rt<f8E4M3FN, 16 : i64, 32 : i64, "row">'
    assert GL(f8e5m2, 1, 1, -1, 64).text().startswith("!tk.gl<f8E5M2,")
    for v in (RT(f8e4m3, 16, 32), ST(f8e5m2, 64, 128, "128b"), GL(f8e4m3, 1, 1, -1, 128)):
        assert view(v.text()) == v
    with pytest.raises(Exception):
        from tkc import sv
        sv(f8e4m3, 64)


def test_conversions_round_saturate_and_widen_exactly():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((64, 64)) * np.exp2(rng.integers(-20, 20, (64, 64)))).astype(np.float32)
    x[0, :6] = [np.inf, -np.inf, np.nan, 1e9, -1e9, 464.0]
    q4, q5, back = np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32), \
        np.zeros((2, 64, 64), np.float32)
    convert.interpret(x, q4, q5, back)
    from tkc.interpreter.values import round_bf16
    assert same_bits(q4, reference(x, ml_dtypes.float8_e4m3fn, 448.0))
    assert same_bits(q5, reference(round_bf16(x), ml_dtypes.float8_e5m2, 57344.0))
    assert same_bits(back[0], q4) and same_bits(back[1], q5)   # every 8-bit value is a bf16
    assert q4[0, 0] == 448.0 and q4[0, 1] == -448.0 and np.isnan(q4[0, 2]) and q5[0, 3] == 57344.0


def test_wide_8bit_stores_clip_at_ragged_rows_and_columns():
    """store_ragged: 16-byte pieces (the two lanes of a row trade halves); rows and columns past
    the gl's are not written. Its rows must be a multiple of 16 bytes (the launch requirement)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((20, 80)).astype(np.float32) * 8
    q = np.full((20, 80), 7.0, np.float32)
    store_ragged.interpret(x, q)
    assert same_bits(q, reference(x, ml_dtypes.float8_e4m3fn, 448.0))
    from tkc.lowering.requirements import divisible
    module = store_ragged.trace()
    assert divisible(module.body.operations[0])[1] == [1, 1, 1, 16]   # q's columns: 16-byte pieces
    with pytest.raises(tkc.diagnostics.TkcError, match=r"dim c .* = 72 must be a multiple of 16"):
        store_ragged.interpret(x[:, :72].copy(), q[:, :72].copy())


def test_tma_moves_8bit_tiles_ragged_at_the_edges():
    rng = np.random.default_rng(1)
    a = reference(rng.standard_normal((80, 272)) * 1000, ml_dtypes.float8_e5m2, 57344.0)
    o = np.full_like(a, 7.0)
    tma_roundtrip.interpret(a, o)
    assert same_bits(o, a)                   # the box and panels: test/lit/lowering/fp8-tma.py


def test_tma_refuses_8bit_rows_of_other_than_16_bytes():
    from tkc.diagnostics import TkcError
    with pytest.raises(TkcError, match="multiple of 16 bytes"):
        tma_roundtrip.interpret(np.zeros((64, 264), np.float32), np.zeros((64, 264), np.float32))


def test_wgmma_multiplies_8bit_operands_exactly_into_f32():
    """Products of 8-bit values are exact; the f32 sum of the interpreter against float64
    (M, N, K not multiples of the tiles: TMA reads zeros past the edges)."""
    rng = np.random.default_rng(2)
    M, N, K = 80, 72, 208
    a = reference(rng.standard_normal((M, K)) * 8, ml_dtypes.float8_e4m3fn, 448.0)
    b = reference(rng.standard_normal((N, K)) * 8, ml_dtypes.float8_e5m2, 57344.0)
    c = np.zeros((M, N), np.float32)
    mma_f8.interpret(a, b, c)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.allclose(c, want, rtol=1e-6, atol=1e-3)


def _wg(body, b_shape=(64, 128), b_dtype=f8e4m3):
    def k(a: gl(f8e4m3, 1, 1, 64, 128), c: gl(f32, 1, 1, 64, 64)):
        a_s, b_s = st(f8e4m3, 64, 128), st(b_dtype, *b_shape)
        acc = zero(rt(f32, 16, 64))
        body(a_s, b_s, acc)
    k.__name__ = body.__name__
    return tkc.kernel(warps=4)(k)


def _mma_ab(a_s, b_s, acc):
    warpgroup.mma_AB(acc, a_s, b_s)  # @fp8_n_major


def _mma_atbt(a_s, b_s, acc):
    warpgroup.mma_AtBt(acc, st(f8e4m3, 128, 64), b_s)  # @fp8_a_transposed


def _mixed(a_s, b_s, acc):
    warpgroup.mma_ABt(acc, a_s, b_s)  # @fp8_mixed


def _a_in_registers(a_s, b_s, acc):
    from tkc.ops import zero as z
    warpgroup.mma_ABt(acc, z(rt(f8e4m3, 16, 128)), b_s)  # @fp8_a_registers


@pytest.mark.parametrize("body, b_shape, b_dtype, marker, words", [
    (_mma_ab, (128, 64), f8e4m3, "fp8_n_major", ("must both be K-major", "no transpose for 8-bit")),
    (_mma_atbt, (64, 128), f8e4m3, "fp8_a_transposed", ("must both be K-major",)),
    (_mixed, (64, 128), bf16, "fp8_mixed", ("both be 8-bit floats",)),
    (_a_in_registers, (64, 128), f8e4m3, "fp8_a_registers", ("columns in another order", "k_order")),
])
def test_what_8bit_wgmma_does_not_do_is_a_located_error(body, b_shape, b_dtype, marker, words):
    kernel = _wg(body, b_shape, b_dtype)
    refused_at(lambda: staged(kernel), __file__, marker, *words)


G8, G32 = gl(f8e4m3, 1, 1, 16, 64), gl(f32, 1, 1, 16, 64)


def _k(body):
    def k(a: G8, g: G32):
        body(a, g)
    k.__name__ = body.__name__
    return tkc.kernel(warps=1)(k)


def _exp(a, g):
    exp(load(rt(f8e4m3, 16, 64), a, (0, 0, 0, 0)))  # @fp8_math


def _converting_load(a, g):
    load(rt(f32, 16, 64), a, (0, 0, 0, 0))  # @fp8_converting_load


def _to_int(a, g):
    load(rt(f8e4m3, 16, 64), a, (0, 0, 0, 0)).to(i32)  # @fp8_int


def _to_shared(a, g):
    s = st(f8e4m3, 16, 64)
    store(s, load(rt(f8e4m3, 16, 64), a, (0, 0, 0, 0)), (0, 0))  # @fp8_shared


def _row_sum(a, g):
    row_sum(load(rt(f8e4m3, 16, 64), a, (0, 0, 0, 0)))  # @fp8_reduce


def _col_pick(a, g):
    col_pick(load(rt(f8e4m3, 16, 64), a, (0, 0, 0, 0)), 3)  # @fp8_pick


def _ragged(a, g):
    load(rt(f8e4m3, 16, 64), a, (0, 0, 0, 0), fill=0.0)  # @fp8_ragged


def _element(a, g):
    load(f32, a, at=(0, 0, 0, 0), fill=0.0)  # @fp8_element


@pytest.mark.parametrize("W", sorted(SHARED_LOADS))
def test_8bit_tiles_load_from_shared_memory(W):
    """TMA into an st, each warp's 16 rows into a row-layout rt, out to a gl:
    the values come back (the GPU's bit-for-bit check is test_fp8_gpu.py's)."""
    a = round_f8e4m3(np.random.default_rng(W).standard_normal((100, W)).astype(np.float32) * 8)
    o = np.zeros_like(a)
    SHARED_LOADS[W].interpret(a, o)
    assert np.array_equal(o, a)


def test_8bit_subtiles_load_from_shared_memory():
    """A 16-row subtile at a column offset and an 8-row one, from a TMA-filled st."""
    a = round_f8e4m3(np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32) * 8)
    o16, o8 = np.zeros((16, 32), np.float32), np.zeros((8, 32), np.float32)
    shared_load_at.interpret(a, o16, o8)
    assert np.array_equal(o16, a[16:, 32:]) and np.array_equal(o8, a[24:, 32:])


@pytest.mark.parametrize("body, marker, words", [
    (_exp, "fp8_math", ("exp: an 8-bit float tile", "storage type", ".to(tkc.f32)")),
    (_converting_load, "fp8_converting_load", ("moves without converting",)),
    (_to_int, "fp8_int", ("converts to and from float tiles",)),
    (_to_shared, "fp8_shared", ("moves to and from a gl, or loads from an st in the row layout",)),
    (_row_sum, "fp8_reduce", ("row_sum: an 8-bit float tile", "storage type", ".to(tkc.f32)")),
    (_col_pick, "fp8_pick", ("col_pick: an 8-bit float tile", "storage type")),
    (_ragged, "fp8_ragged", ("no fill",)),
    (_element, "fp8_element", ("moved by TMA or by register tiles", "one element")),
])
def test_what_8bit_tiles_do_not_do_is_a_located_error(body, marker, words):
    kernel = _k(body)
    refused_at(lambda: staged(kernel), __file__, marker, *words)


def test_runtime_names_torch_float8_dtypes():
    torch = pytest.importorskip("torch")
    from tkc.runtime.tensors import view as tensor_view
    assert tensor_view(torch.zeros(4, 16, dtype=torch.float8_e4m3fn)).dtype == "f8e4m3"
    assert tensor_view(torch.zeros(4, 16, dtype=torch.float8_e5m2)).dtype == "f8e5m2"
    assert tensor_view(np.zeros(4, ml_dtypes.float8_e4m3fn)).dtype == "f8e4m3"
