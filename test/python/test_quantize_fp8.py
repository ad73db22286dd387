"""tkc.quantize_fp8 on the CPU, the interpreter standing in for the GPU: bf16
-> e4m3 with DeepSeek's 1x128 scales against a numpy reference bit for bit
(ragged M, several column blocks, rows of very different magnitudes), the
zero block, inf and NaN, the transposed scale layout, fake tensors, and the
refusals at the caller's line. The GPU twin: test/gpu/test_fp8_gpu.py."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import interpreted

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")
ml_dtypes = pytest.importorskip("ml_dtypes")

import tkc  # noqa: E402
from tkc.diagnostics import TkcError  # noqa: E402
from tkc.kernels.quantize_fp8 import quantize_fp8 as kernel  # noqa: E402
from tkc.torchops import checks, quantize as op  # noqa: E402


@pytest.fixture
def cpu_ops(monkeypatch):
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")
    monkeypatch.setattr(op, "_kernel", lambda: interpreted(kernel))


def reference(x: np.ndarray):
    """numpy's quantisation by the documented rule (kernels/quantize_fp8.py), float32 throughout."""
    M, K = x.shape
    blocks = x.reshape(M, K // 128, 128).astype(np.float32)
    with np.errstate(invalid="ignore"):
        amax = np.maximum(np.where(np.isnan(blocks), 0, np.abs(blocks)).max(-1), np.float32(2.0 ** -100))
        mult = (np.float32(448) / amax).astype(np.float32)
        q = np.clip(blocks * mult[..., None], -448, 448).astype(ml_dtypes.float8_e4m3fn)
    return q.astype(np.float32).reshape(M, K), (amax / np.float32(448)).astype(np.float32)


def same(a, b) -> bool:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return bool(np.all((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))))


def activations(M, K, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows = torch.exp2(torch.randint(-12, 12, (M, 1), generator=g).float())   # rows of unlike size
    return (torch.randn(M, K, generator=g) * rows).to(torch.bfloat16)


@pytest.mark.parametrize("M, K", [(40, 384), (16, 128), (97, 256)])
def test_matches_the_reference_bit_for_bit(cpu_ops, M, K):
    x = activations(M, K)
    x[3, :128] = 0                                     # an all-zero block: scale 2^-100 / 448, q 0
    q, s = tkc.quantize_fp8(x)
    assert q.dtype == torch.float8_e4m3fn and q.shape == (M, K)
    assert s.dtype == torch.float32 and s.shape == (M, K // 128) and s.stride() == (1, M)
    want_q, want_s = reference(x.float().numpy())
    assert same(q.float().numpy(), want_q) and same(s.numpy(), want_s)
    assert not q[3, :128].float().any()
    # dequantised, each element is x to e4m3's precision (relative 2^-4) or below its block's subnormals
    back = q.float() * s.repeat_interleave(128, dim=1)
    tol = 2.0 ** -4 * x.float().abs() + s.repeat_interleave(128, dim=1) * 2.0 ** -9
    assert torch.all((back - x.float()).abs() <= tol)


def test_inf_poisons_its_block_and_nan_stays_nan(cpu_ops):
    x = activations(16, 256)
    x[0, 5] = float("inf")
    x[1, 7] = float("nan")
    x[2, 130] = -float("inf")
    q, s = tkc.quantize_fp8(x)
    want_q, want_s = reference(x.float().numpy())
    assert same(q.float().numpy(), want_q) and same(s.numpy(), want_s)
    assert torch.isinf(s[0, 0]) and torch.isinf(s[2, 1]) and torch.isfinite(s[1, 0])
    assert torch.isnan(q[0, 5].float()) and not q[0, :128].float().nan_to_num().any()  # finite ones: 0
    assert torch.isnan(q[1, 7].float()) and q[1, :128].float().isnan().sum() == 1        # scale ignores it
    back = q.float() * s.repeat_interleave(128, dim=1)
    assert back[0, :128].isnan().all() and back[2, 128:].isnan().all()                   # never finite


def test_fake_tensors_give_shapes_dtypes_and_strides():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q, s = op._quantize(torch.empty(48, 256, dtype=torch.bfloat16))
    assert q.shape == (48, 256) and q.dtype == torch.float8_e4m3fn
    assert s.shape == (48, 2) and s.stride() == (1, 48)


@pytest.mark.parametrize("x, message", [
    (torch.zeros(16, 200, dtype=torch.bfloat16), "K = 200 must be a multiple of 128"),
    (torch.zeros(16, 128), "x must be bfloat16"),
    (torch.zeros(2, 16, 128, dtype=torch.bfloat16), "x must be [M, K]"),
])
def test_refusals_at_the_callers_line(cpu_ops, x, message):
    with pytest.raises(TkcError) as info:
        tkc.quantize_fp8(x)
    assert message in info.value.message, info.value.message
    assert info.value.where.startswith(__file__)
