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
