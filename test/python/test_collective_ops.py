"""tkc.all_gather_matmul and tkc.matmul_reduce_scatter without a GPU: the
argument checks, the fused-or-fallback choice, the refusal to allocate
symmetric memory with NVLink multicast on (the GPU tests run them under
torchrun: test/gpu/test_multi_gpu.py)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tkc  # noqa: E402
from tkc.torchops import collective, symm  # noqa: E402


def test_bad_operands_are_refused_where_called():
    a, b = torch.zeros(128, 64, dtype=torch.bfloat16), torch.zeros(32, 64, dtype=torch.bfloat16)
    with pytest.raises(tkc.diagnostics.TkcError, match="b must be \\[K, N\\] with a_shard's K = 64") as e:
        tkc.all_gather_matmul(a, b, None)
    assert e.value.where.startswith(__file__)
    with pytest.raises(tkc.diagnostics.TkcError, match="K = 60 and N = 64 must be multiples of 8"):
        tkc.matmul_reduce_scatter(torch.zeros(128, 60, dtype=torch.bfloat16),
                                  torch.zeros(60, 64, dtype=torch.bfloat16), None)
    with pytest.raises(tkc.diagnostics.TkcError, match="must be one of|bfloat16|dtype"):
        tkc.matmul_reduce_scatter(torch.zeros(128, 64), torch.zeros(64, 64), None)


def test_fused_or_fallback():
    assert collective.fused(16384, 8192, 8192, 2, 8192)
    assert not collective.fused(16384, 8192, 8192, 1, 16384)      # one rank: nothing to overlap
    assert not collective.fused(16384 - 128, 8192, 8192, 2, 8128)  # a shard of partial tiles
    assert not collective.fused(256, 256, 256, 2, 128)             # too small to win
    assert not collective.fused(16384, 8192, 8192, 16, 1024)       # past the 8 peer slots


def test_symmetric_memory_needs_multicast_off(monkeypatch):
    for k in symm.NO_MULTICAST:
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(tkc.diagnostics.TkcError, match="NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1"):
        symm.check_no_multicast()
    symm.no_multicast()
    symm.check_no_multicast()
    import os
    assert os.environ["NVSHMEM_DISABLE_NVLS"] == "1"
