"""Tuning one key of an autotuned kernel (tkc.autotune): build, check, time, record.

1. Build. Every candidate (the author's prune applied) is built as `tkc
   build` builds (tkc.building: the cache's artifacts read, the rest
   compiled in parallel processes). A candidate the compiler refuses (the
   verifier, a shared-memory or register budget, ptxas), that spills
   beyond its allowance or whose wgmma ptxas serialises (an error to `tkc
   build`: the library could not hold it) is pruned, with the reason; offline (TKC_OFFLINE=1,
   no MLIR) a candidate missing from the cache is pruned as not built. The
   default must build.
2. Check. The default runs on copies of the arguments; every other candidate
   runs on fresh copies, and each tensor argument after its call (outputs,
   and inputs it may not touch) must match the default's within the dtype's
   tolerance, NaNs where the default's are; else it is rejected, as is one
   that refuses the arguments (its tiles do not divide their shapes).
3. Time. Each candidate's call on copies of the arguments, replayed from a
   CUDA graph (tkc.bench.timing), interleaved over `rounds` rounds so that a
   clock change hits every candidate alike, each round in its own order (a
   shuffle seeded by the round: what runs just before weighs on a timing, so
   no candidate may always follow the same one); a candidate's time is its
   median. After the first round only a shortlist runs on: the candidates
   within SHORTLIST of that round's fastest, and the default. The margin is
   wide because a round can hold a clock change (the H200's tkc.matmul
   picks, 352 keys: their rounds spread 2% at the median, 25% at the 99th
   percentile); there 36% of a key's candidates were within 1.5x of its
   best, so a key's later rounds cost about a third. Then the finalists, the
   FINALISTS fastest by their medians and the default, run FINAL x rounds
   rounds more, alone: the pick rests on those rounds too (the others' rows
   keep their times of the first rounds). Three rounds decided too little:
   tuned twice (H200, 12-01), 25 tkc.matmul keys of 3840-16384 rows got 9
   different picks, and at two keys one run kept the default where the
   other's pick ran 1.5-6% faster in both runs (not in all 3 rounds).
   With flush_l2 each call follows a write of twice the L2, whose own time
   is subtracted.
4. Pick. A candidate replaces the default only where it is faster beyond
   the noise: by more than MARGIN in the median of its rounds' ratios to the
   default's (each round's pair timed close together, so a clock change
   between rounds cancels) and in at least three quarters of the rounds.
   (The default here is what the key runs untuned: the space's fallback
   for it where the space has one.) The fastest such candidate is the
   pick, else the default: a difference
   within the noise (the 700 W cap spreads an H200's rounds 10-20%) keeps
   the hand pick, and tables stay put when tuning runs again.
5. Record. The pick goes into this machine's table (tables.py) with every
   candidate's time and why the others were pruned or rejected.

Challenging a pick (`tkc tune --challenge`): `challengers` (a predicate on
configurations) narrows the candidates to those it accepts, the default
(the outputs' reference) and what the key runs now (its table's pick, else
the fallback's), which is then the one to beat: a new schedule tried
against the tuned picks without timing the whole space again. With
`warm` (`--warm`, for a space timed with a cold L2; or a timer, as the
tests' fake one) a winner must also run no slower than what the key runs
now in CUDA graphs with a warm L2, as a model's repeated call sees it (H200, 12-02: of 36
tkc.matmul keys where sliced-K won >= 3% cold, 6 ran slower warm). A pick that does not build
(offline: not built) is an error for its key, not replaced by the default.

timer(kernel, args) -> µs, run(kernel, args) -> tensors and compare(ref,
out) -> None or a reason replace steps 2 and 3's GPU work (the CPU tests use
them: a fake timer, the interpreter).
"""
from __future__ import annotations

import functools
import inspect
import math
import random
import statistics
import sys
from typing import Callable, NamedTuple

from ..diagnostics import TkcError
from .configs import config_text

__all__ = ["Result", "tune"]

