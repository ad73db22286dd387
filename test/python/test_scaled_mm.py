"""tkc.scaled_mm on the CPU, with the interpreter standing in for the GPU: the
FP8 GEMM with per-tensor and row-wise scales against a float32 reference on
small awkward shapes (M, N, K not multiples of the tiles), f32 output, the
custom op under torch.compile's fake tensors, and the refusals at the
caller's line. The GPU twin: test/gpu/test_fp8_gpu.py (against torch._scaled_mm)."""
from __future__ import annotations

import pytest
from helpers import interpreted, refused_here, staged

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")

import tkc  # noqa: E402
from tkc.kernels.scaled_mm_hopper import scaled_mm_hopper  # noqa: E402
from tkc.torchops import checks, scaled as op  # noqa: E402

E4M3 = torch.float8_e4m3fn


@pytest.fixture
def cpu_ops(monkeypatch):
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")
    monkeypatch.setattr(op, "sms", lambda device: 132)   # the H200's: the tile height's key
    monkeypatch.setattr(op, "_kernel", lambda out, rowwise, BN=256, fast=False, BM=128:
                        interpreted(scaled_mm_hopper(out, rowwise, BN=128, fast_accum=fast, BM=BM)))


def operands(M, N, K, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(M, K, generator=g) * 8).to(E4M3)
    b = (torch.randn(N, K, generator=g) * 8).to(E4M3).t()          # [K, N], column-major
    return a, b


def reference(a, b, sa, sb, out_dtype):
    """float32 (float64, then rounded once) product of the 8-bit values, scaled."""
    c = (a.double() @ b.double()) * sa.double() * sb.double()
    return c.to(out_dtype)


@pytest.mark.parametrize("M, N, K, rowwise, out_dtype", [
    (136, 200, 272, False, torch.bfloat16),
    (72, 264, 144, True, torch.bfloat16),
    (40, 136, 48, True, torch.float32),
])
@pytest.mark.parametrize("fast", [False, True])
def test_matches_a_float32_reference(cpu_ops, M, N, K, rowwise, out_dtype, fast):
    a, b = operands(M, N, K)
    g = torch.Generator().manual_seed(1)
    sa = torch.rand(M, 1, generator=g) + 0.5 if rowwise else torch.tensor(0.25)
    sb = torch.rand(1, N, generator=g) + 0.5 if rowwise else torch.tensor([3.0])
    c = tkc.scaled_mm(a, b, sa, sb, out_dtype=out_dtype, use_fast_accum=fast)
    want = reference(a, b, sa, sb, out_dtype)
    assert c.dtype == out_dtype and c.shape == (M, N)
    tol = 1e-5 if out_dtype == torch.float32 else 2 ** -8
    assert torch.allclose(c.double(), want.double(), rtol=tol, atol=1e-3)


@pytest.mark.parametrize("rowwise", [False, True])
def test_three_consumer_warpgroups_after_the_passes(rowwise):
    """The 192-row tile (three consumer warpgroups and the producer: 16
    warps) as the passes stage it, on 2 persistent blocks with the race and
    deadlock checks: 2 x 2 items, two K steps, ragged M, N and K."""
    import numpy as np
    import tkc.interpreter
    M, N, K = 264, 200, 176
    a, b = operands(M, N, K, seed=3)
    g = torch.Generator().manual_seed(4)
    sa = (torch.rand(1, 1, 1, M, generator=g) + 0.5) if rowwise else torch.tensor([[[[0.5]]]])
    sb = (torch.rand(1, 1, 1, N, generator=g) + 0.5) if rowwise else torch.tensor([[[[2.0]]]])
    c = np.full((M, N), np.nan, np.float32)
    tkc.interpreter.run(staged(scaled_mm_hopper("f32", rowwise, BN=128, BM=192)),
                        [a.float().numpy(), b.t().float().numpy(), sa.numpy(), sb.numpy(), c], sms=2)
    want = reference(a, b, sa.view(-1, 1) if rowwise else sa.view(()), sb.view(1, -1) if rowwise else sb.view(()),
                     torch.float32)
    assert torch.allclose(torch.from_numpy(c).double(), want.double(), rtol=1e-5, atol=1e-3)


def test_fake_tensors_give_the_shape_and_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a, b = torch.empty(64, 32, dtype=E4M3), torch.empty(16, 32, dtype=E4M3).t()
        c = op._scaled_mm(a, b, torch.empty(()), torch.empty(()), torch.float32, False)
    assert c.shape == (64, 16) and c.dtype == torch.float32


def _call(**kw):
    a, b = operands(64, 32, 64)
    args = dict(a=a, b=b, scale_a=torch.tensor(1.0), scale_b=torch.tensor(1.0))
    args.update(kw)
    return lambda: tkc.scaled_mm(**args)


