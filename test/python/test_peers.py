"""Several GPUs in the interpreter: pgl, peer stores, flags, barrier_all at
2, 4 and 8 simulated ranks against numpy; races on peer memory, deadlocks
across ranks and misuse as located errors (docs/multi-gpu.md)."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, i32, pgl, rt, st, tma
from tkc.ops import load, store

from helpers import marker_line, refused_at
from peers_kernels import T, ring

HERE = __file__


def _ring_args(world):
    rng = np.random.default_rng(world)
    ys = [rng.integers(-8, 8, (T, T)).astype(np.float32) for _ in range(world)]
    return [[np.zeros((world * T, T), np.float32), np.zeros((1, 16), np.int32), ys[r],
             np.zeros((T, T), np.float32)] for r in range(world)], ys


@pytest.mark.parametrize("world", [2, 4, 8])
def test_ring_exchanges_tiles(world):
    args, ys = _ring_args(world)
    ring.interpret_ranks(args)
    for r in range(world):
        np.testing.assert_array_equal(args[r][0], np.concatenate(ys))        # every rank gathered all
        np.testing.assert_array_equal(args[r][3], ys[(r + 1) % world])
        want = np.zeros(16, np.int32)
        want[:world] = 1                                                       # one signal per source
        np.testing.assert_array_equal(args[r][1][0], want)                    # barrier_all took its arrivals back


def test_one_rank_is_a_plain_launch():
    args, ys = _ring_args(1)
    ring.interpret(*args[0])
    np.testing.assert_array_equal(args[0][3], ys[0])


@tkc.kernel(warps=1, grid=lambda x, flags, out: (1,))
def early_read(x: pgl(f32, 1, 1, None, T), flags: pgl(i32, 1, 1, 1, 16), out: gl(f32, 1, 1, T, T)):
    """Rank r writes x[r] of its right neighbour with a register store and
    signals; the neighbour reads it without waiting: a race."""
    me, n = tkc.rank(), tkc.world_size()
    nb = (me + 1) % n
    store(x.peer(nb), load(rt(f32, 16, T), out, (0, 0, 0, 0)), (0, 0, me, 0))
    tkc.signal(flags.peer(nb), at=(0, 0, 0, 0))
    v = load(rt(f32, 16, T), x, (0, 0, (me + n - 1) % n, 0))  # @early
    store(out, v, (0, 0, 1, 0))


def test_race_on_peer_memory_is_located():
    args = [[np.zeros((2 * 16, T), np.float32), np.zeros((1, 16), np.int32), np.ones((T, T), np.float32)]
            for _ in range(2)]
    with pytest.raises(tkc.diagnostics.TkcError) as info:
        early_read.interpret_ranks(args)
    e, line = info.value, f"{HERE}:{marker_line(HERE, 'early')}:"
    # rank 0 reads before rank 1 writes (the interpreter's order): the write,
    # the second access, is reported, naming the unordered read
    assert "race on peer memory" in e.message and "no signal/wait_signal" in e.message, e.message
    assert e.where.startswith(line) or f"read by rank 0 block (0, 0, 0) at {line}" in e.message, e.message


@tkc.kernel(warps=1, grid=lambda x, flags, out: (1,))
def waited_read(x: pgl(f32, 1, 1, None, T), flags: pgl(i32, 1, 1, 1, 16), out: gl(f32, 1, 1, T, T)):
    """early_read with the wait: ordered, so no race."""
    me, n = tkc.rank(), tkc.world_size()
    nb, prev = (me + 1) % n, (me + n - 1) % n
    store(x.peer(nb), load(rt(f32, 16, T), out, (0, 0, 0, 0)), (0, 0, me, 0))
    tkc.signal(flags.peer(nb), at=(0, 0, 0, 0))
    tkc.wait_signal(flags, at=(0, 0, 0, 0), value=1)
    store(out, load(rt(f32, 16, T), x, (0, 0, prev, 0)), (0, 0, 1, 0))


@pytest.mark.parametrize("world", [2, 4, 8])
def test_signal_then_wait_orders_peer_writes(world):
    args = [[np.zeros((world * 16, T), np.float32), np.zeros((1, 16), np.int32),
             np.full((T, T), r + 1, np.float32)] for r in range(world)]
    waited_read.interpret_ranks(args)
    for r in range(world):
        np.testing.assert_array_equal(args[r][2][16:32], np.full((16, T), (r + world - 1) % world + 1))


@tkc.kernel(warps=1, grid=lambda flags: (1,))
def lonely(flags: pgl(i32, 1, 1, 1, 16)):
    tkc.wait_signal(flags, at=(0, 0, 0, tkc.rank()), value=1)  # @lonely


def test_deadlock_across_ranks_is_located():
    args = [[np.zeros((1, 16), np.int32)] for _ in range(4)]
    refused_at(lambda: lonely.interpret_ranks(args), HERE, "lonely", "deadlock across ranks",
               "which no rank signals", "rank 3")


@tkc.kernel(warps=1, grid=lambda x, flags, y: (1,))
def unwaited(x: pgl(bf16, 1, 1, None, T), flags: pgl(i32, 1, 1, 1, 16), y: gl(bf16, 1, 1, T, T)):
    s = st(bf16, T, T)
    bar = tkc.barrier()
    tma.expect(bar, s)
    tma.load_async(s, y, (0, 0, 0, 0), bar)
    tkc.wait(bar, 0)
    tma.store_async(x.peer((tkc.rank() + 1) % tkc.world_size()), s, (0, 0, tkc.rank(), 0))
    tma.store_async_wait()   # reads done, writes maybe not
    tkc.signal(flags.peer(0), at=(0, 0, 0, 0))  # @unwaited


def test_signal_before_the_tma_writes_completed_is_refused():
    args = [[np.zeros((2 * T, T), np.float32), np.zeros((1, 16), np.int32), np.ones((T, T), np.float32)]
            for _ in range(2)]
    refused_at(lambda: unwaited.interpret_ranks(args), HERE, "unwaited", "store_async_wait(writes=True)")


def test_misuse_is_refused_where_written():
    def peer_of_gl():
        @tkc.kernel(warps=1)
        def k(x: gl(f32, 1, 1, 16, 16), f: pgl(i32, 1, 1, 1, 16)):
            x.peer(0)  # @peer_of_gl
        k.trace()
    refused_at(peer_of_gl, HERE, "peer_of_gl", "not a pgl argument")

    def rank_alone():
        @tkc.kernel(warps=1)
        def k(x: gl(f32, 1, 1, 16, 16)):
            tkc.rank()  # @rank_alone
        k.trace()
    refused_at(rank_alone, HERE, "rank_alone", "no pgl argument")

    def float_flags():
        @tkc.kernel(warps=1)
        def k(x: pgl(f32, 1, 1, 16, 16)):
            tkc.signal(x.peer(0), at=(0, 0, 0, 0))  # @float_flags
        k.trace()
    refused_at(float_flags, HERE, "float_flags", "flags must be an i32 gl")

    def no_at():
        @tkc.kernel(warps=1)
        def k(f: pgl(i32, 1, 1, 1, 16)):
            tkc.wait_signal(f, value=2)  # @no_at
        k.trace()
    refused_at(no_at, HERE, "no_at", "give the flag's element as at=")

    def barrier_in_loop():
        @tkc.kernel(warps=1)
        def k(f: pgl(i32, 1, 1, 1, 16)):
            for i in tkc.range(2):
                tkc.barrier_all(f, at=(0, 0, 0, 0))  # @barrier_in_loop
        k.trace()
    refused_at(barrier_in_loop, HERE, "barrier_in_loop", "top level")


def test_pgl_shapes_must_agree():
    args, _ = _ring_args(2)
    args[1][0] = np.zeros((3 * T, T), np.float32)
    with pytest.raises(tkc.diagnostics.TkcError, match="symmetric buffer has one shape"):
        ring.interpret_ranks(args)
