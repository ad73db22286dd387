"""The fused collective GEMMs (tkc/kernels/collective_gemm.py) in the
interpreter at 2, 4 and 8 simulated ranks against numpy, with the race
check on peer memory: all_gather_gemm (two calls, so the epoch flags and
the parity buffers are exercised; the copy engines' pushes of the op done
in numpy) and gemm_reduce_scatter + rs_barrier."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tkc.diagnostics import TkcError
from tkc.kernels.collective_gemm import FLAGS, all_gather_gemm, gemm_reduce_scatter, rs_barrier

Ms, K, N = 256, 128, 512    # shards of two 128-row tiles, two 256-column tiles


def bf(x):
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def pushed(ags, flags, shards, epoch, chunk, skip=()):
    """The op's copies (its own shard, and collective.push's): every rank's
    shard into every rank's gather buffer, half epoch % 2, and each chunk's
    flag := epoch at the peers; (rank, to, chunk) in skip is a push that
    never happens."""
    world = len(ags)
    for r, shard in enumerate(shards):
        for p in range(world):
            ags[p][epoch % 2, r * Ms:(r + 1) * Ms] = shard
            for i in range(Ms // 128 // chunk):
                if p != r and (r, p, i) not in skip:
                    flags[p][0, r * (Ms // 128) // chunk + i] = epoch


@pytest.mark.parametrize("world", [2, 4, 8])
def test_all_gather_gemm(world):
    rng = np.random.default_rng(world)
    ags = [np.zeros((2, world * Ms, K), np.float32) for _ in range(world)]
    flags = [np.zeros((1, FLAGS), np.int32) for _ in range(world)]
    for epoch, chunk in ((1, 1), (2, 2)):   # a flag a row tile, then a flag for two
        shards = [bf(rng.standard_normal((Ms, K))) for _ in range(world)]
        bs = [bf(rng.standard_normal((K, N))) for _ in range(world)]
        cs = [np.zeros((world * Ms, N), np.float32) for _ in range(world)]
        pushed(ags, flags, shards, epoch, chunk)
        all_gather_gemm.interpret_ranks([[ags[r], bs[r], cs[r], flags[r], epoch, chunk] for r in range(world)],
                                        sms=3)
        a = np.concatenate(shards)
        for r in range(world):
            np.testing.assert_allclose(cs[r], bf(a @ bs[r]), rtol=1e-2, atol=1e-2)


def test_all_gather_gemm_waits_for_every_chunk():
    """A peer's chunk whose flag never comes: its rows' items wait (a deadlock
    the interpreter reports), so no item reads a chunk before its push."""
    world, epoch = 2, 1
    ags = [np.zeros((2, world * Ms, K), np.float32) for _ in range(world)]
    flags = [np.zeros((1, FLAGS), np.int32) for _ in range(world)]
    shards = [np.ones((Ms, K), np.float32)] * world
    pushed(ags, flags, shards, epoch, 1, skip={(1, 0, 1)})   # rank 1's second row tile, to rank 0
    args = [[ags[r], np.ones((K, N), np.float32), np.zeros((world * Ms, N), np.float32), flags[r], epoch, 1]
            for r in range(world)]
    with pytest.raises(TkcError, match="deadlock across ranks"):
        all_gather_gemm.interpret_ranks(args, sms=3)


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
        gemm_reduce_scatter(9)
    with pytest.raises(ValueError, match="2 to 8 ranks"):
        gemm_reduce_scatter(1)