@pytest.mark.parametrize("make, message", [
    (lambda: _call(a=torch.zeros(64, 64, dtype=torch.bfloat16)), "a must be float8_e4m3fn"),
    (lambda: _call(b=torch.zeros(64, 32, dtype=E4M3)), "b must be column-major"),
    (lambda: _call(a=torch.zeros(64, 40, dtype=E4M3), b=torch.zeros(32, 40, dtype=E4M3).t()),
     "K = 40 must be a multiple of 16"),
    (lambda: _call(scale_a=torch.ones(64, 1), scale_b=torch.ones(32, 1)), "row-wise"),
    (lambda: _call(scale_a=torch.ones(1, dtype=torch.float16)), "scale_a must be float32"),
    (lambda: _call(out_dtype=torch.float16), "out_dtype must be torch.bfloat16 or torch.float32"),
    (lambda: _call(b=torch.zeros(32, 48, dtype=E4M3).t()), "b must be [K, N] with a's K = 64"),
])
def test_refusals_name_the_argument_at_the_callers_line(cpu_ops, make, message):
    refused_here(make(), message, __file__)


def test_repeated_eager_calls_skip_the_checks_and_the_custom_op(tmp_path, monkeypatch):
    """tkc.scaled_mm and tkc.quantize_fp8 called again with arguments of one
    layout (the eager key) launch once a call from the plan kept for it, never
    through torch.library's wrapper; another layout, or a bad argument, takes
    the checked path (and its located errors) again."""
    from tkc.bench.fake_driver import fake_driver
    from tkc.torchops import quantize
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(op._scaled_mm, "custom_op", None)        # would fail if called
    monkeypatch.setattr(quantize._quantize, "custom_op", None)
    a, b = operands(64, 128, 256)
    one = torch.ones((), dtype=torch.float32)
    x = torch.randn(64, 256).to(torch.bfloat16)
    with fake_driver() as cuda:
        for _ in range(4):
            assert tkc.scaled_mm(a, b, one, one).shape == (64, 128)
            q, s = tkc.quantize_fp8(x)
            assert q.shape == (64, 256) and s.stride() == (1, 64)
        assert len(op._plain.plans) == 1 and len(quantize._plain.plans) == 1
        tkc.scaled_mm(a, b, one, one, out_dtype=torch.float32)       # another key: its own plan
        assert len(op._plain.plans) == 2
        with pytest.raises(tkc.diagnostics.TkcError, match="out_dtype"):
            tkc.scaled_mm(a, b, one, one, out_dtype=torch.float16)
        launches = cuda.state.launches
    assert launches == 4 * 2 + 1
    assert not op._plain.plans and not quantize._plain.plans       # made with the fake driver: forgotten


def test_every_tuned_tile_is_prebuilt():
    """Each tile tkc.scaled_mm's tables may pick (TILE's heights, promoted and
    block-scaled; FAST_TILE's widths) is a library kernel for every output
    and scaling, so an offline call never meets a pick it cannot run."""
    from tkc.kernels import library
    built = {k.artifact_key() for k in library()}
    for out in ("bf16", "f32"):
        for c in op.TILE.candidates():
            assert op._block_kernel(out, c["BM"]).artifact_key() in built
            for rowwise in (False, True):
                assert op._kernel(out, rowwise, op.PROMOTED_BN, False, c["BM"]).artifact_key() in built
        for c in op.FAST_TILE.candidates():
            for rowwise in (False, True):
                assert op._kernel(out, rowwise, c["BN"], True).artifact_key() in built


def test_the_tile_height_is_keyed_by_waves():
    """tkc.scaled_mm.tile's key is the waves of work items each height makes
    on the GPU's SMs: shapes whose 192-row items round up to fewer waves
    than a bucket of M would say get keys of their own, and the tuning's
    examples hold one C for every key a C up to 16k x 16k can make."""
    assert op._height_key(2100, 4096, 132) == (5, 3)     # 544 items of 128 rows, 352 of 192
    assert op._height_key(1000, 4096, 132) == (2, 2)
    assert op._height_key(4000, 4096, 132) == (8, 6)
    assert op._height_key(2100, 4096, 66) == (9, 6)      # another GPU, other waves
    assert op._height_key(16384, 16384, 132) == (op.MANY + 1,)
    shapes = op._height_shapes(132)
    keys = [op._height_key(m, n, 132) for m, n in shapes]
    assert len(set(keys)) == len(keys)
    for m in range(1, 16385, 37):
        for n in (512, 4096, 7000, 16384):
            assert op._height_key(m, n, 132) in keys
    assert op.TILE.choose((999, 999))["BM"] == 128      # a key no table has: the default
