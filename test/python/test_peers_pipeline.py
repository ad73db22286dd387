"""Pipelined loops that wait on flags (docs/multi-gpu.md): tk-pipeline-staging
makes the producer warp run the wait_signal the loads depend on; the
interpreter runs the staged IR at 2, 4 and 8 ranks against numpy, with its
race check on peer memory."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, i32, pgl, rt, st, tma
from tkc.ops import load, store

from helpers import refused_at

HERE = __file__
T = 64


@tkc.kernel(warps=4, grid=lambda x, flags, y, out: (1,))
def pull_chunks(x: pgl(bf16, 1, 1, None, T), flags: pgl(i32, 1, 1, 1, 64), y: gl(bf16, 1, 1, None, T),
                out: gl(bf16, 1, 1, None, T)):
    """Rank r pushes its chunks y[k] (T rows each) into row block
    (r * chunks + k) of every rank's x, signalling flag (r * chunks + k) of
    each after its writes; then a pipelined loop copies the neighbour's
    chunks from its own x to out, waiting on each chunk's flag first (the
    producer waits, the consumers only read the ring)."""
    me, n = tkc.rank(), tkc.world_size()
    chunks = y.r // T
    src = (me + 1) % n
    s = st(bf16, T, T)
    bar = tkc.barrier()
    with tkc.if_(tkc.warpid() == 0):
        for k in tkc.range(chunks):
            tma.expect(bar, s)
            tma.load_async(s, y, (0, 0, k, 0), bar)
            tkc.wait(bar, k % 2)
            for p in tkc.range(n):
                tma.store_async(x.peer(p), s, (0, 0, me * chunks + k, 0))
            tma.store_async_wait(writes=True)
            for p in tkc.range(n):
                tkc.signal(flags.peer(p), at=(0, 0, 0, me * chunks + k))
    t = st(bf16, T, T)
    for k in tkc.range(chunks, stages=2):
        tkc.wait_signal(flags, at=(0, 0, 0, src * chunks + k), value=1)
        tma.load(t, x, (0, 0, src * chunks + k, 0))
        tma.store(out, t, (0, 0, k, 0))


@pytest.mark.parametrize("world", [2, 4, 8])
def test_pipelined_loop_waits_for_each_chunk(world):
    chunks = 3 if world < 8 else 2
    rng = np.random.default_rng(world)
    ys = [rng.integers(-8, 8, (chunks * T, T)).astype(np.float32) for _ in range(world)]
    args = [[np.zeros((world * chunks * T, T), np.float32), np.zeros((1, 64), np.int32), ys[r],
             np.zeros((chunks * T, T), np.float32)] for r in range(world)]
    pull_chunks.interpret_ranks(args)   # the race check runs on the staged IR
    for r in range(world):
        np.testing.assert_array_equal(args[r][0], np.concatenate(ys))
        np.testing.assert_array_equal(args[r][3], ys[(r + 1) % world])


@tkc.kernel(warps=4, grid=lambda x, flags, y, out: (y.r // T,), persistent=True)
def per_item(x: pgl(bf16, 1, 1, None, T), flags: pgl(i32, 1, 1, 1, 64), y: gl(bf16, 1, 1, None, T),
             out: gl(f32, 1, 1, None, T)):
    """Persistent: work item k pushes y's chunk k into every rank's x (each
    warp its 16 rows, by registers, then a signal of its own), then waits
    (at the item's top level, before the pipelined loop) for the left
    neighbour's chunk k and sums its 16-row pieces into out's rows k."""
    me, n = tkc.rank(), tkc.world_size()
    k, chunks = tkc.block_idx.x, y.r // T
    src = (me + n - 1) % n
    band = load(rt(bf16, 16, T), y, (0, 0, k * 4 + tkc.warpid(), 0))
    for p in tkc.range(n):
        store(x.peer(p), band, (0, 0, (me * chunks + k) * 4 + tkc.warpid(), 0))
    for p in tkc.range(n):
        tkc.signal(flags.peer(p), at=(0, 0, 0, me * chunks + k))
    tkc.wait_signal(flags, at=(0, 0, 0, src * chunks + k), value=4)
    t = st(bf16, 16, T)
    acc = tkc.ops.zero(rt(f32, 16, T))
    for j in tkc.range(T // 16, stages=2):
        tma.load(t, x, (0, 0, (src * chunks + k) * 4 + j, 0))
        acc = acc + load(rt(f32, 16, T), t, (0, 0))
        tkc.sync()
    store(out, acc, (0, 0, k * 4 + tkc.warpid(), 0))


@pytest.mark.parametrize("world", [2, 4, 8])
def test_persistent_items_wait_before_their_loads(world):
    chunks = 3
    rng = np.random.default_rng(10 + world)
    ys = [rng.integers(-8, 8, (chunks * T, T)).astype(np.float32) for _ in range(world)]
    args = [[np.zeros((world * chunks * T, T), np.float32), np.zeros((1, 64), np.int32), ys[r],
             np.zeros((chunks * T, T), np.float32)] for r in range(world)]
    per_item.interpret_ranks(args, sms=2)
    for r in range(world):
        y = ys[(r + world - 1) % world].reshape(chunks, 4, 16, T).sum(axis=1)   # chunk k: its 4 pieces summed
        for w in range(4):
            np.testing.assert_array_equal(args[r][3].reshape(chunks, 4, 16, T)[:, w], y)


@tkc.kernel(warps=4, grid=lambda x, flags, out: (1,))
def wait_in_if(x: pgl(bf16, 1, 1, T, T), flags: pgl(i32, 1, 1, 1, 16), out: gl(bf16, 1, 1, T, T)):
    s = st(bf16, T, T)
    with tkc.if_(tkc.rank() == 0):
        tkc.wait_signal(flags, at=(0, 0, 0, 0), value=1)  # @wait_in_if
    tma.load(s, x, (0, 0, 0, 0))
    tma.store(out, s, (0, 0, 0, 0))


def test_a_wait_the_producer_cannot_run_is_refused():
    args = [[np.zeros((T, T), np.float32), np.ones((1, 16), np.int32), np.zeros((T, T), np.float32)]
            for _ in range(2)]
    refused_at(lambda: wait_in_if.interpret_ranks(args), HERE, "wait_in_if",
               "the producer warp that issues it must wait first")
