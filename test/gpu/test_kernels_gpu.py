"""The kernel library on the GPU, from prebuilt artifacts, against PyTorch."""
import math

import pytest

from tkc.diagnostics import TkcError
from tkc.kernels import attention_fwd, gemm, gemm_hopper

pytestmark = pytest.mark.gpu
try:  # the kernels below must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None


def rel_err(x, ref):
    return float((x.double() - ref.double()).norm() / ref.double().norm())


def check_gemm(kern, out, m, n, k, transpose_b=False, transpose_a=False):
    a = torch.randn(*((k, m) if transpose_a else (m, k)), device="cuda", dtype=torch.bfloat16)
    b = torch.randn(*((n, k) if transpose_b else (k, n)), device="cuda", dtype=torch.bfloat16)
    dt = torch.bfloat16 if out == "bf16" else torch.float32
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
    kern(a, b, c)
    torch.cuda.synchronize()
    assert not c.isnan().any()
    ref = (a.float().T if transpose_a else a.float()) @ (b.float().T if transpose_b else b.float())
    assert rel_err(c, ref) < (1e-2 if out == "bf16" else 1e-5)


# Shapes: the smallest legal one, several blocks each way, long K, odd block
# counts, more work items than SMs, and (Hopper GEMM) ragged M, N, K.
GEMMS = {
    "warp": (gemm, [(128, 128, 32), (256, 384, 96), (1024, 512, 2048), (384, 1152, 160)]),
    "hopper": (gemm_hopper, [(128, 256, 64), (256, 512, 192), (1024, 1024, 1024),
                             (384, 768, 4096), (4096, 4096, 320), (200, 264, 72),
                             (1000, 1000, 1000), (8, 8, 8)]),
}


@pytest.mark.parametrize("out", ["bf16", "f32"])
@pytest.mark.parametrize("which,shape", [(w, sh) for w, (_, shapes) in GEMMS.items() for sh in shapes])
def test_gemm(which, shape, out):
    check_gemm(GEMMS[which][0](out), out, *shape)


@pytest.mark.parametrize("out", ["bf16", "f32"])
@pytest.mark.parametrize("shape", [(128, 256, 64), (1024, 2048, 512), (264, 200, 1000)])
def test_gemm_abt(shape, out):
    """A @ B^T, nn.Linear's layout (B is N x K)."""
    check_gemm(gemm_hopper(out, transpose_b=True), out, *shape, transpose_b=True)


# The benchmark's variants (bench/gemm_tables.py): every one must be correct.
VARIANTS = {f"stages={s}": dict(stages=s) for s in (1, 2, 3, 4)}
VARIANTS.update({"launched": dict(persistent=False), "xyz": dict(order="xyz"),
                 "grouped4": dict(order="grouped(y, 4)"), "grouped8": dict(order="grouped(y, 8)"),
                 "grouped32": dict(order="grouped(y, 32)")})


@pytest.mark.parametrize("which", list(VARIANTS))
def test_gemm_variants(which):
    check_gemm(gemm_hopper("bf16", **VARIANTS[which]), "bf16", 1152, 2304, 768)


# Clusters along C's rows sharing B's tile (cluster_m), alone, with split-K, with A shared
# along x, swapped: the multicast slices and the remote releases on the GPU.
ROW_CLUSTERS = {"bm64-cm4": dict(BM=64, BN=128, cluster_m=4),
                "split2-cm4": dict(BM=64, BN=128, split=2, cluster_m=4),
                "split4-cm2-bt": dict(BM=64, BN=64, split=4, cluster_m=2, transpose_b=True),
                "c2-cm2": dict(BN=128, cluster=2, cluster_m=2),
                "swap-cm4": dict(BM=208, BN=128, swap=True, cluster_m=4)}


@pytest.mark.parametrize("shape", [(256, 1536, 4096), (777, 1000, 1000), (100, 264, 72)])
@pytest.mark.parametrize("which", list(ROW_CLUSTERS))
def test_gemm_row_clusters(which, shape):
    kw = ROW_CLUSTERS[which]
    for _ in range(3):   # again: a slot released too early would show as a wrong sum
        check_gemm(gemm_hopper("bf16", persistent=False, **kw), "bf16", *shape,
                   transpose_b=kw.get("transpose_b", False))


# sliced-K: a 64-row tile's two consumer warpgroups split each K step, warpgroup 1's partial
# through shared memory; alone and in pairs of row blocks sharing B (cluster_m).
SLICED = {"bn128": dict(BN=128), "bn64-bt": dict(BN=64, transpose_b=True),
          "bn128-at": dict(BN=128, transpose_a=True), "bn64-cm2": dict(BN=64, cluster_m=2)}


@pytest.mark.parametrize("shape", [(256, 1536, 4096), (1000, 768, 1000), (64, 6144, 4096), (100, 264, 72)])
@pytest.mark.parametrize("which", list(SLICED))
def test_gemm_sliced_k(which, shape):
    kw = SLICED[which]
    m, n, k = shape
    kern = gemm_hopper("bf16", BM=64, persistent=False, sliced=True, **kw)
    if kw.get("transpose_a"):   # (A^T's rows are M long: M a multiple of 8)
        m = -(-m // 8) * 8
    for _ in range(3):   # again: a partial read before warpgroup 1 wrote it would show as a wrong sum
        check_gemm(kern, "bf16", m, n, k, transpose_b=kw.get("transpose_b", False),
                   transpose_a=kw.get("transpose_a", False))


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


def test_gemm_hopper_rejects_bad_arguments():
    kern = gemm_hopper("bf16")
    t = lambda *s, dt=torch.bfloat16: torch.randn(*s, device="cuda", dtype=dt)  # noqa: E731
    with pytest.raises(TkcError, match="16 bytes"):  # N = 100: rows of 200 bytes
        kern(t(64, 64), t(64, 100), t(64, 100))
    with pytest.raises(TkcError, match="dtype|bf16"):
        kern(t(64, 64, dt=torch.float32), t(64, 256), t(64, 256))
    with pytest.raises(TkcError, match="N"):  # c's N differs from b's N
        kern(t(64, 64), t(64, 256), t(64, 512))
    with pytest.raises(TkcError, match="contiguous|stride"):
        kern(t(64, 128)[:, :64], t(64, 256), t(64, 256))
    with pytest.raises(TkcError, match="device|cuda|GPU"):
        kern(t(64, 64).cpu(), t(64, 256), t(64, 256))


ATTENTION = {  # name: (head dim, kernel factory)
    "fig1-d64": (64, lambda: attention_fwd(64, KV_SUB=32)),
    "fig1-d128": (128, lambda: attention_fwd(128, KV_SUB=16)),
}


# the variants beyond the library, for `tkc build test/gpu/test_kernels_gpu.py`
KERNELS = [make() for _, make in ATTENTION.values()] + \
    [gemm_hopper("bf16", **kw) for kw in VARIANTS.values()] + \
    [gemm_hopper("bf16", persistent=False, **kw) for kw in ROW_CLUSTERS.values()] + \
    [gemm_hopper("bf16", BM=64, persistent=False, sliced=True, **kw) for kw in SLICED.values()]


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
