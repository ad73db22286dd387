"""tkc.autotune on the CPU: the space, pruning, checking against the default,
which candidate wins (a fake timer), the tables (this machine's, the
package's, the offline fallback) and `tkc build` of an autotuned file."""
from __future__ import annotations

import functools
import json
import linecache
import textwrap

import numpy as np
import pytest

import tkc
from tkc import f32, gl, rt
from tkc.diagnostics import TkcError
from tkc.ops import load, store
from tkc.tune import bucket, default_key, measure, tables

pytest.importorskip("mlir")


def scale_builder(R: int, factor: float = 2.0):
    """y = factor * x, R rows a block (factor != 2 is a wrong candidate)."""
    @tkc.kernel(warps=1, grid=lambda x, y: (tkc.cdiv(x.r, R),), name=f"tune_scale_{R}_{factor:g}")
    def scale(x: gl(f32, 1, 1, "N", 64), y: gl(f32, 1, 1, "N", 64)):
        t = load(rt(f32, R, 64), x, (0, 0, tkc.block_idx.x, 0))
        store(y, t * factor, (0, 0, tkc.block_idx.x, 0))
    return scale


@pytest.fixture
def cache(tmp_path_factory, monkeypatch):
    """One artifact cache for the module's builds (each candidate compiles once)."""
    path = tmp_path_factory.getbasetemp() / "tune-cache"
    monkeypatch.setenv("TKC_CACHE_DIR", str(path))
    monkeypatch.setenv("TKC_DEVICE_NAME", "Test GPU")
    monkeypatch.delenv("TKC_OFFLINE", raising=False)
    monkeypatch.setattr(tables, "PACKAGE_DIR", path / "package-tables")
    return path


def cpu_run(kernel, args):
    """A candidate's outputs on copies of the (numpy) arguments, by the interpreter."""
    copies = [a.copy() for a in args]
    kernel.interpret(*copies)
    return copies


def cpu_compare(ref, out):
    for i, (r, o) in enumerate(zip(ref, out)):
        if not np.allclose(r, o, rtol=1e-6, atol=1e-6):
            return f"argument {i} differs"
    return None


def fake_timer(us: dict):
    """timer(kernel, args): µs by kernel name, so the test decides who wins."""
    return lambda kernel, args: us[kernel.name]


def args_of(n=64):
    x = np.arange(n * 64, dtype=np.float32).reshape(n, 64) / 7
    return [x, np.zeros_like(x)]


def test_space_keys_and_refusals():
    t = tkc.autotune(space={"R": [16, 32], "factor": [2.0]})(scale_builder)
    assert [c["R"] for c in t.configs] == [16, 32] and t.default == {"R": 16, "factor": 2.0}
    assert tkc.autotune(space=[{"R": 32}, {"R": 16}])(scale_builder).default == {"R": 32}
    assert bucket(0) == 0 and bucket(48) == 64 and bucket(64) == 64 and bucket(65) == 128
    assert default_key(np.zeros((48, 64), np.float32), 3) == (("float32", (64, 64)), 3)
    # kept per (dtype, shape) for the next call: the same key again, another shape its own
    assert default_key(np.ones((48, 64), np.float32), 3) == (("float32", (64, 64)), 3)
    assert default_key(np.zeros((48, 64), np.float16)) == (("float16", (64, 64)),)
    odd = type("Odd", (), {"shape": [48, 3], "dtype": "f32"})()   # an unhashable shape: made, not kept
    assert default_key(odd) == (("f32", (64, 4)),)
    with pytest.raises(TkcError, match="takes no parameter 'C'") as e:
        tkc.autotune(space={"C": [1]})(scale_builder)
    assert e.value.where.startswith(__file__)   # the decorator's line
    with pytest.raises(TkcError, match="twice"):
        tkc.autotune(space=[{"R": 16}, {"R": 16}])(scale_builder)
    with pytest.raises(TkcError, match="non-empty list"):
        tkc.autotune(space={"R": []})(scale_builder)
    with pytest.raises(TkcError, match="plain"):
        tkc.autotune(space={"R": [object()]})(scale_builder)
    with pytest.raises(TkcError, match="must return a tkc.Kernel"):
        tkc.autotune(space={"R": [16]})(lambda R: None).kernel({"R": 16})
    # a configuration's Kernel: one per configuration, whether asked by the same dict or an equal one
    k = t.kernel(t.configs[1])
    assert t.kernel(t.configs[1]) is k and t.kernel({"factor": 2.0, "R": 32}) is k
    assert t.kernel(t.default) is not k
    mine = {"R": 16, "factor": 2.0}   # a dict changed after use names its new configuration
    assert t.kernel(mine) is t.kernel(t.default)
    mine["R"] = 32
    assert t.kernel(mine) is k


def test_a_key_tunes_only_the_candidates_that_fit_it(cache):
    """fits(config, key): a candidate that cannot serve a key (a tile sized
    to another shape) is left out of that key's tuning, neither built nor
    timed there, however fast it would be; candidates() without a key keeps
    it (what `tkc build` of the file builds)."""
    t = tkc.autotune(space={"R": [16, 32, 64]}, name="test.fits", key=lambda x, y: x.shape[0],
                     fits=lambda c, key: c["R"] < key)(scale_builder)
    us = {"tune_scale_16_2": 5.0, "tune_scale_32_2": 3.0, "tune_scale_64_2": 1.0}
    assert [c["R"] for c in t.candidates()] == [16, 32, 64]
    assert [c["R"] for c in t.candidates(64)] == [16, 32]
    result = t.tune(*args_of(64), timer=fake_timer(us), run=cpu_run, compare=cpu_compare, rounds=1)
    assert result.best == {"R": 32}
    assert sorted(r["config"]["R"] for r in result.rows) == [16, 32]
    assert t.tune(*args_of(128), timer=fake_timer(us), run=cpu_run, compare=cpu_compare,
                  rounds=1).best == {"R": 64}


def test_the_fastest_checked_candidate_wins_and_is_recorded(cache):
    t = tkc.autotune(space={"R": [16, 32, 64], "factor": [2.0, 3.0]}, name="test.scale",
                     prune=lambda c: c["R"] == 64 and c["factor"] == 3.0)(scale_builder)
    args = args_of()
    us = {"tune_scale_16_2": 5.0, "tune_scale_32_2": 3.0, "tune_scale_64_2": 4.0,
          "tune_scale_16_3": 1.0, "tune_scale_32_3": 1.0}
    assert t._picked(args) is t.kernel(t.default)   # before tuning, a call runs the default
    result = t.tune(*args, timer=fake_timer(us), run=cpu_run, compare=cpu_compare, rounds=2)
    assert result.best == {"R": 32, "factor": 2.0}
    assert t._picked(args) is t.kernel(result.best)   # after it, the Kernel a call keeps is the pick's
    status = {(r["config"]["R"], r["config"]["factor"]): r["status"] for r in result.rows}
    assert status == {(16, 2.0): "ok", (32, 2.0): "best", (64, 2.0): "ok",
                      (16, 3.0): "rejected", (32, 3.0): "rejected"}  # (64, 3.0) pruned by the author
    assert "32" in result.table().splitlines()[1]
    # the pick is data: a new process (a new Autotuned, its memo empty) reads it
    saved = json.loads(tables.user_path().read_text())
    assert saved["device"] == "Test GPU" and saved["entries"]["test.scale"]
    again = tkc.autotune(space={"R": [16, 32, 64], "factor": [2.0, 3.0]}, name="test.scale")(scale_builder)
    assert again.pick(args) == {"R": 32, "factor": 2.0}
    assert again.pick(args_of(320)) == again.default          # another key: the default
    monkeypatch_device = tables.user_path("Other GPU")
    assert not monkeypatch_device.exists()                      # per GPU name


