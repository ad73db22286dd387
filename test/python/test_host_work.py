"""The host work of repeated eager calls, forward and backward, bounded on the
CPU through the fake driver (tkc.bench.fake_driver): per call the launches,
the torch ops the op runs itself (allocations, copies, reductions: torch's
profiler lists them under the op's autograd nodes) and the Python frames of
tkc.torchops. Counts, not timings: a change that adds work to the path (a
torch-side negation or reduction, an extra allocation, a check that runs again
on every call) fails here. Counting tkc.torchops' frames alone leaves out the
runtime's, whose per-pointer caches (parameter frames, tensor maps) miss or
hit as the CPU allocator hands pointers back."""
from __future__ import annotations

import collections
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")

import tkc  # noqa: E402
from tkc.bench.fake_driver import fake_driver  # noqa: E402

BF = torch.bfloat16


def _work(call, warm: int = 3):
    """(launches, {op: count}, tkc.torchops frames) of one call after `warm`
    calls; ops: torch ops run directly under the op's autograd nodes."""
    with fake_driver() as cuda:
        for _ in range(warm):
            call()
        frames = []

        def count(frame, event, arg):
            if event == "call" and "tkc/torchops/" in frame.f_code.co_filename.replace("\\", "/"):
                frames.append(frame.f_code.co_name)
        launches = cuda.state.launches
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            sys.setprofile(count)
            try:
                call()
            finally:
                sys.setprofile(None)
        launches = cuda.state.launches - launches
    ops = collections.Counter(
        e.name.removeprefix("aten::") for e in prof.events()
        if e.cpu_parent is not None and e.cpu_parent.name.startswith("Eager_tkc_"))
    return launches, ops, len(frames)


def _within(ops: collections.Counter, bound: dict) -> bool:
    return all(n <= bound.get(name, 0) for name, n in ops.items())


def test_rotary_forward_and_backward():
    """One launch each way, one allocation each (the output); the backward is
    the inverse kernel, not a negation of sin."""
    x = torch.randn(1, 64, 2, 64).to(BF).requires_grad_()
    ang = torch.rand(64, 32)
    cos, sin = ang.cos().to(BF), ang.sin().to(BF)
    g = torch.randn(1, 64, 2, 64).to(BF)
    launches, ops, frames = _work(lambda: tkc.rotary_embedding(x, cos, sin).backward(g))
    assert launches == 2
    assert ops == {"empty_like": 2}, ops
    assert frames <= 20, frames


def test_layer_norm_forward_and_backward():
    """Without weight gradients: y, mean and rstd forward, dx backward (the
    unwanted dw/db partial sums go to scratch memory, nothing reduces them);
    with them, one partial-sum buffer, its reduction (a launch of norm_grads,
    no torch sum or cast) and its output more."""
    x = torch.randn(64, 256).to(BF).requires_grad_()
    w, b = torch.ones(256, dtype=BF), torch.zeros(256, dtype=BF)
    g = torch.randn(64, 256).to(BF)
    launches, ops, frames = _work(lambda: tkc.layer_norm(x, w, b).backward(g))
    assert launches == 2
    assert _within(ops, {"empty_like": 2, "empty": 2}), ops
    assert frames <= 26, frames
    w.requires_grad_(), b.requires_grad_()
    launches, ops, frames = _work(lambda: tkc.layer_norm(x, w, b).backward(g))
    assert launches == 3, launches
    assert _within(ops, {"empty_like": 2, "empty": 4, "unbind": 1}), ops


def test_attention_forward_and_backward():
    """Forward: o and lse. Backward: prep and backward kernels; the
    statistics and dq's f32 accumulator in one allocation, dk and dv, and
    dq's conversion to bf16 (the one torch op)."""
    q = torch.randn(1, 2, 128, 64).to(BF).requires_grad_()
    k, v = (torch.randn(1, 2, 128, 64).to(BF).requires_grad_() for _ in range(2))
    g = torch.randn(1, 2, 128, 64).to(BF)
    launches, ops, frames = _work(lambda: tkc.attention(q, k, v).backward(g))
    assert launches == 3
    assert _within(ops, {"empty_strided": 3, "empty": 2, "as_strided": 1, "to": 1}), ops
    assert frames <= 28, frames