TOLERANCE = {"bfloat16": 2e-2, "float16": 1e-2, "float32": 1e-3, "float64": 1e-9}
MARGIN = 0.01   # the least gain over the default (median of the paired rounds) that counts
SHORTLIST = 1.5   # after the first round, only candidates within this of its fastest run on
FINALISTS, FINAL = 3, 2   # after the rounds, the 3 fastest and the default run 2 x rounds more


class Result(NamedTuple):
    """A key's tuning: the best configuration, and per candidate a row
    {config, status: best | ok | pruned | rejected, us, spread, why}: us the
    median over the rounds, spread (max - min) / median of them, the noise a
    difference between two candidates must exceed to mean anything."""
    best: dict
    key: object
    rows: list

    def table(self) -> str:
        """The rows as text, fastest first (for `tkc tune` and a notebook)."""
        rows = sorted(self.rows, key=lambda r: (r["us"] is None, r["us"] or 0))
        lines = [f"{'configuration':48} {'µs':>9} {'spread':>7}  status"]
        for r in rows:
            us = f"{r['us']:9.2f} {r['spread']:6.1%}" if r["us"] is not None else " " * 16
            lines.append(f"{config_text(r['config']):48} {us}  {r['status']}"
                         + (f": {r['why']}" if r["why"] else ""))
        return "\n".join(lines)


def tune(tuned, args, *, rounds: int = 5, jobs: int | None = None, timer=None,
         run=None, compare=None, record: bool = True, progress=None,
         challengers: Callable | None = None, warm=False) -> Result:
    """Tune the key of `args` for `tuned` (a space.Autotuned; see the module docstring): the Result."""
    key = tuned.key(args)
    configs = tuned.candidates(key)
    now = _running(tuned, key, challengers is not None)
    if challengers is not None:
        keep = {config_text(tuned.default), config_text(now)}
        configs = [c for c in configs if challengers(c) or config_text(c) in keep]
    rows = {config_text(c): {"config": c, "status": "ok", "us": None, "spread": None, "why": ""}
            for c in configs}
    kernels = _build(tuned, configs, rows, jobs, progress)
    default = config_text(tuned.default)
    if default not in kernels:
        raise TkcError(f"autotune {tuned.name}: the default configuration {default} does not "
                       f"build: {rows[default]['why']}", tuned.where)
    held = config_text(now)
    if challengers is not None and held not in kernels:   # (else the default would stand in for it)
        raise TkcError(f"autotune {tuned.name}: the pick being challenged at {key!r}, {held}, does not "
                       f"build: {rows[held]['why'] if held in rows else 'not a candidate of the key'}", tuned.where)
    run = run or _run_gpu
    compare = compare or _compare
    reference = run(kernels[default], args)
    for text, k in list(kernels.items()):
        if text == default:
            continue
        try:
            why = compare(reference, run(k, args))
            why = why and f"output differs from the default's: {why}"
        except TkcError as e:  # the candidate cannot take these arguments (a tile's multiple)
            why = f"refuses these arguments: {e.message}"
        if why:
            rows[text].update(status="rejected", why=why)
            del kernels[text]
    untuned = held if held in kernels else default
    times = _time(kernels, args, rounds, timer or _gpu_timer(tuned.flush_l2), untuned, rows)
    for text, ts in times.items():
        rows[text]["us"] = statistics.median(ts)
        rows[text]["spread"] = (max(ts) - min(ts)) / rows[text]["us"] if rows[text]["us"] else 0.0
    most = max(len(ts) for ts in times.values())   # the finalists' rounds (the default's)
    best = _pick({t: ts for t, ts in times.items() if len(ts) == most}, untuned, rows)
    if warm and tuned.flush_l2 and best != untuned:   # ... and no slower warm than what the key runs now
        pair = _time({t: kernels[t] for t in (untuned, best)}, args, rounds,
                     warm if callable(warm) else _gpu_timer(False), untuned, rows)
        ratio = statistics.median(u / b if b > 0 else float("inf") for u, b in zip(pair[untuned], pair[best]))
        if ratio < 1.0:
            rows[best]["why"] = f"slower with a warm L2: {ratio:.3f}x what the key runs now"
            best = untuned
    rows[best]["status"] = "best"
    result = Result(rows[best]["config"], key, list(rows.values()))
    if record:
        from . import tables
        tables.record(tuned.name, key, {
            "config": result.best, "us": rows[best]["us"], "spread": round(rows[best]["spread"], 4),
            "untuned": untuned, "candidates": {t: r["us"] for t, r in rows.items() if r["us"] is not None},
            "rejected": {t: r["why"] for t, r in rows.items() if r["status"] in ("pruned", "rejected")}})
    return result