def test_after_the_first_round_only_the_shortlist_and_the_default_are_timed(cache):
    """measure.SHORTLIST: a candidate slower than 1.5x the first round's
    fastest is timed no more (its row says why, with its one time); the
    default always runs on, as the pick's baseline; a candidate timed in one
    round only never becomes the pick, even where the shortlist's fail.
    (After the 3 rounds the shortlist here, the default and R = 32, are the
    finalists: 6 rounds more.)"""
    t = tkc.autotune(space={"R": [16, 32, 64]}, name="test.scale.shortlist")(scale_builder)
    calls = {}

    def timer_of(times):
        def timer(kernel, args):
            calls[kernel.name] = calls.get(kernel.name, 0) + 1
            return times[kernel.name][calls[kernel.name] - 1]
        return timer
    times = {"tune_scale_16_2": [2.0] * 9, "tune_scale_32_2": [1.0] * 9, "tune_scale_64_2": [1.6] * 9}
    result = t.tune(*args_of(), timer=timer_of(times), run=cpu_run, compare=cpu_compare, rounds=3, record=False)
    assert calls == {"tune_scale_16_2": 9, "tune_scale_32_2": 9, "tune_scale_64_2": 1}
    assert result.best == {"R": 32}
    row = {r["config"]["R"]: r for r in result.rows}[64]
    assert row["us"] == 1.6 and "off the shortlist: 1.60x" in row["why"] and row["status"] == "ok"
    # the shortlisted candidate turns slow after the first round: the default stays
    calls.clear()
    times["tune_scale_32_2"] = [1.0] + [2.5] * 8
    result = t.tune(*args_of(), timer=timer_of(times), run=cpu_run, compare=cpu_compare, rounds=3, record=False)
    assert calls["tune_scale_64_2"] == 1 and result.best == {"R": 16}


def test_each_candidates_spread_over_the_rounds_is_reported(cache):
    """A row's spread is (max - min) / median of its rounds' times: the noise a
    difference must exceed; the table shows it and the tables record the best's."""
    t = tkc.autotune(space={"R": [16, 32]}, name="test.scale.spread")(scale_builder)
    times = {"tune_scale_16_2": iter([5.0, 5.5, 4.5] * 3), "tune_scale_32_2": iter([3.0] * 9)}
    result = t.tune(*args_of(), timer=lambda kernel, args: next(times[kernel.name]), run=cpu_run,
                    compare=cpu_compare, rounds=3)
    spread = {r["config"]["R"]: r["spread"] for r in result.rows}
    assert spread == {16: 0.2, 32: 0.0} and result.best == {"R": 32}
    assert " 20.0%" in result.table() and json.loads(tables.user_path().read_text())[
        "entries"]["test.scale.spread"][repr(result.key)]["spread"] == 0.0


@pytest.mark.parametrize("gains, win", [
    ([0.5] * 5 * 3, False),                 # 0.5% faster every round: within the noise
    ([5, 5, -2, 5, -2] * 3, False),         # 5% faster by its median, slower in 2 rounds of 5
    ([3, 3, 3, 3, -4] * 3, True),           # 3% faster in 4 rounds of 5
    ([2.5] * 5 * 3, True),                  # 2.5% faster every round
    ([6, -3, 6, -3, 6] + [6] * 10, True),   # slower in 2 of the first 5 rounds, then faster in every one
    ([2] * 5 + [0, -1] * 5, False),         # faster in the first 5 rounds only: a fluke the finalists' rounds undo
])
def test_a_candidate_replaces_the_default_only_beyond_the_noise(cache, gains, win):
    """The default is kept unless a candidate beats it by more than 1% in
    the median of their per-round ratios and in three rounds of four (the
    first 5 rounds, then as finalists 10 more); the clock moves between
    rounds (up to 8% here, more than every gain) but not within one, where
    the pair is timed together."""
    t = tkc.autotune(space={"R": [16, 32]}, name="test.scale.margin")(scale_builder)
    clock, seen = [1.0, 1.08, 0.95, 1.0, 1.04] * 3, []

    def timer(kernel, args):
        r = len(seen) // 2   # two candidates a round
        seen.append(kernel.name)
        base = 5.0 * clock[r]
        return base if kernel.name == "tune_scale_16_2" else base / (1 + gains[r] / 100)
    result = t.tune(*args_of(), timer=timer, run=cpu_run, compare=cpu_compare, rounds=5, record=False)
    assert result.best == ({"R": 32} if win else {"R": 16})
    row = next(r for r in result.rows if r["config"] == {"R": 32})
    default = next(r for r in result.rows if r["config"] == {"R": 16})
    assert (row["status"] == "best") == win
    assert ("within the noise" in row["why"]) == (not win and row["us"] < default["us"])


def test_the_finalists_alone_run_the_last_rounds(cache):
    """measure.FINALISTS: after the rounds, the 3 fastest by their medians
    and the default run 2 x rounds more; the rest keep their first rounds'
    times, their rows say why, and none of them can be the pick."""
    t = tkc.autotune(space={"R": [16, 32, 64], "factor": [2.0, 3.0]}, name="test.scale.final")(scale_builder)
    us = {"tune_scale_16_2": 5.0, "tune_scale_32_2": 3.0, "tune_scale_64_2": 3.1,
          "tune_scale_16_3": 3.2, "tune_scale_32_3": 3.3, "tune_scale_64_3": 3.4}
    calls = {}

    def timer(kernel, args):
        calls[kernel.name] = calls.get(kernel.name, 0) + 1
        return us[kernel.name]
    result = t.tune(*args_of(), timer=timer, run=lambda k, a: [], compare=lambda r, o: None, rounds=2,
                    record=False)
    assert calls == {"tune_scale_16_2": 6, "tune_scale_32_2": 6, "tune_scale_64_2": 6, "tune_scale_16_3": 6,
                     "tune_scale_32_3": 2, "tune_scale_64_3": 2}
    assert result.best == {"R": 32, "factor": 2.0}
    rows = {(r["config"]["R"], r["config"]["factor"]): r for r in result.rows}
    assert rows[(32, 3.0)]["why"] == "not among the 3 fastest after 2 rounds" and rows[(32, 3.0)]["us"] == 3.3


def test_the_noise_margin_is_against_what_the_key_runs_untuned(cache):
    """With a fallback (an untuned key's rule), a candidate must beat the
    fallback's pick beyond the noise, not the space's first configuration."""
    t = tkc.autotune(space={"R": [16, 32, 64]}, name="test.scale.margin.fallback",
                     fallback=lambda key: {"R": 32})(scale_builder)
    us = {"tune_scale_16_2": 9.0, "tune_scale_32_2": 5.0, "tune_scale_64_2": 4.98}
    result = t.tune(*args_of(), timer=fake_timer(us), run=cpu_run, compare=cpu_compare, rounds=3, record=False)
    assert result.best == {"R": 32}