def test_decode_steps_fixed_and_over_a_growing_cache():
    """A decode step: one launch (the split kernel, which merges its splits),
    no torch op but the splits' buffer (an empty under no autograd node: not
    counted). Over a cache one key longer each step (a new signature every
    call), the step goes to its family's launches: the checks a new key
    needs (_fits, strided_takes), no plan, no prepared launch made."""
    from tkc.runtime.launch import Launcher
    q = torch.randn(1, 8, 1, 64).to(BF)
    cache = torch.randn(1, 2, 2048, 64).to(BF)
    k = cache[:, :, :900]
    with torch.no_grad():
        launches, ops, frames = _work(lambda: tkc.attention(q, k, k))
        assert (launches, ops) == (1, {}) and frames <= 14, frames
        lengths = iter(range(1000, 2048))
        steps = []

        def step():
            n = next(lengths)
            steps.append(n)
            tkc.attention(q, cache[:, :, :n], cache[:, :, :n])
        prepare, made = Launcher.prepare, []
        Launcher.prepare = lambda self, *a, **kw: (made.append(steps[-1]), prepare(self, *a, **kw))[1]
        try:
            launches, ops, frames = _work(step)
        finally:
            Launcher.prepare = prepare
    assert (launches, ops) == (1, {}) and frames <= 20, frames
    assert made == [steps[0]] * 3, made   # its first step prepared the split, the merge, the merging split


def test_a_growing_cache_keeps_nothing_per_step():
    """A decode loop over a cache one key longer each step leaves (about)
    nothing behind per step: what it kept (a frame and two tensor maps, an
    eager run and its key) outlived Python's young collections and paced the
    full ones (~33 tracked objects a step: ~110 µs a step of collection,
    amortised, on the fake driver); now the caches it touches stay a few."""
    import gc
    q = torch.randn(1, 8, 1, 64).to(BF)
    cache = torch.randn(1, 2, 2048, 64).to(BF)
    with fake_driver(), torch.no_grad():
        for n in range(1000, 1100):
            tkc.attention(q, cache[:, :, :n], cache[:, :, :n])
        gc.collect()
        before = len(gc.get_objects())
        for n in range(1100, 1700):
            tkc.attention(q, cache[:, :, :n], cache[:, :, :n])
        gc.collect()
        kept = (len(gc.get_objects()) - before) / 600
    assert kept < 8, kept


def test_matmul_and_linear_inference_calls():
    """A repeated no-grad call runs the plain path (its key, its cached plan,
    the launch): one launch and one torch op, the output's allocation. A
    tkc.linear costs what tkc.matmul does but a frame (its plan's result
    picked from (y, preact)), and of x [B, T, K] allocates y [B, T, N]
    itself; until 12-01 it viewed its result (as [..., N], even when 2-D) and
    allocated through one more lambda. tkc.swiglu likewise."""
    x, w = torch.randn(64, 256).to(BF), torch.randn(128, 256).to(BF)
    x3 = x.view(4, 16, 256)
    with torch.no_grad():
        counts = {name: _work(call) for name, call in
                  (("linear", lambda: tkc.linear(x, w)), ("matmul", lambda: tkc.matmul(x, w.t())))}
        for call in (lambda: tkc.linear(x, w), lambda: tkc.linear(x3, w), lambda: tkc.swiglu(x3, w, w)):
            with fake_driver():
                call()
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                    call()
            top = collections.Counter(e.name for e in prof.events() if e.cpu_parent is None)
            assert top == {"aten::empty": 1}, top
    (launches, _, frames), (m_launches, _, m_frames) = counts["linear"], counts["matmul"]
    assert launches == m_launches == 1 and frames <= m_frames + 1, (frames, m_frames)


def test_the_host_benchmark_measures_every_row_and_its_floor_launches_nothing():
    """`python -m tkc.bench.host --fake` (what the host table's CPU column
    runs): every row measured through the fake driver; the floor rows' peer,
    a Python autograd.Function, allocates and saves like the op (its inputs'
    gradients, in their shapes) and launches no kernel."""
    from tkc.bench import host
    result = host.measure(calls=2, rounds=1, fake=True)
    assert result["mode"].startswith("fake driver")
    for name, row in result["rows"].items():
        assert row["tkc_us"] > 0 and row["peer_us"] > 0, name
    for op in ("attention", "layer_norm"):
        assert result["rows"][f"tkc.{op} fwd+bwd (floor)"]["peer"] == "a Python Function's floor"
    x = torch.randn(64, 1024, dtype=BF, requires_grad=True)
    w = torch.ones(1024, dtype=BF)
    name, call = host.floor(2, x, w)
    with fake_driver() as cuda:
        call()
        assert cuda.state.launches == 0
    assert x.grad.shape == x.shape and w.grad is None


def test_the_eager_benchmark_runs_its_backwards_on_the_calling_thread_when_asked(monkeypatch):
    """`python -m tkc.bench.eager --calling-thread`: every row measured with
    autograd's multithreading off (the backward on the calling thread), and
    on again after; without the flag, on."""
    from tkc.bench import eager
    seen = []
    monkeypatch.setattr(eager, "measure", lambda only, rounds: seen.append(torch.autograd.is_multithreading_enabled())
                        or [])
    eager.main(["--calling-thread"])
    eager.main([])
    assert seen == [False, True] and torch.autograd.is_multithreading_enabled()
