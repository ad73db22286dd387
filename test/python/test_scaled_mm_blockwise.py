"""tkc.scaled_mm with block scales (1x128 for a, 128x128 for b: DeepSeek-V3's)
on the CPU, the interpreter standing in for the GPU: against a float64
product of the dequantised inputs on awkward shapes (M and N not multiples
of the 128 x 128 tile, several K blocks), its error against the unquantised
product no worse than per-tensor scaling's, fake tensors, and the refusals
at the caller's line. The GPU twin: test/gpu/test_fp8_gpu.py."""
from __future__ import annotations

import pytest
from helpers import interpreted, refused_here

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")

import tkc  # noqa: E402
from fp8_blocks import E4M3, data, dequantised_product, quantised  # noqa: E402
from tkc.kernels.scaled_mm_blockwise import scaled_mm_blockwise  # noqa: E402
from tkc.kernels.scaled_mm_hopper import scaled_mm_hopper  # noqa: E402
from tkc.torchops import checks, scaled as op  # noqa: E402


@pytest.fixture
def cpu_ops(monkeypatch):
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")
    monkeypatch.setattr(op, "sms", lambda device: 132)   # the H200's: the tile height's key
    monkeypatch.setattr(op, "_block_kernel", lambda out, BM=128: interpreted(scaled_mm_blockwise(out, BM=BM)))
    monkeypatch.setattr(op, "_kernel", lambda out, rowwise, BN=128, fast=False, BM=128:     # per tensor, to compare
                        interpreted(scaled_mm_hopper(out, rowwise, BN=128, fast_accum=fast, BM=BM)))


@pytest.mark.parametrize("M, N, K, out_dtype", [
    (72, 200, 384, torch.bfloat16),
    (136, 264, 256, torch.float32),
    (16, 8, 128, torch.float32),
    (70, 136, 256, torch.bfloat16),   # M % 4 != 0: scale_a's rows are not 16 bytes (TMA's unit)
    (1, 8, 256, torch.float32),
    (8, 136, 2304, torch.float32),    # K/128 = 18: a second 16-wide box of weight scales, padded to 20
])
def test_matches_a_float64_reference(cpu_ops, M, N, K, out_dtype):
    a, b, sa, sb = quantised(*data(M, N, K))
    assert sa.shape == (M, K // 128) and sb.shape == (K // 128, -(-N // 128))
    c = tkc.scaled_mm(a, b, sa, sb, out_dtype=out_dtype)
    want = dequantised_product(a, b, sa, sb)
    assert c.dtype == out_dtype and c.shape == (M, N)
    tol = 1e-5 if out_dtype == torch.float32 else 2 ** -8
    assert torch.allclose(c.double(), want, rtol=tol, atol=tol * want.abs().max().item())


def test_scales_off_tma_alignment_are_copied(cpu_ops):
    """scale_a 4 bytes into its storage (a view: TMA needs 16-byte aligned data): the same product."""
    M, N, K = 64, 136, 256
    a, b, sa, sb = quantised(*data(M, N, K))
    store = torch.zeros(1 + sa.numel())
    store[1:] = sa.t().reshape(-1)
    moved = store[1:].view(K // 128, M).t()
    assert moved.stride() == sa.stride() and moved.data_ptr() % 16
    assert op.tma_scales(moved.t()).data_ptr() % 16 == 0   # the interpreter does not check alignment
    c = tkc.scaled_mm(a, b, moved, sb, out_dtype=torch.float32)
    assert torch.equal(c, tkc.scaled_mm(a, b, sa, sb, out_dtype=torch.float32))


@pytest.mark.parametrize("spread", [0, 8])
def test_error_no_worse_than_per_tensor_scaling(cpu_ops, spread):
    """e4m3 is a float: scaling moves values between binades of equal relative precision,
    so over the whole product the two errors are one rounding's (a statistical tie: within
    5%). Block scales gain where per-tensor scaling pushes a row or block below e4m3's
    normal range (2^-6 of 448): with rows and blocks up to 2^8 apart (activations'
    outliers) the worst row's error is several times per-tensor scaling's."""
    M, N, K = 96, 136, 512
    x, w = data(M, N, K, seed=3, spread=spread)
    exact = x.double() @ w.double().t()
    block = tkc.scaled_mm(*quantised(x, w), out_dtype=torch.float32).double()
    sx, sw = x.abs().max() / 448, w.abs().max() / 448
    tensor = tkc.scaled_mm((x / sx).to(E4M3), (w / sw).to(E4M3).t(), sx.reshape(()), sw.reshape(()),
                           out_dtype=torch.float32).double()
    total = [float((c - exact).norm() / exact.norm()) for c in (block, tensor)]
    worst_row = [float(((c - exact).norm(dim=1) / exact.norm(dim=1)).max()) for c in (block, tensor)]
    assert total[0] <= 1.05 * total[1], total
    assert worst_row[0] <= (1.05 if spread == 0 else 0.5) * worst_row[1], worst_row


def test_fake_tensors_give_the_shape_and_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a, b = torch.empty(64, 256, dtype=E4M3), torch.empty(16, 256, dtype=E4M3).t()
        c = op._scaled_mm(a, b, torch.empty(2, 64).t(), torch.empty(1, 2).t(), torch.bfloat16, False)
    assert c.shape == (64, 16) and c.dtype == torch.bfloat16


def _call(M=64, N=200, K=256, **kw):
    a, b, sa, sb = quantised(*data(M, N, K))
    args = dict(a=a, b=b, scale_a=sa, scale_b=sb)
    args.update(kw)
    return lambda: tkc.scaled_mm(**args)


@pytest.mark.parametrize("make, message", [
    (lambda: _call(a=torch.zeros(64, 144, dtype=E4M3), b=torch.zeros(200, 144, dtype=E4M3).t(),
                   scale_a=torch.ones(2, 64).t(), scale_b=torch.ones(2, 2).t()),
     "K = 144 must be a multiple of 128"),
    (lambda: _call(scale_a=torch.ones(64, 2)), "block scales must be stored transposed"),
    (lambda: _call(scale_b=torch.ones(2, 2)), "block scales must be stored transposed"),
    (lambda: _call(scale_b=torch.ones(1, 2)), "or blocks: scale_a [M, K/128] = [64, 2]"),
    (lambda: _call(scale_a=torch.ones(2, 64, dtype=torch.float64).t()), "scale_a must be float32"),
    (lambda: _call(b=torch.zeros(256, 200, dtype=E4M3)), "b must be column-major"),
    (lambda: _call(use_fast_accum=True), "use_fast_accum=True has no block-scaled kernel"),
])
def test_refusals_name_the_argument_at_the_callers_line(cpu_ops, make, message):
    refused_here(make(), message, __file__)