def test_no_candidate_always_follows_the_same_one(cache):
    """Rounds time the candidates in shuffled orders (seeded: reproducible).
    A timer charging whoever runs right after the default 50% (a wake, as
    cuDNN's on the H200) would, in a fixed order, hand the pick to the
    candidate listed after the one that is fastest."""
    t = tkc.autotune(space={"R": [16, 32, 64]}, name="test.scale.order")(scale_builder)
    us = {"tune_scale_16_2": 5.0, "tune_scale_32_2": 3.0, "tune_scale_64_2": 3.2}
    order, last = [], [None]

    def timer(kernel, args):
        order.append(kernel.name)
        wake = 1.5 if last[0] == "tune_scale_16_2" else 1.0
        last[0] = kernel.name
        return us[kernel.name] * wake
    result = t.tune(*args_of(), timer=timer, run=cpu_run, compare=cpu_compare, rounds=5, record=False)
    assert result.best == {"R": 32}
    rounds = [tuple(order[i:i + 3]) for i in range(0, 15, 3)]
    assert all(sorted(r) == sorted(us) for r in rounds) and len(set(rounds)) > 2


def test_candidates_the_compiler_refuses_are_pruned(cache):
    """R = 24: tile rows are 8 or multiples of 16; the verifier's refusal prunes it."""
    t = tkc.autotune(space={"R": [16, 24]}, name="test.refused")(scale_builder)
    result = t.tune(*args_of(), timer=fake_timer({"tune_scale_16_2": 1.0}), run=cpu_run,
                    compare=cpu_compare, rounds=1, record=False)
    rows = {r["config"]["R"]: r for r in result.rows}
    assert rows[16]["status"] == "best" and rows[24]["status"] == "pruned" and rows[24]["why"]
    # 48 rows: R = 32 cannot take them (a multiple of its tile), R = 16 can
    t = tkc.autotune(space={"R": [16, 32]}, name="test.args")(scale_builder)
    result = t.tune(*args_of(48), timer=fake_timer({"tune_scale_16_2": 1.0}), run=cpu_run,
                    compare=cpu_compare, rounds=1, record=False)
    rows = {r["config"]["R"]: r for r in result.rows}
    assert rows[32]["status"] == "rejected" and "multiple of 32" in rows[32]["why"]
    bad = tkc.autotune(space={"R": [24, 16]}, name="test.refused_default")(scale_builder)
    with pytest.raises(TkcError, match="default configuration"):
        bad.tune(*args_of(), timer=fake_timer({}), run=cpu_run, compare=cpu_compare, record=False)


def test_candidates_whose_wgmma_ptxas_serialises_are_pruned(cache, monkeypatch):
    """A candidate whose build reports serialised wgmma (ptxas C7514: an error
    to tkc build, so the library could not hold it) is pruned, as a spilling one."""
    from tkc import building
    real = building.build_all

    def build_all(kernels, *rest):
        rows = real(kernels, *rest)
        return [dict(r, wgmma="serialised") if k.name == "tune_scale_32_2" else r for k, r in zip(kernels, rows)]
    monkeypatch.setattr(building, "build_all", build_all)
    t = tkc.autotune(space={"R": [16, 32]}, name="test.serialised")(scale_builder)
    result = t.tune(*args_of(), timer=fake_timer({"tune_scale_16_2": 2.0, "tune_scale_32_2": 1.0}), run=cpu_run,
                    compare=cpu_compare, rounds=1, record=False)
    rows = {r["config"]["R"]: r for r in result.rows}
    assert rows[16]["status"] == "best" and rows[32]["status"] == "pruned"
    assert rows[32]["why"] == "ptxas serialises its wgmma"


def test_offline_package_table_and_fallback(cache, monkeypatch):
    t = tkc.autotune(space={"R": [16, 32, 64]}, name="test.offline")(scale_builder)
    args = args_of()
    key = t.key(args)
    tables.PACKAGE_DIR.mkdir(parents=True, exist_ok=True)
    tables.package_path().write_text(json.dumps(
        {"device": "Test GPU", "entries": {"test.offline": {repr(key): {"config": {"R": 64}}}}}))
    assert t.pick(args) is t.configs[2]                         # the package's table: the space's {"R": 64}
    tables.record("test.offline", key, {"config": {"R": 32}})
    t.forget()
    assert t.pick(args) == {"R": 32}                            # this machine's wins
    tables.record("test.offline", key, {"config": {"R": 128}})  # not in the space (an old table)
    t.forget()
    assert t.pick(args) == t.default
    monkeypatch.setenv("TKC_OFFLINE", "1")                      # no compiling: unbuilt ones pruned
    fresh = tkc.autotune(space={"R": [16, 48]}, name="test.offline2")(scale_builder)
    monkeypatch.delenv("TKC_OFFLINE")
    fresh.kernel({"R": 16}).build()
    monkeypatch.setenv("TKC_OFFLINE", "1")
    result = fresh.tune(*args, timer=fake_timer({"tune_scale_16_2": 1.0}), run=cpu_run,
                        compare=cpu_compare, rounds=1, record=False)
    assert {r["config"]["R"]: r["status"] for r in result.rows} == {16: "best", 48: "pruned"}


def test_tuning_at_the_first_call(cache, monkeypatch):
    """tune=True: a new key is tuned when first met, then read from the memo."""
    tuned = []
    monkeypatch.setattr(measure, "_gpu_timer", lambda flush: fake_timer(
        {"tune_scale_16_2": 2.0, "tune_scale_32_2": 1.0}))
    monkeypatch.setattr(measure, "_run_gpu", lambda k, a: tuned.append(k.name) or cpu_run(k, a))
    monkeypatch.setattr(measure, "_compare", cpu_compare)
    from tkc.tune import space as space_module
    monkeypatch.setattr(space_module, "_can_tune_now", lambda: True)   # (the GPU faked above)
    t = tkc.autotune(space={"R": [16, 32]}, name="test.first", tune=True)(scale_builder)
    assert t.pick(args_of()) == {"R": 32} and len(tuned) == 2
    assert t.pick(args_of()) == {"R": 32} and len(tuned) == 2


def test_tkc_build_of_a_file_builds_every_candidate(cache, tmp_path):
    src = tmp_path / "tuned_kernels.py"
    src.write_text(textwrap.dedent('''
        import tkc
        from tkc import f32, gl, rt
        from tkc.ops import load, store

        @tkc.autotune(space={"R": [16, 32]})
        def copy(R):
            @tkc.kernel(warps=1, grid=lambda x, y: (tkc.cdiv(x.r, R),), name=f"file_copy_{R}")
            def k(x: gl(f32, 1, 1, "N", 64), y: gl(f32, 1, 1, "N", 64)):
                store(y, load(rt(f32, R, 64), x, (0, 0, tkc.block_idx.x, 0)), (0, 0, tkc.block_idx.x, 0))
            return k
    '''))
    from tkc.frontend import kernels_in_file
    assert sorted(k.name for k in kernels_in_file(src)) == ["file_copy_16", "file_copy_32"]


def test_build_workers_import_a_partial_builders_own_module():
    """measure._files: a builder's candidates compile in spawned processes
    that import its module; a functools.partial (tkc.swiglu's builder is
    one) names its function's module, not functools."""
    import types

    from tkc.torchops import gated
    tuned = lambda builder: types.SimpleNamespace(builder=builder)  # noqa: E731
    here = functools.partial(functools.partial(scale_builder, 16), factor=2.0)
    assert measure._files(tuned(here), 4) == ((__file__,), 4)
    assert measure._files(tuned(scale_builder), 4) == ((__file__,), 4)
    assert measure._files(tuned(functools.partial(gated._kernel, False)), 4) == ((), 4)   # the library's
    main = functools.partial(lambda R: None, 16)
    main.func.__module__ = "__main__"
    assert measure._files(tuned(main), 4) == ((), 1)


