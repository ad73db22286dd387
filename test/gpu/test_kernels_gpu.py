"""The kernel library on the GPU, from prebuilt artifacts, against PyTorch."""
import math

import pytest

from tkc.diagnostics import TkcError
from tkc.kernels import attention_fwd, attention_hopper, gemm, gemm_hopper, gemm_pipelined

pytestmark = pytest.mark.gpu
try:  # the kernels below must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None


def rel_err(x, ref):
    return float((x.double() - ref.double()).norm() / ref.double().norm())


def check_gemm(kern, out, m, n, k):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    dt = torch.bfloat16 if out == "bf16" else torch.float32
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
    kern(a, b, c)
    torch.cuda.synchronize()
    assert not c.isnan().any()
    assert rel_err(c, a.float() @ b.float()) < (1e-2 if out == "bf16" else 1e-5)


# Shapes: the smallest legal one, several blocks each way, long K, and odd block counts.
GEMMS = {
    "warp": (gemm, [(128, 128, 32), (256, 384, 96), (1024, 512, 2048), (384, 1152, 160)]),
    "hopper": (gemm_hopper, [(64, 256, 64), (128, 512, 192), (1024, 1024, 1024), (192, 768, 4096)]),
    "pipelined": (gemm_pipelined, [(128, 256, 256), (256, 512, 512), (1024, 1024, 1024),
                                   (384, 768, 4096)]),
}


@pytest.mark.parametrize("out", ["bf16", "f32"])
@pytest.mark.parametrize("which,shape", [(w, sh) for w, (_, shapes) in GEMMS.items() for sh in shapes])
def test_gemm(which, shape, out):
    check_gemm(GEMMS[which][0](out), out, *shape)


def test_gemm_small_tiles():
    kern = gemm("bf16", BM=64, BN=64, BK=32, WM=2, WN=2)
    a = torch.randn(192, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, 320, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(192, 320, device="cuda", dtype=torch.bfloat16)
    kern(a, b, c)
    assert rel_err(c, a.float() @ b.float()) < 1e-2


def test_gemm_rejects_awkward_shapes():
    kern = gemm("bf16")
    a = torch.randn(100, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, 128, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(100, 128, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(TkcError, match="divisible|multiple"):
        kern(a, b, c)
    with pytest.raises(TkcError, match="dtype|bf16"):
        kern(a.float(), b, c)


def test_gemm_hopper_rejects_awkward_shapes():
    kern = gemm_hopper("bf16")
    a = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, 200, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(64, 200, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(TkcError, match="divisible|multiple"):
        kern(a, b, c)
    for m, k in ((80, 64), (64, 96)):  # M not whole 64-row blocks, K not whole 64-wide steps
        with pytest.raises(TkcError, match="divisible|multiple"):
            kern(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
                 torch.randn(k, 256, device="cuda", dtype=torch.bfloat16),
                 torch.empty(m, 256, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(TkcError, match="divisible|multiple"):  # K = 320: 1.25 rounds of the ring
        gemm_pipelined("bf16")(torch.randn(128, 320, device="cuda", dtype=torch.bfloat16),
                               torch.randn(320, 256, device="cuda", dtype=torch.bfloat16),
                               torch.empty(128, 256, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(TkcError, match="N"):  # c's N differs from b's N
        kern(a, torch.randn(64, 256, device="cuda", dtype=torch.bfloat16),
             torch.empty(64, 512, device="cuda", dtype=torch.bfloat16))


ATTENTION = {  # name: (head dim, kernel factory)
    "fig1-d64": (64, lambda: attention_fwd(64, KV_SUB=32)),
    "fig1-d128": (128, lambda: attention_fwd(128, KV_SUB=16)),
    "hopper-d64-kv64": (64, lambda: attention_hopper(64, KV=64)),
    "hopper-d64-kv128": (64, lambda: attention_hopper(64, KV=128)),
    "hopper-d128-kv64": (128, lambda: attention_hopper(128, KV=64)),
    "hopper-d64-wg2": (64, lambda: attention_hopper(64, KV=64, WG=2)),
}


# the variants beyond the library, for `tkc build test/gpu/test_kernels_gpu.py`
KERNELS = [make() for _, make in ATTENTION.values()]


@pytest.mark.parametrize("which", list(ATTENTION))
@pytest.mark.parametrize("B,H,N", [(1, 1, 256), (2, 3, 512), (1, 2, 1024)])
def test_attention(which, B, H, N):
    D, make = ATTENTION[which]
    kern = make()
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    scale = 1.0 / math.sqrt(D)
    kern(q, k, v, o, scale)
    torch.cuda.synchronize()
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=scale)
    assert not o.isnan().any()
    assert rel_err(o, ref) < 1e-2


def test_attention_rejects_ragged_sequences():
    q = torch.randn(1, 1, 320, 64, device="cuda", dtype=torch.bfloat16)  # 1.25 KV rounds of 256
    with pytest.raises(TkcError, match="divisible|multiple"):
        attention_hopper(64, KV=128)(q, q, q, torch.empty_like(q), 0.125)
