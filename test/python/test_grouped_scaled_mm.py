"""tkc.grouped_scaled_mm on the CPU, the interpreter standing in for the GPU:
the block-scaled FP8 GEMM of MoE experts in DeepGEMM's contiguous layout
(row blocks of several experts, an expert without rows, a block of padding
only) and masked layout (an empty expert, counts not multiples of 128, a
full one) against float64 products of the dequantised operands, what the
masked layout leaves unwritten, fake tensors, and the refusals at the
caller's line. The GPU twin: test/gpu/test_fp8_gpu.py."""
from __future__ import annotations

import pytest
from helpers import interpreted, refused_here

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")

import tkc  # noqa: E402
from fp8_blocks import E4M3, contiguous_rows, counts_rows, dequantised_product, experts, masked_rows  # noqa: E402
from tkc.kernels.scaled_mm_grouped import grouped_contiguous, grouped_counts, grouped_masked  # noqa: E402
from tkc.torchops import checks, grouped as op  # noqa: E402


@pytest.fixture
def cpu_ops(monkeypatch):
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")
    monkeypatch.setattr(op, "_kernel", lambda out, layout, BM=128: interpreted(
        grouped_contiguous(out) if layout == "blocks" else (grouped_masked if layout == "masked" else
                                                             grouped_counts)(out, BM=BM)))


def expert_product(a, sa, b, sb, e):
    """a's rows (sa their [rows, K/128] scales) times expert e's weights, float64."""
    return dequantised_product(a, b[e], sa, sb[e])


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
def test_contiguous_layout(cpu_ops, out_dtype):
    counts, N, K = [100, 0, 130], 200, 256
    b, sb = experts(3, N, K)
    a, sa, groups = contiguous_rows(counts, K, padding_blocks=1)
    c = tkc.grouped_scaled_mm(a, b, sa, sb, groups, out_dtype=out_dtype)
    assert c.shape == (a.shape[0], N) and c.dtype == out_dtype
    tol = 1e-5 if out_dtype == torch.float32 else 2 ** -8
    for blk, e in enumerate(groups.tolist()):
        rows = slice(128 * blk, 128 * blk + 128)
        if e < 0:
            continue                                  # padding only: not written (below)
        want = expert_product(a[rows], sa[rows], b, sb, e)
        assert torch.allclose(c[rows].double(), want, rtol=tol, atol=tol * want.abs().max().item())
    marked = torch.full_like(c, 7.0, dtype=torch.float32)
    op._kernel("f32", "blocks")(*op._views(a, b, sa, sb, groups), marked.view(1, 1, *c.shape))
    assert (marked[-128:] == 7).all() and (marked[:100] != 7).all()