def test_the_readme_example(cache):
    """README's @autotune block defines a builder whose candidates all build
    and compute y = 2 x (its GPU lines, tune and call, are left out here)."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = text.split("```python\nfrom tkc import autotune\n", 1)[1].split("```", 1)[0]
    code = "from tkc import autotune\n" + "\n".join(
        ln for ln in block.splitlines() if not ln.startswith(("scale.tune", "scale(x")))
    scope = {"tkc": tkc, "gl": gl, "f32": f32, "rt": rt, "load": load, "store": store}
    # (its source under a name of its own: inspect reads a kernel's source by its file's name and
    # line, which in README.md itself are other lines)
    name = "<README.md's @autotune example>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    exec(compile(code, name, "exec"), scope)
    scale = scope["scale"]
    assert [c["rows"] for c in scale.configs] == [16, 32, 64]
    x, y = args_of()
    for k in scale.kernels():
        out = np.zeros_like(x)
        k.interpret(x, out)
        np.testing.assert_array_equal(out, 2 * x)


@functools.lru_cache(maxsize=None)
def scale_by_builder(R: int):
    """y = f * x, R rows a block, f a launch argument (one Kernel per R)."""
    @tkc.kernel(warps=1, grid=lambda x, y, f: (tkc.cdiv(x.r, R),), name=f"tune_scale_by_{R}")
    def scale_by(x: gl(f32, 1, 1, "N", 64), y: gl(f32, 1, 1, "N", 64), f: f32):
        t = load(rt(f32, R, 64), x, (0, 0, tkc.block_idx.x, 0))
        store(y, t * f, (0, 0, tkc.block_idx.x, 0))
    return scale_by


def test_a_launch_argument_in_the_space(cache):
    """A builder returning a Bound kernel: its bound argument is a choice of
    the space like a build parameter; candidates differing only in it share
    one Kernel (built once, `tkc build` lists it once), each runs with its
    value (f 3 is rejected against the default's f 2), and the pick is recorded."""
    from tkc.tune import Bound
    t = tkc.autotune(space={"R": [16, 32], "f": [2.0, 3.0]}, name="test.bound")(
        lambda R, f: Bound(scale_by_builder(R), f=f))
    assert [k.name for k in t.kernels()] == ["tune_scale_by_16", "tune_scale_by_32"]
    k = t.kernel({"R": 32, "f": 3.0})
    assert k.kernel is t.kernel({"R": 32, "f": 2.0}).kernel and "f=3.0" in repr(k)
    x, y = args_of()
    k.interpret(x, y)
    np.testing.assert_array_equal(y, 3 * x)
    us = {"tune_scale_by_16": 2.0, "tune_scale_by_32": 1.0}
    result = t.tune(x, y, timer=fake_timer(us), run=cpu_run, compare=cpu_compare, rounds=1)
    status = {(r["config"]["R"], r["config"]["f"]): r["status"] for r in result.rows}
    assert status == {(16, 2.0): "ok", (32, 2.0): "best", (16, 3.0): "rejected", (32, 3.0): "rejected"}
    assert tables.lookup("test.bound", result.key) == {"R": 32, "f": 2.0}
    with pytest.raises(TkcError, match=r"takes 2 arguments .* got 3") as e:
        k.interpret(x, y, 1.0)
    assert e.value.where.startswith(__file__)
    with pytest.raises(TkcError, match="has no argument 'g'"):
        Bound(scale_by_builder(16), g=1.0)


def test_a_fallback_for_keys_no_table_holds(cache):
    """fallback(key) picks for keys the tables lack (or whose pick the space
    no longer holds); a table's pick wins where there is one."""
    t = tkc.autotune(space={"R": [16, 32, 64]}, name="test.fallback",
                     key=lambda x, y: x.shape[0], fallback=lambda rows: {"R": 64 if rows >= 128 else 32})(
        scale_builder)
    assert t.pick(args_of(64)) == {"R": 32} and t.pick(args_of(128)) == {"R": 64}
    tables.record("test.fallback", 64, {"config": {"R": 16}})
    tables.record("test.fallback", 128, {"config": {"R": 8}})   # not in the space (an old table)
    t.forget()
    assert t.pick(args_of(64)) == {"R": 16} and t.pick(args_of(128)) == {"R": 64}


def test_challengers_are_timed_against_the_tables_pick(cache):
    """--challenge: only the configurations it accepts are timed, beside the
    default (the outputs' reference) and the key's table pick, which a
    challenger must beat beyond the noise (not the default)."""
    t = tkc.autotune(space={"R": [16, 32, 48, 64]}, name="test.challenge")(scale_builder)
    key = t.key(args_of())
    tables.record("test.challenge", key, {"config": {"R": 32}})
    timed = []

    def timer(us):
        return lambda kernel, args: timed.append(kernel.name) or us[kernel.name]
    us = {"tune_scale_16_2": 9.0, "tune_scale_32_2": 5.0, "tune_scale_64_2": 4.0}
    result = t.tune(*args_of(), timer=timer(us), run=cpu_run, compare=cpu_compare, rounds=3, record=False,
                    challengers=lambda c: c["R"] == 64)
    assert result.best == {"R": 64} and set(timed) == set(us)   # R 48: neither challenger nor pick
    assert sorted(r["config"]["R"] for r in result.rows) == [16, 32, 64]
    us["tune_scale_64_2"] = 4.98   # within the noise of the pick (not of the default, 1.8x slower)
    result = t.tune(*args_of(), timer=timer(us), run=cpu_run, compare=cpu_compare, rounds=3, record=False,
                    challengers=lambda c: c["R"] == 64)
    assert result.best == {"R": 32}


def test_a_pick_that_does_not_build_is_not_challenged(cache):
    """A challenged pick the builder refuses (or, offline, one not built) is
    an error for its key: the default standing in for it would let a
    challenger win against the wrong time."""
    def picky(R):
        if R == 48:
            raise ValueError("R 48 refused here")
        return scale_builder(R)
    t = tkc.autotune(space={"R": [16, 32, 48, 64]}, name="test.challenge.unbuilt")(picky)
    tables.record("test.challenge.unbuilt", t.key(args_of()), {"config": {"R": 48}})
    with pytest.raises(TkcError, match=r"the pick being challenged at .*\{\"R\":48\}, does not build: "
                                       r"ValueError: R 48 refused here"):
        t.tune(*args_of(), timer=fake_timer({}), run=cpu_run, compare=cpu_compare, rounds=1, record=False,
               challengers=lambda c: c["R"] == 64)


def test_a_challenger_slower_with_a_warm_l2_keeps_the_pick(cache):
    """--warm, in a space timed with a cold L2: a challenger that wins cold
    must also be no slower than the pick by the warm timer, else the pick
    stays and the challenger's row says why."""
    t = tkc.autotune(space={"R": [16, 32, 64]}, name="test.challenge.warm", flush_l2=True)(scale_builder)
    tables.record("test.challenge.warm", t.key(args_of()), {"config": {"R": 32}})
    cold = {"tune_scale_16_2": 9.0, "tune_scale_32_2": 5.0, "tune_scale_64_2": 4.0}
    for warm, best in (({"tune_scale_32_2": 3.0, "tune_scale_64_2": 3.1}, 32),
                       ({"tune_scale_32_2": 3.0, "tune_scale_64_2": 2.9}, 64)):
        result = t.tune(*args_of(), timer=fake_timer(cold), run=cpu_run, compare=cpu_compare, rounds=3,
                        record=False, challengers=lambda c: c["R"] == 64, warm=fake_timer(warm))
        assert result.best == {"R": best}
        why = {r["config"]["R"]: r["why"] for r in result.rows}[64]
        assert why.startswith("slower with a warm L2: 0.968x") if best == 32 else not why


def test_challenge_names_a_value_of_the_space():
    """`tkc tune --challenge NAME=VALUE`: a predicate on the space's
    configurations (values as Python literals); a name the space lacks or a
    value none of its configurations has is refused, naming what it has."""
    from tkc.tune.cli import _challengers
    from tkc.torchops import gemm
    accepts = _challengers(gemm.TILE, ["sliced=True", "BN=64"])
    assert [c for c in gemm.TILE.configs if accepts(c)] == [
        c for c in gemm.TILE.configs if c["sliced"] and c["BN"] == 64] != []
    with pytest.raises(TkcError, match="no 'slicd'.*cluster_m, persistent, sliced"):
        _challengers(gemm.TILE, ["slicd=True"])
    with pytest.raises(TkcError, match="BN=100.*its values: 128, 16, 192, 256, 32, 64"):
        _challengers(gemm.TILE, ["BN=100"])
    with pytest.raises(TkcError, match="expected NAME=VALUE"):
        _challengers(gemm.TILE, ["sliced"])


def test_tkc_tune_passes_the_challenge_and_warm_to_each_key(cache, monkeypatch):
    """`tkc tune --challenge R=32 --warm`: each key's tuning gets the
    predicate (R 32 alone) and warm=True; a --challenge its space lacks is
    refused before anything is tuned, and by a dry run."""
    from tkc.tune import cli
    from tkc.tune.measure import Result
    from tkc.tune.space import Autotuned
    t = tkc.autotune(space={"R": [16, 32, 64]}, name="t.challenged", examples=lambda: [[1], [2]])(scale_builder)
    seen = []

    def tune(self, *args, **kw):
        seen.append(([c["R"] for c in self.configs if kw["challengers"](c)], kw["warm"]))
        return Result(self.default, args, [{"config": self.default, "status": "best", "us": 1.0, "spread": 0.0,
                                            "why": ""}])
    monkeypatch.setattr(Autotuned, "tune", tune)
    monkeypatch.setattr(cli, "_gpu", lambda: True)
    monkeypatch.setattr(cli, "_builders", lambda files, library: [t])
    assert cli.main(["--library", "--challenge", "R=32", "--warm"]) == 0
    assert seen == [([32], True), ([32], True)]
    for dry in ([], ["--dry-run"]):
        with pytest.raises(TkcError, match="no configuration of t.challenged has R=48"):
            cli.main(["--library", "--challenge", "R=48", *dry])
    assert len(seen) == 2


def test_tkc_tune_goes_on_past_a_key_it_cannot_tune(cache, tmp_path, monkeypatch, capsys):
    """`tkc tune` over several keys: one whose tuning fails (its default does
    not build, say) or whose example cannot be made (a kernel it needs is not
    in the offline cache) is reported and the others are still tuned; the
    command then exits 1 and names them."""
    src = tmp_path / "two_spaces.py"
    src.write_text(textwrap.dedent('''
        import tkc
        from tkc import f32, gl, rt
        from tkc.ops import load, store

        def make(R, tag):
            @tkc.kernel(warps=1, grid=lambda x, y: (tkc.cdiv(x.r, R),), name=f"{tag}_{R}")
            def k(x: gl(f32, 1, 1, "N", 64), y: gl(f32, 1, 1, "N", 64)):
                store(y, load(rt(f32, R, 64), x, (0, 0, tkc.block_idx.x, 0)), (0, 0, tkc.block_idx.x, 0))
            return k

        @tkc.autotune(space={"R": [16, 32]}, name="t.bad", examples=lambda: [[1]])
        def bad(R):
            return make(R, "cli_bad")

        @tkc.autotune(space={"R": [16, 32]}, name="t.good", examples=lambda: [[2]])
        def good(R):
            return make(R, "cli_good")

        def unmade():   # an example that needs a kernel the offline cache lacks
            from tkc.diagnostics import TkcError
            raise TkcError("no artifact for kernel 'cli_unmade_16' and TKC_OFFLINE=1 forbids compiling here")

        @tkc.autotune(space={"R": [16, 32]}, name="t.unmade", examples=lambda: [unmade])
        def unmade_space(R):
            return make(R, "cli_unmade")
    '''))
    from tkc.tune import cli
    from tkc.tune.measure import Result
    from tkc.tune.space import Autotuned

    def tune(self, *args, **kw):
        if self.name == "t.bad":
            raise TkcError("autotune t.bad: the default configuration {\"R\":16} does not build")
        return Result(self.default, args, [{"config": self.default, "status": "best", "us": 1.0, "spread": 0.02,
                                            "why": ""}])
    monkeypatch.setattr(Autotuned, "tune", tune)
    monkeypatch.setattr(cli, "_gpu", lambda: True)   # (the fake tune times nothing)
    assert cli.main([str(src)]) == 1
    out = capsys.readouterr()
    assert "t.good" in out.out and "2 key(s) not tuned" in out.out and "t.bad: " in out.out
    assert "t.unmade: " in out.out and "[-] t.unmade" in out.err
    assert "1.00    2.0%" in out.out   # the best's µs and its spread over the rounds
    assert "[1] t.good" in out.err and "[-] t.bad" in out.err


def test_every_shipped_pick_is_a_configuration_of_its_space():
    """Each package table's rows name a registered space (the torch ops' and
    the attention spaces) and pick one of its configurations: a pick the space
    no longer holds (pruned since, as a schedule whose wgmma ptxas serialises)
    would be dropped at lookup and silently run the fallback."""
    import tkc.torchops  # noqa: F401  (registers the library's spaces)
    from tkc.tune.configs import config_text
    from tkc.tune.space import registry
    for path in sorted(tables.PACKAGE_DIR.glob("*.json")):
        for name, rows in json.loads(path.read_text())["entries"].items():
            assert name in registry, (path.name, name)
            texts = {config_text(c) for c in registry[name].configs}
            for key, row in rows.items():
                assert config_text(row["config"]) in texts, (path.name, name, key, row["config"])


def test_tkc_tune_missing_tunes_only_keys_no_table_holds(cache, tmp_path, monkeypatch, capsys):
    """`tkc tune --missing` skips the examples whose key a table holds (this
    machine's here) and tunes the rest; with every key held it tunes nothing
    and succeeds. --budget: no key is started past it (and that succeeds)."""
    src = tmp_path / "one_space.py"
    src.write_text(textwrap.dedent('''
        import tkc
        from tkc import f32, gl, rt
        from tkc.ops import load, store

        @tkc.autotune(space={"R": [16, 32]}, name="t.missing", key=lambda n, _: n,
                      examples=lambda: [[1, 0], [2, 0], [3, 0]])
        def space(R):
            @tkc.kernel(warps=1, grid=lambda x, y: (tkc.cdiv(x.r, R),), name=f"cli_missing_{R}")
            def k(x: gl(f32, 1, 1, "N", 64), y: gl(f32, 1, 1, "N", 64)):
                store(y, load(rt(f32, R, 64), x, (0, 0, tkc.block_idx.x, 0)), (0, 0, tkc.block_idx.x, 0))
            return k
    '''))
    from tkc.tune import cli
    from tkc.tune.measure import Result
    from tkc.tune.space import Autotuned
    tuned_keys = []

    def tune(self, *args, **kw):
        tuned_keys.append(args[0])
        tables.record(self.name, args[0], {"config": self.default})
        return Result(self.default, args, [{"config": self.default, "status": "best", "us": 1.0, "spread": 0.0,
                                            "why": ""}])
    monkeypatch.setattr(Autotuned, "tune", tune)
    monkeypatch.setattr(cli, "_gpu", lambda: True)   # (the fake tune times nothing)
    tables.record("t.missing", 2, {"config": {"R": 32}})
    assert cli.main([str(src), "--missing"]) == 0
    assert tuned_keys == [1, 3]
    assert "1 key(s) a table holds" in capsys.readouterr().out
    assert cli.main([str(src), "--missing"]) == 0 and tuned_keys == [1, 3]
    assert "3 key(s) a table holds" in capsys.readouterr().out
    assert cli.main([str(src)]) == 0 and tuned_keys == [1, 3, 1, 2, 3]   # without it: every key
    capsys.readouterr()
    assert cli.main([str(src), "--budget", "0"]) == 0 and len(tuned_keys) == 5   # spent at once: no key
    assert "3 example(s) left when the budget ran out" in capsys.readouterr().out
    # --dry-run lists the keys it would tune, tuning none (with --missing: those no table holds)
    assert cli.main([str(src), "--dry-run"]) == 0 and len(tuned_keys) == 5
    assert capsys.readouterr().out == "t.missing 1\nt.missing 2\nt.missing 3\nt.missing: 3 key(s) to tune\n" \
        "3 key(s) to tune in 1 of 1 space(s)\n"
    table = json.loads(tables.user_path().read_text())
    del table["entries"]["t.missing"]["1"]   # the table forgets key 1
    tables.user_path().write_text(json.dumps(table))
    assert cli.main([str(src), "--dry-run", "--missing"]) == 0 and len(tuned_keys) == 5
    assert capsys.readouterr().out == "t.missing 1\nt.missing: 1 key(s) to tune, 2 a table holds\n" \
        "1 key(s) to tune in 1 of 1 space(s)\n"


def test_tkc_tune_goes_on_past_an_example_the_gpu_cannot_hold(tmp_path, monkeypatch, capsys):
    """An example too large for the GPU's free memory (torch's
    OutOfMemoryError, when it is made or tuned) fails its key, said in the
    summary with rc 1, and the keys after it are tuned; another error of the
    example's is not swallowed."""
    pytest.importorskip("torch")
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    src = tmp_path / "big.py"
    src.write_text(textwrap.dedent('''
        import torch
        import tkc
        from tkc import f32, gl, rt
        from tkc.ops import load, store

        def example(n):
            def make():
                if n == 2:
                    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 32.00 GiB")
                if n == 9:
                    raise RuntimeError("not a memory error")
                return [n, 0]
            return make

        @tkc.autotune(space={"R": [16, 32]}, name="t.big", key=lambda n, _: n,
                      examples=lambda: [example(n) for n in EXAMPLES])
        def space(R):
            @tkc.kernel(warps=1, grid=lambda x, y: (tkc.cdiv(x.r, R),), name=f"cli_big_{R}")
            def k(x: gl(f32, 1, 1, "N", 64), y: gl(f32, 1, 1, "N", 64)):
                store(y, load(rt(f32, R, 64), x, (0, 0, tkc.block_idx.x, 0)), (0, 0, tkc.block_idx.x, 0))
            return k
        EXAMPLES = [1, 2, 3]
    '''))
    from tkc.tune import cli
    from tkc.tune.measure import Result
    from tkc.tune.space import Autotuned
    tuned_keys = []

    def tune(self, *args, **kw):
        tuned_keys.append(args[0])
        return Result(self.default, args[0], [{"config": self.default, "status": "best", "us": 1.0,
                                               "spread": 0.0, "why": ""}])
    monkeypatch.setattr(Autotuned, "tune", tune)
    monkeypatch.setattr(cli, "_gpu", lambda: True)   # (the fake tune times nothing)
    assert cli.main([str(src)]) == 1 and tuned_keys == [1, 3]
    out = capsys.readouterr()
    assert "1 key(s) not tuned:\n  t.big: OutOfMemoryError: CUDA out of memory" in out.out
    src.write_text(src.read_text().replace("EXAMPLES = [1, 2, 3]", "EXAMPLES = [9]"))
    with pytest.raises(RuntimeError, match="not a memory error"):
        cli.main([str(src)])


def test_the_gpu_timer_keeps_a_graph_per_kernel_object(monkeypatch):
    """measure._gpu_timer captures one CUDA graph per kernel object and
    replays it after: kernels made anew (lambdas, whose ids a dead one's may
    be) each get their own graph, never another's; the same object replays
    its own. (Graphs and replays faked: each graph's time is its index.)"""
    torch = pytest.importorskip("torch")
    from tkc.bench import timing
    from tkc.tune import measure
    graphs = []

    def captured(fn, inner):   # (as a CUDA graph, it keeps no reference to fn or the kernel)
        fn()
        graphs.append(len(graphs))
        return graphs[-1]
    monkeypatch.setattr(timing, "captured", captured)
    monkeypatch.setattr(timing, "replay_ms", lambda graph, reps, inner: float(graph))
    timer = measure._gpu_timer(False)
    args = [torch.zeros(2)]
    assert [timer(lambda x: None, args) for _ in range(5)] == [0.0, 1000.0, 2000.0, 3000.0, 4000.0]
    k = lambda x: None  # noqa: E731
    assert timer(k, args) == timer(k, args) == 5000.0 and len(graphs) == 6


def test_the_package_tables_keep_a_picks_evidence_not_every_candidates_time():
    """The shipped tables hold, a row, at most the fastest KEPT candidates'
    times and the untuned one's (tables.trimmed): every process that looks a
    key up parses the whole file."""
    for path in tables.PACKAGE_DIR.glob("*.json"):
        for name, rows in json.loads(path.read_text())["entries"].items():
            for key, row in rows.items():
                assert len(row.get("candidates", ())) <= tables.KEPT + 1, (path.name, name, key)


def test_tkc_tune_ship_copies_tuned_rows_into_the_package_table(cache, tmp_path, monkeypatch, capsys):
    """`tkc tune --ship TUNED.json --source S`: the rows of a machine's table
    (its GPU's) join the package's table of that GPU, a key's row replaced
    in place and new keys at the end of their space (the file's order kept),
    each with the source; --filter ships only the spaces it names; a row the
    table holds already (a later run's file keeps it) is left with its source."""
    from tkc.tune import cli
    monkeypatch.setattr(tables, "PACKAGE_DIR", tmp_path / "pkg")
    (tmp_path / "pkg").mkdir()
    package = tables.package_path("Some GPU")
    package.write_text(json.dumps({"device": "Some GPU", "entries": {"t.a": {
        "1": {"config": {"R": 16}}, "2": {"config": {"R": 16}}}}}, indent=1) + "\n")
    tuned = tmp_path / "tuned.json"
    for name, key, r in (("t.a", 2, 32), ("t.a", 3, 64), ("t.b", 1, 8)):
        tables.record(name, key, {"config": {"R": r}, "us": 1.0}, device="Some GPU", path=tuned)
    assert cli.main(["--ship", str(tuned), "--source", "a test", "--filter", "t.a"]) == 0
    assert "2 row(s)" in capsys.readouterr().out
    rows = json.loads(package.read_text())["entries"]
    assert list(rows) == ["t.a"] and list(rows["t.a"]) == ["1", "2", "3"]
    assert rows["t.a"]["1"] == {"config": {"R": 16}}
    assert rows["t.a"]["2"] == {"config": {"R": 32}, "us": 1.0, "source": "a test"}
    assert tables.lookup("t.a", 3, device="Some GPU") == {"R": 64}
    # the machine's file grows between runs: the rows shipped before keep their source
    tables.record("t.a", 4, {"config": {"R": 128}, "us": 2.0}, device="Some GPU", path=tuned)
    assert cli.main(["--ship", str(tuned), "--source", "a later run", "--filter", "t.a"]) == 0
    assert "1 row(s)" in (out := capsys.readouterr().out) and "2 the table held already" in out
    rows = json.loads(package.read_text())["entries"]["t.a"]
    assert [r.get("source") for r in rows.values()] == [None, "a test", "a test", "a later run"]
    with pytest.raises(TkcError, match="is not a tuned table"):
        cli.main(["--ship", str(tmp_path / "absent.json")])
    # the package keeps the fastest KEPT candidates' times and the untuned one's
    times = {"a": 5.0, "b": 1.004, "c": 3.0, "d": 2.0, "e": 4.0}
    tables.record("t.a", 5, {"config": {"R": 8}, "us": 1.004, "untuned": "e", "candidates": times},
                  device="Some GPU", path=tuned)
    assert cli.main(["--ship", str(tuned), "--filter", "t.a"]) == 0
    row = json.loads(package.read_text())["entries"]["t.a"]["5"]
    assert row["candidates"] == {"b": 1.004, "c": 3.0, "d": 2.0, "e": 4.0}
    assert json.loads(tuned.read_text())["entries"]["t.a"]["5"]["candidates"] == times   # the log keeps them
    out = capsys.readouterr().out   # and what the row gains: 4.0 / 1.004 - 1
    assert "1 row(s)" in out and "1 of the 1 naming their untuned configuration run 2% or more faster " \
        "than it (298% to 298%, median 298%)" in out
    # shipped again, the trimmed row is the one the table holds
    assert cli.main(["--ship", str(tuned), "--filter", "t.a"]) == 0
    assert "0 row(s)" in (out := capsys.readouterr().out) and "4 the table held already" in out


def test_every_library_space_s_first_example_fits_its_kernel():
    """Each library space's first example (made as fake tensors through the
    fake driver, as --dry-run makes them) is as many arguments as its kernel
    takes: the norms' examples kept the dropout's old (p, seed, offset) after
    the kernels took (philox, p), and `tkc tune` failed at every norm key
    on the GPU (12-01). Spaces whose examples need a GPU are skipped, but
    none for a refusal of tkc's: the backward spaces' examples, which run the
    forward kernel on fake tensors, were refused as aliasing (every fake
    tensor's pointer is 0) until null pointers were taken for no memory."""
    pytest.importorskip("torch")
    from tkc.tune import cli
    checked, misfits, refused = 0, [], []
    for tuned in cli._builders([], True):
        try:
            with cli.faked():
                example = tuned.examples()[0]
                args = example() if callable(example) else example
        except TkcError as e:
            refused.append(f"{tuned.name}: {e}")
            continue
        except Exception:  # noqa: BLE001  (examples that need a GPU: --dry-run names them)
            continue
        checked += 1
        why = tuned.misfit(args)
        if why is not None:
            misfits.append(f"{tuned.name}: {why}")
    assert not refused, refused
    assert checked >= 116 and not misfits, misfits


def test_a_dry_run_fails_on_an_example_its_kernel_cannot_take(cache, tmp_path, capsys):
    src = tmp_path / "misfit.py"
    src.write_text(textwrap.dedent('''
        import tkc
        from tkc import f32, gl, rt
        from tkc.ops import load, store

        @tkc.autotune(space={"R": [16, 32]}, name="t.misfit", key=lambda *a: len(a),
                      examples=lambda: [[1, 2], [1, 2, 3]])
        def space(R):
            @tkc.kernel(warps=1, grid=lambda x, y: (tkc.cdiv(x.r, R),), name=f"cli_misfit_{R}")
            def k(x: gl(f32, 1, 1, "N", 64), y: gl(f32, 1, 1, "N", 64)):
                store(y, load(rt(f32, R, 64), x, (0, 0, tkc.block_idx.x, 0)), (0, 0, tkc.block_idx.x, 0))
            return k
    '''))
    from tkc.tune import cli
    assert cli.main([str(src), "--dry-run"]) == 1
    out = capsys.readouterr()
    assert out.out.startswith("t.misfit 2\n") and "t.misfit 3" not in out.out
    assert "t.misfit: an example of 3 arguments; the kernel cli_misfit_16 takes 2 (x, y)" in out.err


def test_batched_records_write_the_table_every_few_seconds_and_at_the_end(cache, monkeypatch):
    """Within tables.batched() (`tkc tune`'s loop) a row is written when
    WRITE_EVERY seconds passed since the last write, else at the end; lookup
    sees it meanwhile; a SIGTERM (cli._terminable: `timeout`'s) ends the
    loop with the rows written."""
    import os
    import signal

    from tkc.tune import cli
    clock = [100.0]
    monkeypatch.setattr(tables.time, "monotonic", lambda: clock[0])
    path = tables.user_path()
    path.unlink(missing_ok=True)
    written = lambda: json.loads(path.read_text())["entries"]["t.batch"] if path.exists() else {}  # noqa: E731
    with tables.batched():
        tables.record("t.batch", 1, {"config": {"R": 16}})
        clock[0] += tables.WRITE_EVERY / 2
        tables.record("t.batch", 2, {"config": {"R": 32}})
        assert written() == {} and tables.lookup("t.batch", 2) == {"R": 32}   # held, and seen
        clock[0] += tables.WRITE_EVERY / 2
        tables.record("t.batch", 3, {"config": {"R": 16}})   # the interval passed: all three written
        assert set(written()) == {"1", "2", "3"}
        tables.record("t.batch", 4, {"config": {"R": 32}})
        assert set(written()) == {"1", "2", "3"}
    assert set(written()) == {"1", "2", "3", "4"} and tables.lookup("t.batch", 4) == {"R": 32}
    tables.record("t.batch", 5, {"config": {"R": 16}})   # outside: at once
    assert set(written()) == {"1", "2", "3", "4", "5"}
    with pytest.raises(SystemExit) as stop:
        with cli._terminable(), tables.batched():
            tables.record("t.batch", 6, {"config": {"R": 16}})
            os.kill(os.getpid(), signal.SIGTERM)
    assert stop.value.code == 128 + signal.SIGTERM and "6" in written()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL   # restored


def test_tkc_tune_call_tunes_only_the_builder_it_names(cache, tmp_path, capsys):
    """`tkc tune FILE --call "NAME(...)"` tunes NAME at that call's key and no
    other builder at its examples; a call naming no builder is refused with
    the names a call may take (it would otherwise tune every example)."""
    src = tmp_path / "two_spaces.py"
    src.write_text(textwrap.dedent('''
        import tkc
        from tkc import f32, gl, rt
        from tkc.ops import load, store

        def copy(R, name):
            @tkc.kernel(warps=1, grid=lambda x, y: (tkc.cdiv(x.r, R),), name=name)
            def k(x: gl(f32, 1, 1, "N", 64), y: gl(f32, 1, 1, "N", 64)):
                store(y, load(rt(f32, R, 64), x, (0, 0, tkc.block_idx.x, 0)), (0, 0, tkc.block_idx.x, 0))
            return k

        @tkc.autotune(space={"R": [16, 32]}, name="t.first", key=lambda x, y: x.shape[-2],
                      examples=lambda: [[1, 0]])
        def first(R):
            return copy(R, f"cli_call_first_{R}")

        @tkc.autotune(space={"R": [16, 32]}, name="t.second", key=lambda x, y: x.shape[-2],
                      examples=lambda: [[2, 0]])
        def second(R):
            return copy(R, f"cli_call_second_{R}")
    '''))
    from tkc.tune import cli
    assert cli.main([str(src), "--call", "t.second(f32[1, 1, 48, 64], f32[1, 1, 48, 64])", "--dry-run"]) == 0
    assert capsys.readouterr().out == "t.second 48\nt.second: 1 key(s) to tune\n1 key(s) to tune in 1 of 1 space(s)\n"
    with pytest.raises(TkcError, match=r"--call 'scale\(f32\[1, 64\]\)' names no autotuned builder: a call "
                                       r"names a builder \(one of t.first, t.second\)"):
        cli.main([str(src), "--call", "scale(f32[1, 64])", "--dry-run"])


def test_tkc_tune_call_of_a_torch_op_lists_the_keys_it_picks(capsys):
    """`tkc tune --call` of a torch op (no FILE, no --library): the spaces and
    keys the call picks from, forward and backward (a dry run makes it
    through the fake driver), each found among its space's examples; none of
    the spaces the call does not touch."""
    pytest.importorskip("torch")
    from tkc.torchops.norm_tuned import space_name
    from tkc.tune import cli
    assert cli.main(["--call", "layer_norm(bf16[64, 1024], bf16[1024], bf16[1024])", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    fwd, bwd = space_name(False, "fwd", 1024, False, False), space_name(False, "bwd", 1024, False, False)
    assert [line.split(" ")[0] for line in lines if " key(s) to tune" not in line] == [fwd, bwd]
    assert lines[-1] == "2 key(s) to tune in 2 of 2 space(s)"
    # the same call again in this process (whose picks are made: dropped and looked up again), one space
    assert cli.main(["--call", "layer_norm(bf16[64, 1024], bf16[1024], bf16[1024])", "--filter", ".bwd.",
                     "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(bwd + " ") and len(out) == 3
    with pytest.MonkeyPatch.context() as m:   # without a GPU, only the dry run: tuning is refused, said so
        m.setattr(cli, "_gpu", lambda: False)
        with pytest.raises(TkcError, match="tuning times the candidates on a GPU, and torch sees none here"):
            cli.main(["--call", "layer_norm(bf16[64, 1024], bf16[1024], bf16[1024])"])
    with pytest.raises(TkcError, match="the calls pick from no autotuned space matching --filter 'tkc.matmul'"):
        cli.main(["--call", "layer_norm(bf16[64, 1024], bf16[1024], bf16[1024])", "--filter", "tkc.matmul",
                  "--dry-run"])


def test_tkc_tune_call_of_a_batched_matmul_finds_an_example_per_key(capsys):
    """A batched matmul's C has more rows than tkc.matmul's examples: its
    keys are tuned at the space's example(key) (C of the key's rows), and a
    key whose C would be larger than the examples' is named, not tuned."""
    pytest.importorskip("torch")
    from tkc.torchops.gemm import TILE
    from tkc.tune import cli
    assert cli.main(["--call", "matmul(bf16[8, 3336, 2224], bf16[2224, 1112])", "--dry-run"]) == 0
    out = capsys.readouterr()
    assert "which none of its examples makes" not in out.err + out.out
    assert out.out.splitlines()[-1] == "3 key(s) to tune in 1 of 1 space(s)"
    assert "tkc.matmul.tile (32768, 1280, True)" in out.out and "(32768, 2304, True)" in out.out
    # example(key) makes the key (misaligned: K 4000, C 8 columns short); none beyond the examples' size
    from tkc.tune.space import fake_tensors
    for key in ((32768, 1280, True), (65536, 4096, False), (16, 262144, False), (896, 208, 1280, False)):
        with fake_tensors():
            assert TILE.key(TILE.example(key)()) == key, key
    assert TILE.example((65536, 65536, False)) is None
    assert cli.main(["--call", "matmul(bf16[40000, 4096], bf16[4096, 50000])", "--dry-run"]) == 1   # (said)
    assert "picks tkc.matmul.tile at key (65536, 65536, False), which none of its examples makes" in \
        capsys.readouterr().err


def test_recording_notes_each_key_a_call_looks_up():
    """space.recording: the (space, key) pairs looked up within it, once each
    and in order, through choose() and through a call's pick (whose kernel is
    kept per key, so a later call skips choose); nothing outside it."""
    from tkc.tune.space import recording

    space = tkc.autotune(space={"R": [16, 32], "factor": [2.0]}, name="t.recorded", key=lambda n, _: n,
                         examples=lambda: [[1, 0], [2, 0], [3, 0]])(scale_builder)
    space.choose(7)
    with recording() as seen:
        space.choose(1)
        space.choose(2)
        space.choose(1)
    space.choose(3)
    assert seen == [(space, 1), (space, 2)]
    # a fallback's own lookups (a nearby key's pick) are not the call's keys
    nearby = tkc.autotune(space={"R": [16, 32], "factor": [2.0]}, name="t.nearby", key=lambda n, _: n,
                          fallback=lambda key: space.choose(key + 100))(scale_builder)
    with recording() as seen:
        nearby.choose(5)
    assert seen == [(nearby, 5)]
    assert space.example_of(2) == [2, 0] and space.example_of(9) is None
    # plans.forget drops the process's picks: the spaces' and the memos made of them (picks_memo)
    from tkc.torchops.norm_plans import ln_kernels
    from tkc.torchops.plans import forget
    ln_kernels(1024, False, False)
    assert 3 in space._picks and ln_kernels.cache_info().currsize > 0
    forget()
    assert not space._picks and ln_kernels.cache_info().currsize == 0


def test_first_call_tuning_of_a_lookup_without_arguments(monkeypatch, tmp_path):
    """TKC_AUTOTUNE=1 and a lookup without kernel arguments (how tkc's torch
    ops ask for a pick): the key is tuned at the first of the space's
    examples that makes it (found as fake tensors), and kept; a call that
    cannot tune now (no GPU, the fake driver, a capture, a trace) runs the
    untuned pick and keeps nothing, so a later call tunes the key."""
    pytest.importorskip("torch")
    from tkc.bench.fake_driver import fake_driver
    from tkc.runtime import driver
    from tkc.tune import measure, space as space_module
    from tkc.tune.measure import Result
    monkeypatch.setattr(tables, "user_path", lambda device=None: tmp_path / "tuned.json")
    monkeypatch.setenv("TKC_AUTOTUNE", "1")
    t = tkc.autotune(space={"R": [16, 32], "factor": [2.0]}, name="t.first_call", key=lambda n, _: n,
                     examples=lambda: [[1, 0], [2, 0], [3, 0]])(scale_builder)
    tuned_at = []

    def tune(tuned, args, **kw):
        tuned_at.append(list(args))
        return Result({"R": 32, "factor": 2.0}, tuned.key(args), [])
    monkeypatch.setattr(measure, "tune", tune)
    assert not space_module._can_tune_now()   # (no GPU here)
    assert t.choose(2) == t.default and 2 not in t._picks and tuned_at == []   # left for later
    monkeypatch.setattr(space_module, "_can_tune_now", lambda: True)
    assert t.choose(2) == {"R": 32, "factor": 2.0} and tuned_at == [[2, 0]]
    assert t.choose(2) == {"R": 32, "factor": 2.0} and tuned_at == [[2, 0]]   # kept: tuned once
    assert t.choose(9) == t.default and tuned_at == [[2, 0]]   # no example makes key 9: the default
    with fake_driver():
        assert driver.is_fake()
    assert not driver.is_fake()
