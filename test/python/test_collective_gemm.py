"""The fused collective GEMMs (tkc/kernels/collective_gemm.py) in the
interpreter at 2, 4 and 8 simulated ranks against numpy, with the race
check on peer memory: all_gather_gemm (two calls, so the epoch flags and
the parity buffers are exercised; the copy engines' pushes of the op done
in numpy) and gemm_reduce_scatter (two calls; the copy engines that push
the partials as the kernel counts them run beside the ranks' blocks, as
the interpreter's engines)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tkc.diagnostics import TkcError
from tkc.kernels.collective_gemm import BN, FLAGS, SOURCES, all_gather_gemm, gemm_reduce_scatter

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


def rs_engines(world, epoch, chunk, N, skip=()):
    """engines(pgls) for run_ranks: the op's pushes (collective.push_partials)
    as each rank's copy engine does them: per owner in item order and chunk,
    wait for the chunk's count (its tiles), take the count back, copy the
    chunk into the owner's slot for this rank, raise the owner's flag;
    (rank, owner, chunk) in skip never comes."""
    rows, tiles = chunk * 128, chunk * -(-N // BN)

    def engines(pgls):
        part, slots, counts, flags = (pgls[n] for n in ("part", "slots", "counts", "flags"))
        out = []
        for r in range(world):
            actions = []
            for q in range(world - 1):
                o = (r + q + 1) % world
                s = (epoch % 2) * (world - 1) + (r - o - 1) % world
                for c in range(Ms // rows):
                    if (r, o, c) in skip:
                        continue
                    got = slice(c * rows, (c + 1) * rows)
                    actions += [("wait", counts[r], (0, 0, q, c), tiles), ("write", counts[r], (0, 0, q, c), 0),
                                ("copy", slots[o], (0, s, got), (part[r], (0, q, got))),
                                ("write", flags[o], (0, 0, (r - o - 1) % world, c), epoch)]
            out.append(actions)
        return out
    return engines


def rs_buffers(world):
    """Each rank's part, slots, counts and flags (kept across calls, as the op's)."""
    return [[np.zeros((1, world - 1, Ms, N), np.float32), np.zeros((1, 2 * (world - 1), Ms, N), np.float32),
             np.zeros((1, 1, SOURCES, FLAGS), np.int32), np.zeros((1, 1, SOURCES, FLAGS), np.int32)]
            for _ in range(world)]


@pytest.mark.parametrize("world", [2, 4, 8])
def test_gemm_reduce_scatter(world):
    rng = np.random.default_rng(20 + world)
    a = [bf(rng.standard_normal((world * Ms, K))) for _ in range(world)]
    b = [bf(rng.standard_normal((K, N))) for _ in range(world)]
    bufs = rs_buffers(world)
    for epoch, chunk in ((1, 1), (2, 2)):   # a count and flag a row tile, then one for two
        outs = [np.full((Ms, N), np.nan, np.float32) for _ in range(world)]
        gemm_reduce_scatter.interpret_ranks([[a[r], b[r], *bufs[r], outs[r], epoch, chunk] for r in range(world)],
                                            sms=3, engines=rs_engines(world, epoch, chunk, N))
        full = sum(bf(a[r] @ b[r]) for r in range(world))
        for r in range(world):   # bf16 partials: the sum's scale sets the tolerance
            np.testing.assert_allclose(outs[r], full[r * Ms:(r + 1) * Ms], rtol=1e-2,
                                       atol=world * 2 ** -8 * np.abs(full).max())
        a = [x[::-1].copy() for x in a]   # the next call: other values


def test_gemm_reduce_scatter_waits_for_every_partial():
    """A partial whose push never comes: the owner's tiles of that chunk wait
    (a deadlock the interpreter reports), never adding a partial early."""
    world = 2
    a = [np.ones((world * Ms, K), np.float32)] * world
    b = [np.ones((K, N), np.float32)] * world
    args = [[a[r], b[r], *bufs, np.zeros((Ms, N), np.float32), 1, 1] for r, bufs in enumerate(rs_buffers(world))]
    with pytest.raises(TkcError, match="deadlock across ranks.*flags"):
        gemm_reduce_scatter.interpret_ranks(args, sms=3, engines=rs_engines(world, 1, 1, N, skip={(1, 0, 1)}))


def test_a_push_before_its_count_is_a_race():
    """A copy engine that pushes a chunk without waiting for its count reads
    the partial while the kernel may still write it: the race check says so."""
    world = 2
    a = [np.ones((world * Ms, K), np.float32)] * world
    b = [np.ones((K, N), np.float32)] * world
    waiting = rs_engines(world, 1, 1, N)

    def hasty(pgls):
        return [[x for x in actions if x[0] != "wait"] for actions in waiting(pgls)]
    args = [[a[r], b[r], *bufs, np.zeros((Ms, N), np.float32), 1, 1] for r, bufs in enumerate(rs_buffers(world))]
    with pytest.raises(TkcError, match="race"):
        gemm_reduce_scatter.interpret_ranks(args, sms=3, engines=hasty)
