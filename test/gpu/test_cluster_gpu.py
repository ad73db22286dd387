"""Thread-block clusters on the GPU, against PyTorch: a 2-CTA cluster whose
CTAs each multicast half of a tile to both (each CTA then holds the whole
tile), two CTAs that swap f32 tiles through distributed shared memory
(tma.store_cta) and sum them, and a hand-pipelined GEMM over (2, 1, 1) clusters sharing the A tile
by multicast, its stages released by remote mbarrier arrivals. The kernels
live in test/python/cluster_kernels.py (the interpreter tests run them too)."""
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
try:  # the kernels above the tests must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from cluster_kernels import (cluster_gemm, column_cluster_gemm, exchange_sum,  # noqa: E402,F401
                             grid_cluster_gemm, multicast_copy, persistent_cluster_gemm,
                             row_cluster_gemm, sliced_grid_gemm, staged_cluster_gemm)


def test_multicast_copy_fills_both_ctas():
    a = torch.randn(1, 1, 128, 64, device="cuda", dtype=torch.bfloat16)
    o = torch.zeros(1, 2, 128, 64, device="cuda", dtype=torch.bfloat16)
    multicast_copy(a, o)
    torch.cuda.synchronize()
    assert torch.equal(o[0, 0], a[0, 0]) and torch.equal(o[0, 1], a[0, 0])


def test_store_cta_swaps_tiles_between_ctas():
    """Each CTA's tile lands in the peer's shared memory by the copy engine,
    completing the peer's barrier: both outputs are the sum, on repeated
    launches."""
    a = torch.randn(1, 2, 64, 64, device="cuda")
    for _ in range(3):
        o = torch.full_like(a, float("nan"))
        exchange_sum(a, o)
        torch.cuda.synchronize()
        want = a[0, 0] + a[0, 1]
        assert torch.equal(o[0, 0], want) and torch.equal(o[0, 1], want)


@pytest.mark.parametrize("m, n, k", [(256, 256, 256), (384, 512, 1024)])
def test_cluster_gemm_against_torch(m, n, k):
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    cluster_gemm(a.view(1, 1, m, k), b.view(1, 1, k, n), c.view(1, 1, m, n))
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    torch.testing.assert_close(c, ref, atol=1e-2, rtol=1e-3)


@pytest.mark.parametrize("m, n, k", [(256, 512, 512), (1000, 1096, 2048)])
@pytest.mark.parametrize("kernel", ["staged", "persistent", "column", "grid", "row", "sliced"])
def test_staging_multicast_gemm_against_torch(m, n, k, kernel):
    """tk-pipeline-staging's multicast of A over (2, 1, 1) clusters (and
    persistent ones: a cluster's CTAs on paired items), on the GPU:
    the CTA-scope remote releases and waits (lowering/cluster.py) keep the
    ring right; a cluster's CTA past N clips its stores. column: (1, 4, 1)
    clusters sharing B along y; grid: (2, 2, 1), A along x and B along y;
    row: (2, 2, 1), A along x only (a slot passed within a cluster's row);
    sliced: (2, 2, 1), A and B through slices at the block's rows and
    columns (each shared along the axis its slice does not follow)."""
    torch.manual_seed(1)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    for _ in range(3):   # again and again: a stale slot would show as a wrong sum
        gemm = {"staged": staged_cluster_gemm, "persistent": persistent_cluster_gemm,
                "column": column_cluster_gemm, "grid": grid_cluster_gemm, "row": row_cluster_gemm,
                "sliced": sliced_grid_gemm}[kernel]
        gemm(a.view(1, 1, m, k), b.view(1, 1, k, n), c.view(1, 1, m, n))
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a.float() @ b.float(), atol=2e-2, rtol=2e-3)