@pytest.mark.parametrize("max_m", [256, 130])   # 130: scale_a's rows not 16 bytes (padded for TMA)
def test_masked_layout(cpu_ops, max_m):
    counts, N, K = [100, 0, max_m], 136, 384
    b, sb = experts(3, N, K, seed=5)
    a, sa, groups = masked_rows(counts, max_m, K)
    c = tkc.grouped_scaled_mm(a, b, sa, sb, groups, out_dtype=torch.float32)
    assert c.shape == (3, max_m, N)
    for e, n in enumerate(counts):
        if n:
            want = expert_product(a[e, :n], sa[e, :n], b, sb, e)
            assert torch.allclose(c[e, :n].double(), want, rtol=1e-5, atol=1e-5 * want.abs().max().item())
    # blocks wholly past a count are not written: run again into a marked output
    marked = torch.full_like(c, 7.0)
    op._kernel("f32", "masked")(*op._views(a, b, sa, sb, groups), marked.view(1, 3, max_m, N))
    assert (marked[1] == 7).all() and (marked[0, 128:] == 7).all() and (marked[0, :100] != 7).all()


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("counts", [[0, 129, 0, 1, 300, 0], [0, 0, 0]], ids=str)
def test_masked_live_tiles_only(cpu_ops, counts, out_dtype):
    """The blocks stride over the live tiles only (ragged=): several experts, empty ones
    between, counts not multiples of 128, max_m 300 not one either (a count of max_m:
    3 row blocks, the last partial), no live tile at all; both output dtypes. Row blocks
    wholly past a count stay unwritten (a marked output)."""
    max_m, N, K = 300, 136, 128
    b, sb = experts(len(counts), N, K, seed=7)
    a, sa, groups = masked_rows(counts, max_m, K, seed=3)
    c = tkc.grouped_scaled_mm(a, b, sa, sb, groups, out_dtype=out_dtype)
    tol = 1e-5 if out_dtype == torch.float32 else 2 ** -8
    for e, n in enumerate(counts):
        if n:
            want = expert_product(a[e, :n], sa[e, :n], b, sb, e)
            assert torch.allclose(c[e, :n].double(), want, rtol=tol, atol=tol * want.abs().max().item())
    marked = torch.full((len(counts), max_m, N), 7.0)
    op._kernel("f32", "masked")(*op._views(a, b, sa, sb, groups), marked.view(1, len(counts), max_m, N))
    for e, n in enumerate(counts):
        live = -(-n // 128) * 128
        assert (marked[e, live:] == 7).all() and (marked[e, :n] != 7).all()


def test_masked_192_row_tiles(cpu_ops, monkeypatch):
    """The kernel at the other tuned tile height, as the op runs a table's
    pick of it: 192 rows, three consumer warpgroups; an expert has ceil(count
    / 192) row blocks (193 rows: two, the second of one row)."""
    picked = []
    monkeypatch.setattr(op.MASKED_TILE, "choose", lambda key, args=None: picked.append(key) or {"BM": 192})
    counts, max_m, N, K = [193, 0, 100], 400, 136, 128
    b, sb = experts(3, N, K, seed=9)
    a, sa, groups = masked_rows(counts, max_m, K, seed=4)
    c = tkc.grouped_scaled_mm(a, b, sa, sb, groups, out_dtype=torch.float32)
    for e, n in enumerate(counts):
        if n:
            want = expert_product(a[e, :n], sa[e, :n], b, sb, e)
            assert torch.allclose(c[e, :n].double(), want, rtol=1e-5, atol=1e-5 * want.abs().max().item())
    marked = torch.full((3, max_m, N), 7.0)
    assert picked == [(512, 256)]                       # max_m 400, N 136: their buckets
    op._kernel("f32", "masked", 192)(*op._views(a, b, sa, sb, groups), marked.view(1, 3, max_m, N))
    assert (marked[0, 384:] == 7).all() and (marked[1] == 7).all() and (marked[2, 192:] == 7).all()
    assert (marked[0, :193] != 7).all() and (marked[2, :100] != 7).all()


@pytest.mark.parametrize("BM", [128, 192])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("counts", [[96, 0, 32, 320], [128, 0], [0, 224, 32], [164, 388, 8], [4, 0, 196]], ids=str)
def test_contiguous_by_counts(cpu_ops, monkeypatch, counts, out_dtype, BM):
    """Experts back to back (counts multiples of 4: an expert of fewer rows than a tile runs into the
    next one's rows and leaves them to it, clipped; a larger one's last tile ends at its
    last row, over its previous tile's), an empty expert, 40 rows past the
    last: each expert's rows against float64; a run into a marked output leaves the rows
    past the experts unwritten; the tile height as a table picks it."""
    from tkc.torchops import plans
    monkeypatch.setattr(op.COUNTS_TILE, "choose", lambda key, args=None: {"BM": BM})
    plans.forget()   # (a plan keeps the height of its first call)
    N, K = 136, 256
    b, sb = experts(len(counts), N, K, seed=3)
    a, sa, cnt = counts_rows(counts, K, extra=40)
    c = tkc.grouped_scaled_mm(a, b, sa, sb, counts=cnt, out_dtype=out_dtype)
    assert c.shape == (a.shape[0], N) and c.dtype == out_dtype
    tol = 1e-5 if out_dtype == torch.float32 else 2 ** -8
    start = 0
    for e, n in enumerate(counts):
        if n:
            rows = slice(start, start + n)
            want = expert_product(a[rows], sa[rows], b, sb, e)
            assert torch.allclose(c[rows].double(), want, rtol=tol, atol=tol * want.abs().max().item())
        start += n
    marked = torch.full((a.shape[0], N), 7.0)
    ends = cnt.cumsum(0, dtype=torch.int32)
    op._kernel("f32", "counts", BM)(*op._views(a, b, sa, sb, cnt), ends.view(1, 1, 1, -1),
                                    marked.view(1, 1, *marked.shape))
    assert (marked[sum(counts):] == 7).all() and (marked[:sum(counts)] != 7).all()


@pytest.mark.parametrize("counts, message", [
    ([96, 18], "counts must be multiples of 4"),
    ([96, -32], "at least 0"),
    ([96, 64], "summing to at most M = 128"),
])
def test_counts_values_are_checked(cpu_ops, counts, message):
    b, sb = experts(2, 136, 128)
    a, sa, _ = counts_rows([96, 32], 128)
    refused_here(lambda: tkc.grouped_scaled_mm(a, b, sa, sb, counts=torch.tensor(counts, dtype=torch.int32)),
                 message, __file__)


def test_fake_tensors_give_the_shape_and_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a, b = torch.empty(2, 64, 256, dtype=E4M3), torch.empty(2, 136, 256, dtype=E4M3).transpose(1, 2)
        c = op._grouped(a, b, torch.empty(2, 2, 64).transpose(1, 2), torch.empty(2, 2, 2).transpose(1, 2),
                        torch.empty(2, dtype=torch.int32), torch.float32, False)
    assert c.shape == (2, 64, 136) and c.dtype == torch.float32


def _call(**kw):
    b, sb = experts(2, 200, 256)
    a, sa, groups = contiguous_rows([100, 50], 256)
    args = dict(a=a, b=b, scale_a=sa, scale_b=sb, groups=groups)
    args.update(kw)
    return lambda: tkc.grouped_scaled_mm(**args)


@pytest.mark.parametrize("make, message", [
    (lambda: _call(a=torch.zeros(200, 256, dtype=E4M3)), "M = 200 must be one"),
    (lambda: _call(b=torch.zeros(2, 256, 200, dtype=E4M3)), "b must be column-major per expert"),
    (lambda: _call(scale_a=torch.ones(256, 2)), "scale_a must be [256, 2] with strides (1, 256)"),
    (lambda: _call(scale_b=torch.ones(2, 2, 2)), "scale_b must be [E, K/128, ceil(N/128)]"),
    (lambda: _call(groups=torch.zeros(3, dtype=torch.int32)), "groups must be a contiguous int32 [2]"),
    (lambda: _call(groups=torch.zeros(2)), "groups must be int32"),
    (lambda: _call(a=torch.zeros(2, 3, 64, 256, dtype=E4M3)), "a must be [M, K] (contiguous layout)"),
    (lambda: _call(out_dtype=torch.float16), "out_dtype must be"),
    (lambda: _call(counts=torch.zeros(2, dtype=torch.int32)), "not both"),
    (lambda: _call(groups=None), "groups is needed"),
    (lambda: _call(groups=None, counts=torch.zeros(3, dtype=torch.int32)), "counts must be a contiguous int32 [2]"),
    (lambda: _call(groups=None, a=torch.zeros(2, 64, 256, dtype=E4M3), counts=torch.zeros(2, dtype=torch.int32)),
     "a must be [M, K] (contiguous layout) or [E, max_m, K] (masked, with groups)"),
])
def test_refusals_name_the_argument_at_the_callers_line(cpu_ops, make, message):
    refused_here(make(), message, __file__)


def test_repeated_eager_calls_run_the_kept_plan(tmp_path, monkeypatch):
    """A repeated eager call with one layout (its key) launches once from the
    plan kept for it, past the checks; a changed argument (out_dtype) is
    checked again, and its refusal stays located."""
    from tkc.bench.fake_driver import fake_driver
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    b, sb = experts(3, 136, 256)
    a, sa, groups = masked_rows([100, 0, 130], 130, 256)
    with fake_driver() as cuda:
        for _ in range(3):
            assert tkc.grouped_scaled_mm(a, b, sa, sb, groups).shape == (3, 130, 136)
        assert len(op._plain.plans) == 1 and cuda.state.launches == 3
        with pytest.raises(tkc.diagnostics.TkcError, match="out_dtype"):
            tkc.grouped_scaled_mm(a, b, sa, sb, groups, out_dtype=torch.float16)


def test_the_masked_tile_height_is_tuned_and_prebuilt():
    """tkc.grouped_scaled_mm.masked_tile: 128 (the default, a key no table
    has) or 192 rows, each a library kernel at both outputs; the contiguous
    layout's blocks are 128 rows by definition, its kernel one."""
    from tkc.kernels import library
    assert [c["BM"] for c in op.MASKED_TILE.candidates()] == [128, 192]
    assert op.MASKED_TILE.choose((3, 5))["BM"] == 128
    built = {k.artifact_key() for k in library()}
    assert [c["BM"] for c in op.COUNTS_TILE.candidates()] == [128, 192]
    assert op.COUNTS_TILE.choose((3, 5))["BM"] == 128
    for out in ("bf16", "f32"):
        assert op._kernel(out, "blocks").artifact_key() in built
        for c in op.MASKED_TILE.candidates():
            assert op._kernel(out, "masked", c["BM"]).artifact_key() in built
            assert op._kernel(out, "counts", c["BM"]).artifact_key() in built
