"""mbarriers in the interpreter: phases, transaction bytes, waiting warps,
deadlocks located at the author's line; and the frontend's barrier checks."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, st, tma
from tkc.diagnostics import TkcError
from tkc.interpreter.hopper import BarrierState
from tkc.ops import load, store, zero


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


# ---- the barrier state machine (pure Python)

class FakeOp:
    name = "tk.test"
    location = 'loc("k.py":1:1)'


OP = FakeOp()


def test_phase_completes_on_arrivals_and_bytes_in_either_order():
    b = BarrierState()
    b.init(2)
    assert b.passed(1) and not b.passed(0)  # right after init, "parity 1" counts as done
    b.deliver(OP, 512)                      # TMA bytes may land before they are expected
    b.arrive(OP, 1)
    assert b.phase == 0
    b.expect(OP, 512)                       # the second arrival; bytes balance: complete
    assert (b.phase, b.pending, b.tx) == (1, 2, 0)
    assert b.passed(0) and not b.passed(1)


def test_too_many_arrivals_and_uninitialised_use_are_errors():
    b = BarrierState()
    with pytest.raises(TkcError, match="before tk.init_barrier"):
        b.arrive(OP, 1)
    b.init(2)
    with pytest.raises(TkcError, match=r"3 arrival\(s\) on a barrier whose phase 0 expects only 2 more"):
        b.arrive(OP, 3)


# ---- kernels: a producer warp and consumer warps across loop iterations

@tkc.kernel(warps=3)
def ping_pong(x: gl(f32, 1, 1, 16, 16), o: gl(f32, 1, 1, 16, 64)):
    """Warp 0 produces 4 rounds into s (full: 0 -> 1); warps 1, 2 consume and
    hand the buffer back (empty: 1 -> 0). Phases alternate with the round."""
    w = tkc.warpid()
    s = st(f32, 16, 16)
    full = tkc.barrier(count=1)
    empty = tkc.barrier(count=2)
    for i in tkc.range(4):
        with tkc.if_(w == 0):
            tkc.wait(empty, (i + 1) % 2)        # round 0 passes at once (parity 1 after init)
            t = load(rt(f32, 16, 16), x, (0, 0, 0, 0))
            store(s, t, (0, 0))
            tkc.arrive(full)
        with tkc.else_():
            tkc.wait(full, i % 2)
            t = load(rt(f32, 16, 16), s, (0, 0))
            store(o, t, (0, 0, 0, i))
            tkc.arrive(empty)


def test_producer_consumer_rounds_match_numpy():
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    o = np.full((16, 64), np.nan, np.float32)
    ping_pong.interpret(x, o)
    np.testing.assert_array_equal(o, np.tile(x, (1, 4)))


@tkc.kernel(warps=2)
def never_arrives(x: gl(f32, 1, 1, 16, 16)):
    bar = tkc.barrier(count=2)
    with tkc.if_(tkc.warpid() == 0):
        tkc.arrive(bar)
    tkc.wait(bar, 0)


def test_wait_that_cannot_complete_is_a_located_deadlock():
    with pytest.raises(TkcError) as info:
        never_arrives.interpret(np.zeros((16, 16), np.float32))
    assert "deadlock: warp 0 waits for the phase of parity 0 (phase 0: 1 of 2 arrivals" in info.value.message
    assert "warp 1 waits at tk.wait" in info.value.message
    assert info.value.where.startswith(f"{__file__}:{line_of(never_arrives.fn, 'tkc.wait(bar, 0)')}:")


@tkc.kernel(warps=2)
def wait_then_sync(x: gl(f32, 1, 1, 16, 16)):
    bar = tkc.barrier(count=1)
    with tkc.if_(tkc.warpid() == 0):
        tkc.wait(bar, 0)          # warp 1 would arrive, but only after the sync
    tkc.sync()
    with tkc.if_(tkc.warpid() == 1):
        tkc.arrive(bar)


def test_wait_blocked_behind_a_sync_is_a_deadlock():
    with pytest.raises(TkcError, match=r"deadlock: warp 0 waits .* warp 1 waits at tk.sync"):
        wait_then_sync.interpret(np.zeros((16, 16), np.float32))


def test_expected_bytes_that_never_arrive_deadlock():
    @tkc.kernel(warps=1)
    def no_load(x: gl(f32, 1, 1, 16, 16)):
        bar = tkc.barrier()
        tma.expect_bytes(bar, 1024)
        tkc.wait(bar, 0)
    with pytest.raises(TkcError, match=r"phase 0: 1 of 1 arrivals, 1024 bytes still expected"):
        no_load.interpret(np.zeros((16, 16), np.float32))


def test_a_tma_load_without_expect_names_the_missing_expect():
    @tkc.kernel(warps=1)
    def no_expect(a: gl(bf16, 1, 1, 64, 64), x: gl(f32, 1, 1, 16, 16)):
        s = st(bf16, 64, 64)
        bar = tkc.barrier()
        tma.load_async(s, a, (0, 0, 0, 0), bar)
        tkc.wait(bar, 0)
    with pytest.raises(TkcError, match=r"0 of 1 arrivals; TMA delivered 8192 bytes more than any "
                                       r"expect announced: .*needs tma.expect"):
        no_expect.interpret(np.zeros((64, 64), np.float32), np.zeros((16, 16), np.float32))


# ---- frontend checks, located at the author's line

def test_barrier_inside_a_loop_is_an_error():
    @tkc.kernel
    def k(x: gl(f32, 1, 1, 16, 16)):
        for i in tkc.range(2):
            tkc.barrier()
    with pytest.raises(TkcError, match="tkc.barrier must be at the top level") as info:
        k.trace()
    assert info.value.where.startswith(f"{__file__}:{line_of(k.fn, 'tkc.barrier()')}:")


@pytest.mark.parametrize("call, message", [
    (lambda b, s: tkc.arrive(b, count=0), "arrive count must be a positive int, got 0"),
    (lambda b, s: tkc.wait(s, 0), "wait: expected a barrier from tkc.barrier"),
    (lambda b, s: tkc.wait(b, 1.5), "wait phase must be an int or an index value"),
    (lambda b, s: tma.expect_bytes(b, 0), "bytes must be an int in 1..1048575, got 0"),
    (lambda b, s: tma.expect(b, zero(rt(f32, 16, 16))), "expect: every tile must be a shared tile"),
])
def test_bad_barrier_calls(call, message):
    @tkc.kernel
    def k(x: gl(f32, 1, 1, 16, 16)):
        call(tkc.barrier(), st(f32, 16, 16))
    with pytest.raises(TkcError, match=message):
        k.trace()


def test_barrier_ops_trace_to_tile_ir():
    @tkc.kernel(warps=2)
    def k(x: gl(f32, 1, 1, 16, 16)):
        bar = tkc.barrier(count=2)
        tkc.arrive(bar, count=2)
        tkc.wait(bar, tkc.warpid())
        tkc.fence_async()
    text = str(k.trace())
    assert '"tk.alloc"() : () -> !tk.barrier' in text
    assert '"tk.init_barrier"(%0) {count = 2 : i64}' in text
    assert '"tk.arrive"(%0) {count = 2 : i64}' in text
    assert '"tk.wait"(%0, %1) : (!tk.barrier, index) -> ()' in text
    assert '"tk.fence_async"() : () -> ()' in text