def _running(tuned, key, tabled: bool) -> dict:
    """What the key runs untuned: the fallback's pick (else the default); with
    `tabled`, its table's pick first (a pick being challenged)."""
    held = tuned.held(key) if tabled else None
    if held is not None:
        return held
    return tuned.fallback(key) if tuned.fallback is not None else tuned.default


def _time(kernels: dict, args, rounds: int, timer, default: str, rows: dict) -> dict:
    """Each candidate's times, a round each (see the module docstring): all
    of them in the first round, then the shortlist and the default, then
    the finalists and the default."""
    times: dict = {text: [] for text in kernels}
    live = list(kernels)
    for r in range(rounds):
        for text in random.Random(r).sample(live, len(live)):
            times[text].append(timer(kernels[text], args))
        if r == 0 and rounds > 1:
            fastest = min(times[t][0] for t in live)
            for t in live:
                if t != default and times[t][0] > SHORTLIST * fastest:
                    rows[t]["why"] = f"off the shortlist: {times[t][0] / fastest:.2f}x the first round's fastest"
            live = [t for t in live if t == default or times[t][0] <= SHORTLIST * fastest]
    finalists = sorted((t for t in live if t != default), key=lambda t: statistics.median(times[t])) \
        if rounds > 1 else []
    if finalists:
        for t in finalists[FINALISTS:]:
            rows[t]["why"] = rows[t]["why"] or f"not among the {FINALISTS} fastest after {rounds} rounds"
        live = [default, *finalists[:FINALISTS]]
        for r in range(rounds, rounds * (1 + FINAL)):
            for text in random.Random(r).sample(live, len(live)):
                times[text].append(timer(kernels[text], args))
    return times


def _pick(times: dict, default: str, rows: dict) -> str:
    """The fastest candidate that beats the default beyond the noise (see
    the module docstring), else the default; a candidate faster only within
    it says so in its row."""
    base, winners = times[default], []
    for text, ts in times.items():
        if text == default:
            continue
        ratios = [b / t if t > 0 else float("inf") for b, t in zip(base, ts)]
        gain, faster = statistics.median(ratios) - 1, sum(r > 1 for r in ratios)
        if gain > MARGIN and faster >= math.ceil(0.75 * len(ratios)):
            winners.append(text)
        elif rows[text]["us"] < rows[default]["us"]:
            rows[text]["why"] = (f"within the noise: {gain:+.1%} on the default, faster in {faster} of "
                                 f"{len(ratios)} rounds")
    return min(winners, key=lambda t: rows[t]["us"]) if winners else default


def _build(tuned, configs: list, rows: dict, jobs, progress) -> dict:
    """{config text: Kernel} of the candidates that build; the others' rows say why."""
    from ..building import build_all
    from ..runtime import cache
    kernels, texts = [], []
    for c in configs:
        text = config_text(c)
        try:
            k = tuned.kernel(c)
        except TkcError as e:
            rows[text].update(status="pruned", why=e.message)
            continue
        except (ValueError, TypeError) as e:  # the builder refuses the configuration
            rows[text].update(status="pruned", why=f"{type(e).__name__}: {e}")
            continue
        if cache.offline() and not cache.entry_dir(k.artifact_key()).is_dir():
            rows[text].update(status="pruned", why="not built (offline: tkc build it first)")
            continue
        kernels.append(k)
        texts.append(text)
    files, jobs = _files(tuned, jobs)
    built = {}
    for text, k, row in zip(texts, kernels, build_all(kernels, False, jobs, files, progress or _Silent())):
        if row["error"]:
            rows[text].update(status="pruned", why=row["error"].splitlines()[0])
        elif row["over"]:
            rows[text].update(status="pruned", why=f"spills registers ({row['spills']})")
        elif row.get("wgmma") == "serialised":   # (tkc build's error too: the library could not hold it)
            rows[text].update(status="pruned", why="ptxas serialises its wgmma")
        else:
            built[text] = k
    return built


