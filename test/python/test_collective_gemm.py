"""The fused collective GEMMs (tkc/kernels/collective_gemm.py) in the
interpreter at 2, 4 and 8 simulated ranks against numpy, with the race
check on peer memory: all_gather_gemm (two calls, so the epoch flags and
the parity buffers are exercised) and gemm_reduce_scatter + rs_barrier."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tkc.kernels.collective_gemm import FLAGS, all_gather_gemm, gemm_reduce_scatter, rs_barrier

Ms, K, N = 128, 128, 512    # 128-row shards, two 256-column tiles


def bf(x):
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_all_gather_gemm(world):
    rng = np.random.default_rng(world)
    kernel = all_gather_gemm(world)
    ags = [np.zeros((2, world * Ms, K), np.float32) for _ in range(world)]
    flags = [np.zeros((1, FLAGS), np.int32) for _ in range(world)]
    for epoch in (1, 2):
        shards = [bf(rng.standard_normal((Ms, K))) for _ in range(world)]
        bs = [bf(rng.standard_normal((K, N))) for _ in range(world)]
        cs = [np.zeros((world * Ms, N), np.float32) for _ in range(world)]
        for r in range(world):   # the op's host side: my shard into my own gather buffer
            ags[r][epoch % 2, r * Ms:(r + 1) * Ms] = shards[r]
        kernel.interpret_ranks([[ags[r], bs[r], cs[r], flags[r], epoch] for r in range(world)], sms=3)
        a = np.concatenate(shards)
        for r in range(world):
            np.testing.assert_array_equal(ags[r][epoch % 2], a)          # gathered
            np.testing.assert_allclose(cs[r], bf(a @ bs[r]), rtol=1e-2, atol=1e-2)
            want = np.full(world, epoch)
            want[r] = 0                                                # a peer's row tiles: a signal a call
            np.testing.assert_array_equal(flags[r][0, :world], want)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_gemm_reduce_scatter(world):
    rng = np.random.default_rng(20 + world)
    a = [bf(rng.standard_normal((world * Ms, K))) for _ in range(world)]
    b = [bf(rng.standard_normal((K, N))) for _ in range(world)]
    rs = [np.zeros((2, Ms, N), np.float32) for _ in range(world)]
    gemm_reduce_scatter(world).interpret_ranks([[a[r], b[r], rs[r], 1] for r in range(world)], sms=3)
    flags = [[np.zeros((1, 16), np.int32)] for _ in range(world)]
    rs_barrier.interpret_ranks(flags)
    full = sum(bf(a[r] @ b[r]) for r in range(world))
    for r in range(world):   # bf16 adds: the sum's scale sets the tolerance
        np.testing.assert_allclose(rs[r][1], full[r * Ms:(r + 1) * Ms], rtol=1e-2,
                                   atol=world * 2 ** -8 * np.abs(full).max())
        assert not rs[r][0].any()
        assert not flags[r][0].any()     # the barrier took its arrivals back


def test_worlds_outside_two_to_eight_are_refused():
    with pytest.raises(ValueError, match="2 to 8 ranks"):
        all_gather_gemm(9)
    with pytest.raises(ValueError, match="2 to 8 ranks"):
        gemm_reduce_scatter(1)
