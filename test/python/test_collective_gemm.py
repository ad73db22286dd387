"""The fused collective GEMMs (tkc/kernels/collective_gemm.py) in the
interpreter at 2, 4 and 8 simulated ranks against numpy, with the race
check on peer memory: all_gather_gemm (two calls, so the epoch flags and
the parity buffers are exercised; the op's copy-engine pushes run beside
the ranks' blocks as the interpreter's engines) and gemm_reduce_scatter +
rs_barrier."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tkc.diagnostics import TkcError
from tkc.kernels.collective_gemm import FLAGS, all_gather_gemm, gemm_reduce_scatter, rs_barrier

Ms, K, N = 256, 128, 512    # shards of two 128-row tiles, two 256-column tiles


def bf(x):
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def own_shards(ags, shards, epoch):
    """The op's copy of each rank's own shard into its gather buffer (half
    epoch % 2), on its stream before the kernel."""
    for r, shard in enumerate(shards):
        ags[r][epoch % 2, r * Ms:(r + 1) * Ms] = shard


def pushes(shards, epoch, chunk, skip=(), flag_first=False):
    """engines(pgls) for interpret_ranks: collective.push as each rank's copy
    engine does it beside the kernels, every peer (rank - 1 first) and
    chunk: the chunk into the peer's gather buffer, then its flag := epoch;
    (rank, to, chunk) in skip never comes; flag_first: each flag raised
    before its chunk is copied (a wrong order, which the race check sees)."""
    world, rows = len(shards), chunk * 128

    def engines(pgls):
        ag, flags = pgls["ag"], pgls["flags"]
        out = []
        for r, shard in enumerate(shards):
            actions = []
            for d in range(1, world):
                p = (r - d) % world
                for i, r0 in enumerate(range(0, Ms, rows)):
                    if (r, p, i) in skip:
                        continue
                    at = slice(r * Ms + r0, r * Ms + r0 + rows)
                    copy = ("copy", ag[p], (0, epoch % 2, at), (shard, slice(r0, r0 + rows)))
                    flag = ("write", flags[p], (0, 0, 0, r * (Ms // 128) // chunk + i), epoch)
                    actions += [flag, copy] if flag_first else [copy, flag]
            out.append(actions)
        return out
    return engines


def ag_args(world, ags, flags, bs, epoch, chunk, keep=0):
    """Each rank's arguments: c and a_out (NaN: what no store reaches shows) fresh."""
    return [[ags[r], bs[r], np.zeros((world * Ms, N), np.float32), np.full((world * Ms, K), np.nan, np.float32),
             flags[r], np.full((1, 1, 1, 1), epoch, np.int32), chunk, keep] for r in range(world)]


@pytest.mark.parametrize("world", [2, 4, 8])
def test_all_gather_gemm(world):
    rng = np.random.default_rng(world)
    ags = [np.zeros((2, world * Ms, K), np.float32) for _ in range(world)]
    flags = [np.zeros((1, FLAGS), np.int32) for _ in range(world)]
    for epoch, chunk, keep in ((1, 1, 1), (2, 2, 0)):   # a flag a row tile, then a flag for two
        shards = [bf(rng.standard_normal((Ms, K))) for _ in range(world)]
        bs = [bf(rng.standard_normal((K, N))) for _ in range(world)]
        own_shards(ags, shards, epoch)
        args = ag_args(world, ags, flags, bs, epoch, chunk, keep)
        all_gather_gemm.interpret_ranks(args, sms=3, engines=pushes(shards, epoch, chunk))
        a = np.concatenate(shards)
        for r in range(world):
            np.testing.assert_allclose(args[r][2], bf(a @ bs[r]), rtol=1e-2, atol=1e-2)
            if keep:   # the gathered A, stored as the items of column 0 loaded it
                np.testing.assert_array_equal(args[r][3], a)
            else:      # every store of it clipped
                assert np.isnan(args[r][3]).all()


def ones_call(world=2, epoch=1):
    """(shards, arguments) of an all-ones call, a flag a row tile, the own shards copied in."""
    ags = [np.zeros((2, world * Ms, K), np.float32) for _ in range(world)]
    flags = [np.zeros((1, FLAGS), np.int32) for _ in range(world)]
    shards = [np.ones((Ms, K), np.float32)] * world
    own_shards(ags, shards, epoch)
    return shards, ag_args(world, ags, flags, [np.ones((K, N), np.float32)] * world, epoch, 1)


def test_all_gather_gemm_waits_for_every_chunk():
    """A peer's chunk whose flag never comes: its rows' items wait (a deadlock
    the interpreter reports), so no item reads a chunk before its push."""
    shards, args = ones_call()
    with pytest.raises(TkcError, match="deadlock across ranks"):   # rank 1's second row tile, to rank 0
        all_gather_gemm.interpret_ranks(args, sms=3, engines=pushes(shards, 1, 1, skip={(1, 0, 1)}))


def test_a_flag_before_its_chunk_is_a_race():
    """Pushes that raise a chunk's flag before copying it: a kernel may read
    the rows while the copy engine writes them, which the race check reports."""
    shards, args = ones_call()
    with pytest.raises(TkcError, match="race on peer memory"):
        all_gather_gemm.interpret_ranks(args, sms=3, engines=pushes(shards, 1, 1, flag_first=True))


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
