"""Pipelined loops that wait on flags (docs/multi-gpu.md): tk-pipeline-staging
makes the producer warp run the wait_signal the loads depend on; the
interpreter runs the staged IR at 2, 4 and 8 ranks against numpy, with its
race check on peer memory. Its kernels pull_chunks and per_item are
test/lit/passes/pipeline-flags.py's, beside the FileCheck lines of their IR."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tkc
from tkc import bf16, gl, i32, pgl, st, tma
from tkc.frontend.kernel import kernels_in_file

from helpers import refused_at

HERE = __file__
T = 64
_LIT = {k.name: k for k in kernels_in_file(Path(__file__).resolve().parents[1] / "lit" / "passes"
                                           / "pipeline-flags.py")}
pull_chunks, per_item = _LIT["pull_chunks"], _LIT["per_item"]


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


@tkc.kernel(warps=4, grid=lambda a, part, counts: (a.r // T,), persistent=True)
def banded_then_count(a: gl(bf16, 1, 1, None, T), part: pgl(bf16, 1, 1, None, T),
                      counts: pgl(i32, 1, 1, 1, 64)):
    """Item k: a pipelined sum (twice a's row tile k), stored into part by
    bands (each warp its 16 rows), then warp 0 counts the tile: its release
    must cover every band (the pass: every warp waits for its stores' writes
    and the consumers meet before the if)."""
    k, w = tkc.block_idx.x, tkc.warpid()
    s = st(bf16, T, T)
    acc = tkc.ops.zero(tkc.rt(tkc.f32, 16, T))
    for j in tkc.range(2, stages=2):
        tma.load(s, a, (0, 0, k, 0))
        acc = acc + tkc.ops.load(tkc.rt(tkc.f32, 16, T), s, (w, 0))
    o = st(bf16, T, T)
    tkc.ops.store(o, acc, (w, 0))
    tma.store(part, o, (0, 0, k, 0))
    with tkc.if_(w == 0):
        tkc.signal(counts, at=(0, 0, 0, k), value=1)


def test_a_count_after_banded_stores_covers_every_band():
    """Each rank's copy engine copies a tile out once its count is up (the
    interpreter's engines): no race with any warp's band, and the copies hold
    the sums. (Before the pass made every warp wait and meet, warp 0's
    release covered its own band only: the race check reported the engine's
    read of another warp's rows.)"""
    world, tiles = 2, 3
    rng = np.random.default_rng(5)
    a = [rng.integers(-8, 8, (tiles * T, T)).astype(np.float32) for _ in range(world)]
    got = [np.zeros((tiles * T, T), np.float32) for _ in range(world)]

    def engines(pgls):
        return [[x for k in range(tiles) for x in (
            ("wait", pgls["counts"][r], (0, 0, 0, k), 1),
            ("copy", got[r], (slice(k * T, (k + 1) * T),), (pgls["part"][r], (0, 0, slice(k * T, (k + 1) * T)))))]
            for r in range(world)]
    args = [[a[r], np.zeros((tiles * T, T), np.float32), np.zeros((1, 64), np.int32)] for r in range(world)]
    banded_then_count.interpret_ranks(args, sms=2, engines=engines)
    for r in range(world):
        np.testing.assert_array_equal(got[r], 2 * a[r])
