"""The interpreter's shared-memory race detector (tkc/interpreter/races.py).

The interpreter runs warps one after another, so a kernel missing a barrier
would still compute the right numbers on the CPU. Each racy kernel here is
a correct one with one synchronisation taken out: it must fail with an error
located at the racing access that names the other access's line, while the
correct kernel still runs and gives the right numbers.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, rv, st, sv, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import group_load, group_store, load, mma_AB, store, zero

from helpers import ref_bf16


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def race(kernel, args, at: str, names: str, match: str) -> TkcError:
    """Running `kernel` is a race reported at the line containing `at`,
    naming the line containing `names`."""
    with pytest.raises(TkcError, match="shared-memory race: " + match) as info:
        kernel.interpret(*args)
    e = info.value
    assert e.where.startswith(f"{__file__}:{line_of(kernel.fn, at)}:"), str(e)
    assert f"{__file__}:{line_of(kernel.fn, names)}:" in e.message, str(e)
    assert "without a tk.sync or barrier wait in between" in e.message
    return e


# ---- a warp-level GEMM with either of its two tk.syncs taken out

def small_gemm(sync_after_load: bool = True, sync_after_mma: bool = True):
    """2 warps, each 16 rows of C = A @ B; K walked 16 at a time through shared."""
    @tkc.kernel(warps=2)
    def gemm(a: gl(bf16, 1, 1, 32, 64), b: gl(bf16, 1, 1, 64, 16), c: gl(f32, 1, 1, 32, 16)):
        w = tkc.warpid()
        a_s = st(bf16, 32, 16)
        b_s = st(bf16, 16, 16)
        acc = zero(rt(f32, 16, 16))
        for k in tkc.range(4):
            group_load(a_s, a, (0, 0, 0, k))
            group_load(b_s, b, (0, 0, k, 0))
            if sync_after_load:
                tkc.sync()
            a_r = load(rt(bf16, 16, 16), a_s, (w, 0))
            b_r = load(rt(bf16, 16, 16, "col"), b_s, (0, 0))
            mma_AB(acc, a_r, b_r, acc)
            if sync_after_mma:
                tkc.sync()
        store(c, acc, (0, 0, w, 0))
    return gemm


def gemm_args(seed=0):
    rng = np.random.default_rng(seed)
    a = ref_bf16(rng.standard_normal((32, 64)))
    b = ref_bf16(rng.standard_normal((64, 16)))
    return a, b, np.zeros((32, 16), np.float32)


def test_synchronised_gemm_runs_and_matches_numpy():
    a, b, c = gemm_args()
    small_gemm().interpret(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_missing_sync_after_group_load_is_a_race():
    # Warp 0 reads a_s before warp 1 did its part of the cooperative copy.
    race(small_gemm(sync_after_load=False), gemm_args(), at="a_r = load(",
         names="group_load(a_s", match="warp 0 reads st<bf16, 32, 16, 32b> .* written by warp 1")


def test_missing_sync_before_the_next_k_step_is_a_race():
    # Warp 0 runs on into the next step's group_load, overwriting a_s while
    # warp 1 still reads the previous step's tile.
    race(small_gemm(sync_after_mma=False), gemm_args(), at="a_r = load(",
         names="group_load(a_s", match=r"warp 1 reads rows 16\.\.31, cols 0\.\.15 of st<bf16, 32, "
                                       r"16, 32b> \(allocated at .*\) written by warp 0")


# ---- write after read, and per-region precision

def overwrite(sync: bool):
    @tkc.kernel(warps=2)
    def k(x: gl(f32, 1, 1, 16, 16), o: gl(f32, 1, 1, 16, 16)):
        w = tkc.warpid()
        s = st(f32, 16, 16)
        group_load(s, x, (0, 0, 0, 0))
        tkc.sync()
        with tkc.if_(w == 0):
            store(o, load(rt(f32, 16, 16), s, (0, 0)), (0, 0, 0, 0))
        if sync:
            tkc.sync()
        with tkc.if_(w == 1):
            store(s, zero(rt(f32, 16, 16)), (0, 0))
    return k


def test_overwriting_what_another_warp_read_needs_a_sync():
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    o = np.zeros_like(x)
    overwrite(sync=True).interpret(x, o)
    np.testing.assert_array_equal(o, x)
    race(overwrite(sync=False), (x, o), at="store(s, zero(", names="store(o, load(",
         match=r"warp 1 overwrites st<f32, 16, 16, [0-9a-z]+> .* read by warp 0")


def own_rows(neighbour: bool):
    """Each warp stores its 16 rows of s, then reads back its own (or its
    neighbour's) rows, with no tk.sync."""
    @tkc.kernel(warps=4)
    def k(x: gl(f32, 1, 1, 64, 16), o: gl(f32, 1, 1, 64, 16)):
        w = tkc.warpid()
        s = st(f32, 64, 16)
        store(s, load(rt(f32, 16, 16), x, (0, 0, w, 0)) * 2.0, (w, 0))
        r = (w + 1) % 4 if neighbour else w
        store(o, load(rt(f32, 16, 16), s, (r, 0)), (0, 0, w, 0))
    return k


def test_disjoint_rows_need_no_sync_but_a_neighbours_rows_do():
    x = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    o = np.zeros_like(x)
    own_rows(neighbour=False).interpret(x, o)
    np.testing.assert_array_equal(o, 2 * x)
    # Warp 0 reads rows 16..31 before warp 1 writes them: caught at the write.
    race(own_rows(neighbour=True), (x, o), at="store(s, load(", names="store(o, load(",
         match=r"warp 1 overwrites rows 16\.\.31, cols 0\.\.15 of st<f32, 64, 16, [0-9a-z]+> .* "
               r"read by warp 0")


def test_group_store_of_rows_other_warps_stored_needs_a_sync():
    def k_of(sync: bool):
        @tkc.kernel(warps=2)
        def k(x: gl(f32, 1, 1, 32, 16), o: gl(f32, 1, 1, 32, 16)):
            w = tkc.warpid()
            s = st(f32, 32, 16)
            store(s, load(rt(f32, 16, 16), x, (0, 0, w, 0)), (w, 0))
            if sync:
                tkc.sync()
            group_store(o, s, (0, 0, 0, 0))
        return k
    x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    o = np.zeros_like(x)
    k_of(True).interpret(x, o)
    np.testing.assert_array_equal(o, x)
    # Warp 0's part of the copy read rows 16..31 before warp 1 stored them.
    race(k_of(False), (x, o), at="store(s, load(", names="group_store(o, s",
         match=r"warp 1 overwrites rows 16\.\.31, cols 0\.\.15 of st<f32, 32, 16, [0-9a-z]+> .* "
               r"read by warp 0")


def test_shared_vector_written_by_one_warp_read_by_another():
    def k_of(sync: bool):
        @tkc.kernel(warps=2)
        def k(x: gl(f32, 1, 1, 1, 32), o: gl(f32, 1, 1, 1, 32)):
            w = tkc.warpid()
            v = sv(f32, 32)
            with tkc.if_(w == 0):
                store(v, load(rv(f32, 32), x, (0, 0, 0, 0)))
            if sync:
                tkc.sync()
            with tkc.if_(w == 1):
                store(o, load(rv(f32, 32), v), (0, 0, 0, 0))
        return k
    x = np.arange(32, dtype=np.float32).reshape(1, 32)
    o = np.zeros_like(x)
    k_of(True).interpret(x, o)
    np.testing.assert_array_equal(o, x)
    race(k_of(False), (x, o), at="store(o, load(", names="store(v, load(",
         match="warp 1 reads sv<f32, 32> .* written by warp 0")


def test_group_of_four_copy_read_by_one_warp_before_the_others_arrive():
    # Only warp 0 reads, so no later read can catch it: warp 1's arrival does.
    @tkc.kernel(warps=4)
    def k(x: gl(f32, 1, 1, 64, 16), o: gl(f32, 1, 1, 64, 16)):
        w = tkc.warpid()
        s = st(f32, 64, 16)
        group_load(s, x, (0, 0, 0, 0))
        with tkc.if_(w == 0):
            store(o, load(rt(f32, 64, 16), s, (0, 0)), (0, 0, 0, 0))
    x = np.ones((64, 16), np.float32)
    race(k, (x, np.zeros_like(x)), at="store(o, load(", names="group_load(s",
         match="warp 0 reads st<f32, 64, 16, [0-9a-z]+> .* written by warp 1")


# ---- mbarriers: an arrival releases what the warp did before it

def handoff(wait: bool, store_first: bool = True):
    """Warp 0 stores s and arrives on `full`; warp 1 waits and reads s."""
    @tkc.kernel(warps=2)
    def k(x: gl(f32, 1, 1, 16, 16), o: gl(f32, 1, 1, 16, 16)):
        w = tkc.warpid()
        s = st(f32, 16, 16)
        full = tkc.barrier(count=1)
        with tkc.if_(w == 0):
            t = load(rt(f32, 16, 16), x, (0, 0, 0, 0))
            if store_first:
                store(s, t, (0, 0))  # then arrive
            tkc.arrive(full)
            if not store_first:
                store(s, t, (0, 0))  # after the arrival
        with tkc.else_():
            if wait:
                tkc.wait(full, 0)
            store(o, load(rt(f32, 16, 16), s, (0, 0)), (0, 0, 0, 0))
    return k


def test_barrier_wait_orders_a_store_before_the_arrival():
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    o = np.zeros_like(x)
    handoff(wait=True).interpret(x, o)
    np.testing.assert_array_equal(o, x)


def test_reading_without_the_barrier_wait_is_a_race():
    x = np.ones((16, 16), np.float32)
    race(handoff(wait=False), (x, np.zeros_like(x)), at="store(o, load(", names="then arrive",
         match="warp 1 reads st<f32, 16, 16, [0-9a-z]+> .* written by warp 0")


def test_a_store_after_the_arrival_is_not_released_by_it():
    x = np.ones((16, 16), np.float32)
    race(handoff(wait=True, store_first=False), (x, np.zeros_like(x)), at="store(o, load(",
         names="after the arrival", match="warp 1 reads .* written by warp 0")


# ---- TMA: the data is seen by the warps that waited on its barrier phase

def hopper_gemm(waiters: str = "all"):
    """The library's Hopper GEMM shape (TMA + wgmma), 64 x 64 with K = 128.
    waiters: "all" wait on the barrier; "warp0": warp 0 waits, then a tk.sync
    passes it on; "none": nobody waits; "warp0_only": warp 0 waits, no sync."""
    @tkc.kernel(warps=4)
    def k(a: gl(bf16, 1, 1, 64, 128), b: gl(bf16, 1, 1, 128, 64), c: gl(f32, 1, 1, 64, 64)):
        w = tkc.warpid()
        a_s = st(bf16, 64, 64)
        b_s = st(bf16, 64, 64)
        bar = tkc.barrier(count=1)
        acc = zero(rt(f32, 16, 64))
        for kk in tkc.range(2):
            with tkc.if_(w == 0):
                tma.expect(bar, a_s, b_s)
                tma.load_async(a_s, a, (0, 0, 0, kk), bar)
                tma.load_async(b_s, b, (0, 0, kk, 0), bar)
                if waiters in ("warp0", "warp0_only"):
                    tkc.wait(bar, kk % 2)
            if waiters == "all":
                tkc.wait(bar, kk % 2)
            if waiters == "warp0":
                tkc.sync()
            warpgroup.mma_AB(acc, a_s, b_s)
            warpgroup.mma_async_wait(acc)
            tkc.sync()
        warpgroup.store(c, acc, (0, 0, 0, 0))
    return k


def hopper_args():
    rng = np.random.default_rng(3)
    a = ref_bf16(rng.standard_normal((64, 128)))
    b = ref_bf16(rng.standard_normal((128, 64)))
    return a, b, np.zeros((64, 64), np.float32)


@pytest.mark.parametrize("waiters", ["all", "warp0"])
def test_tma_data_waited_for_directly_or_through_a_sync(waiters):
    a, b, c = hopper_args()
    hopper_gemm(waiters).interpret(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_tma_data_read_without_waiting_on_the_barrier_is_a_race():
    race(hopper_gemm("none"), hopper_args(), at="warpgroup.mma_AB(", names="tma.load_async(a_s",
         match="warp 0 reads st<bf16, 64, 64, 128b> .* written by the TMA load issued by warp 0")


def test_tma_data_waited_for_by_another_warp_only_is_a_race():
    race(hopper_gemm("warp0_only"), hopper_args(), at="warpgroup.mma_AB(",
         names="tma.load_async(a_s", match="warp 1 reads .* written by the TMA load issued by warp 0")


def tma_ring(bug: str = ""):
    """A 1-stage ring: warp 1 produces with TMA, warp 0 consumes; `empty`
    hands the stage back. bug: "early_arrive" (the consumer arrives on
    empty before reading), "no_empty_wait" (the producer never waits)."""
    @tkc.kernel(warps=2)
    def k(x: gl(f32, 1, 1, 16, 64), o: gl(f32, 1, 1, 16, 64)):
        w = tkc.warpid()
        s = st(f32, 16, 16)
        full = tkc.barrier(count=1)
        empty = tkc.barrier(count=1)
        for i in tkc.range(4):
            with tkc.if_(w == 1):
                if bug != "no_empty_wait":
                    tkc.wait(empty, (i + 1) % 2)
                tma.expect(full, s)
                tma.load_async(s, x, (0, 0, 0, i), full)
            with tkc.else_():
                tkc.wait(full, i % 2)
                if bug == "early_arrive":
                    tkc.arrive(empty)
                store(o, load(rt(f32, 16, 16), s, (0, 0)), (0, 0, 0, i))
                if bug != "early_arrive":
                    tkc.arrive(empty)
    return k


def test_tma_ring_handing_stages_back_through_empty_runs():
    x = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    o = np.zeros_like(x)
    tma_ring().interpret(x, o)
    np.testing.assert_array_equal(o, x)


def test_tma_overwrite_of_a_stage_handed_back_before_it_was_read():
    x = np.ones((16, 64), np.float32)
    race(tma_ring("early_arrive"), (x, np.zeros_like(x)), at="tma.load_async(s",
         names="store(o, load(",
         match="the TMA load issued by warp 1 overwrites st<f32, 16, 16, [0-9a-z]+> .* read by warp 0")


def test_tma_loads_into_one_stage_with_no_wait_between_race():
    x = np.ones((16, 64), np.float32)
    race(tma_ring("no_empty_wait"), (x, np.zeros_like(x)), at="tma.load_async(s",
         names="tma.load_async(s", match="the TMA load issued by warp 1 overwrites st<f32, 16, "
                                          "16, 64b> .* written by the TMA load issued by warp 1")


# ---- switching it off

def test_races_false_runs_the_racy_kernel_as_before():
    from tkc.compiler import TILE_PIPELINE
    from tkc.interpreter import run
    from tkc.pass_pipeline import run_pipeline
    k = small_gemm(sync_after_load=False)
    module = k.trace()
    run_pipeline(module, TILE_PIPELINE)
    a, b, c = gemm_args()
    run(module, [a, b, c], races=False)  # warp 0 reads the whole copy at once here
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)



def test_a_tile_over_the_ring_written_while_a_warp_still_reads_the_ring(monkeypatch):
    """Split-K's partial tiles lie over the ring (st(after_loop=True)); the
    detector counts a write to one as a write to every ring slot. Without the
    consumers' meeting that tk-pipeline-staging puts after the drain, the
    first warp to write its partial overwrites the last slot another warp
    (a 16-row tile's: each warp reads A's rows into registers, then its wgmma)
    still reads; with it the product runs and is right."""
    from tkc.kernels import gemm_hopper
    from tkc.passes.pipeline_staging.consumer import Consumer
    rng = np.random.default_rng(3)
    a, b = ref_bf16(rng.standard_normal((9, 200))), ref_bf16(rng.standard_normal((200, 72)))
    c = np.full((9, 72), np.nan, np.float32)
    gemm_hopper("f32", BN=64, persistent=False, split=2, BM=16).interpret(a, b, c)
    assert np.allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
    monkeypatch.setattr(Consumer, "_after_ring_meeting", lambda self: None)
    racy = gemm_hopper("f32", BN=32, persistent=False, split=2, BM=16)   # a kernel not yet prepared
    with pytest.raises(TkcError, match=r"shared-memory race: warp \d reads slot \d of a \d-slot ring .* "
                                       r"written by warp 0 .* \(into a tile over the ring"):
        racy.interpret(a, b, np.full((9, 72), np.nan, np.float32))