def _files(tuned, jobs):
    """The file a spawned build worker imports to make the candidates again
    (none for a builder in a package module, which the library lists, or in
    __main__, which a worker cannot import: then one process builds). A
    functools.partial is its function's (its own __module__ is functools)."""
    builder = tuned.builder
    while isinstance(builder, functools.partial):
        builder = builder.func
    name = getattr(builder, "__module__", None)
    module = sys.modules.get(name)
    if module is None or name == "__main__":
        return (), 1
    if name.startswith("tkc."):
        return (), jobs
    try:
        return (inspect.getfile(module),), jobs
    except TypeError:
        return (), 1


class _Silent:
    """A progress that shows nothing (tuning at a call is quiet)."""

    def __getattr__(self, name) -> Callable:
        return lambda *a, **k: None


def _copies(args) -> list:
    return [a.clone() if hasattr(a, "clone") else a for a in args]


def _run_gpu(kernel, args) -> list:
    """The tensor arguments after one call of kernel on copies of args."""
    import torch
    copies = _copies(args)
    kernel(*copies)
    torch.cuda.synchronize()
    return [a for a in copies if isinstance(a, torch.Tensor)]


def _compare(reference: list, outputs: list) -> str | None:
    """None when outputs match reference (per tensor, within its dtype's tolerance)."""
    import torch
    for i, (r, o) in enumerate(zip(reference, outputs)):
        if not r.is_floating_point():
            if not torch.equal(r, o):
                return f"tensor argument {i} (integers) differs"
            continue
        tol = TOLERANCE.get(str(r.dtype).removeprefix("torch."), 1e-3)
        r64, o64 = r.double(), o.double()
        if not torch.equal(r64.isnan(), o64.isnan()):
            return f"tensor argument {i}: NaN where the default has none (or the reverse)"
        r64, o64 = r64.nan_to_num(), o64.nan_to_num()
        err = float((o64 - r64).abs().max()) if r.numel() else 0.0
        scale = float(r64.abs().max()) if r.numel() else 0.0
        if err > tol * max(scale, 1e-6):
            return f"tensor argument {i}: max |difference| {err:.3g} against {tol:g} x max |value| {scale:.3g}"
    return None


def _gpu_timer(flush_l2: bool):
    """timer(kernel, args) -> µs per call: CUDA events around replays of a
    CUDA graph of INNER calls, captured once per candidate (on its own copies
    of the arguments); the median of REPS replays. With flush_l2 the graph
    also writes twice the L2 before each call, and that write's time alone
    (its own graph) is subtracted."""
    import torch

    from ..bench.timing import captured, replay_ms
    held: dict = {}
    inner, reps = 10, 5

    def replay_us(graph) -> float:
        return replay_ms(graph, reps, inner) * 1e3

    def timer(kernel, args) -> float:
        # a graph per kernel object, which its entry keeps alive: a kernel made
        # anew (a lambda) cannot take a dead one's id and replay its graph
        kept = held.get(id(kernel))
        if kept is None or kept[0] is not kernel:
            copies = _copies(args)
            if flush_l2 and "junk" not in held:
                l2 = torch.cuda.get_device_properties(0).L2_cache_size
                held["junk"] = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")
                held["flush"] = captured(lambda: held["junk"].fill_(1.0), inner)
            call = (lambda: (held["junk"].fill_(1.0), kernel(*copies))) if flush_l2 else \
                (lambda: kernel(*copies))
            kept = held[id(kernel)] = (kernel, captured(call, inner), copies)   # (copies: alive with the graph)
        us = replay_us(kept[1])
        return max(us - replay_us(held["flush"]), 0.0) if flush_l2 else us
    return timer
