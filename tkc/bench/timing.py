"""Timing on the GPU: CUDA events around CUDA-graph replays, median of repeats.

Both tkc and its peers are timed as graph replays, so the numbers measure
the kernels, not Python launch overhead (which `launch_overhead_us`
measures on its own).
"""
from __future__ import annotations

import statistics
import time
from typing import NamedTuple


def captured(fn, inner: int):
    """A CUDA graph of `inner` calls of fn, captured after warm-up calls off
    the capture (module loads, autotuning)."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            fn()
    return graph


def bench(fn, *, reps: int = 30, inner: int = 10) -> float:
    """Median milliseconds of one call of fn, replayed from a CUDA graph."""
    import torch
    graph = captured(fn, inner)
    graph.replay()
    torch.cuda.synchronize()
    return replay_ms(graph, reps, inner)


def replay_ms(graph, reps: int, inner: int) -> float:
    """Median milliseconds of one of a captured graph's `inner` calls, over
    `reps` replays timed by CUDA events."""
    import torch
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times)


def burst_ms(fn, calls: int) -> float:
    """ms a call of `calls` eager calls in a row (CUDA events around the burst:
    host time included, as a model's stream of ops pays it)."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def interleaved(fns: dict, rounds: int = 5, timer=None, **kw) -> dict:
    """{name: [time per round]}: each round times every fn once, in turn, so a
    clock change under sustained load hits tkc and its peer alike; the odd
    rounds in reverse order (A B, B A, A B, ...), because what ran just before
    weighs on a timing: on the H200 a kernel timed right after cuDNN's
    attention read 2-4% slower than the same kernel timed after another
    (L 512-1024, CUDA graphs; a 5 ms warm-up of its own did not remove it), so a
    fixed order would charge one contender with the other's wake in every
    round. timer(fn) measures one fn (default: `bench`'s CUDA-graph ms, with kw)."""
    timer = timer or (lambda fn: bench(fn, **kw))
    out = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            out[name].append(timer(fns[name]))
    return out


def medians(fns: dict, rounds: int = 5, **kw) -> dict:
    """{name: median ms over the rounds} of `interleaved` (the probes' view)."""
    return {name: statistics.median(ms) for name, ms in interleaved(fns, rounds, **kw).items()}


def peer_line(med: dict, peer: str) -> str:
    """Each contender's median ms of `medians` and the peer's median over it."""
    return "  ".join(f"{n} {t:.3f} ms ({peer}/x {med[peer] / t:.2f})" for n, t in med.items())


def profile_once(fns) -> None:
    """Each of fns once between cudaProfilerStart and Stop, after a warm-up
    call of each (module loads, autotuning, cuDNN's plan): what `ncu
    --profile-from-start off` then measures."""
    import torch
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def profile_variants(config: str, fns: dict, rounds: int = 2) -> None:
    """For ncu at locked clocks (`--profile-from-start off`): each of fns
    (name: fn) `rounds` times, alternating, after a warm-up call of each;
    prints the launch list ("config|name" a line, in launch order) that
    `ncu_table` matches to ncu's CSV."""
    profile_once([fn for _ in range(rounds) for fn in fns.values()])
    for _ in range(rounds):
        print("\n".join(f"{config}|{name}" for name in fns), flush=True)


def ncu_table(csv_path, launches_path, kernels: str) -> list[str]:
    """The kernel times of ncu's CSV (`--csv --page raw --print-units base
    --metrics gpu__time_duration.sum`, the kernels whose name matches the
    regex `kernels`), matched to `profile_variants`' launch list: a line per
    configuration, each variant's mean µs and the first's time over it."""
    import csv
    import re
    rows = csv.DictReader(line for line in open(csv_path) if line.startswith('"'))
    times = [float(r["gpu__time_duration.sum"].replace(",", "")) for r in rows
             if re.match(kernels, r["Kernel Name"])]          # (the units row has no name)
    launches = [line.strip().split("|") for line in open(launches_path) if "|" in line]
    if len(times) != len(launches):
        raise ValueError(f"{len(times)} kernel times for {len(launches)} launches")
    table = {}
    for (config, name), t in zip(launches, times):
        table.setdefault(config, {}).setdefault(name, []).append(t / 1e3)
    lines = []
    for config, variants in table.items():
        base = statistics.mean(next(iter(variants.values())))
        cells = (f"{n} {statistics.mean(t):8.1f} us ({base / statistics.mean(t):.3f})" for n, t in variants.items())
        lines.append(f"{config:32} " + "  ".join(cells))
    return lines


def median_ratio(peer_ms: list, tkc_ms: list) -> float:
    """The median over rounds of peer time / tkc time (> 1: tkc is faster)."""
    return statistics.median(p / t for p, t in zip(peer_ms, tkc_ms))


class Pair(NamedTuple):
    tkc_ms: list     # per round
    peer_ms: list
    tkc: float       # medians
    peer: float
    ratio: float     # median_ratio: > 1, tkc is faster


def against(mine, peer, rounds: int = 5, **kw) -> Pair:
    """tkc's fn and its peer's, timed interleaved (`interleaved`)."""
    ms = interleaved({"tkc": mine, "peer": peer}, rounds=rounds, **kw)
    return Pair(ms["tkc"], ms["peer"], statistics.median(ms["tkc"]), statistics.median(ms["peer"]),
                median_ratio(ms["peer"], ms["tkc"]))


def launch_overhead_us(fn, n: int = 200) -> float:
    """Host microseconds per eager call of fn (argument checks + launch)."""
    import torch
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12


def tflops_lines(times: dict, peer: str, flops: float) -> list[str]:
    """For `interleaved`'s times: a line with the peer's median TFLOP/s, then
    one a contender with its median TFLOP/s and the median of the per-round
    ratios peer time / its time."""
    lines = [f"{peer} {tflops(flops, statistics.median(times[peer])):.0f} TF/s"]
    for name, t in times.items():
        if name != peer:
            lines.append(f"   {name:44} {tflops(flops, statistics.median(t)):6.0f} TF/s "
                         f"({median_ratio(times[peer], t):.3f}x {peer})")
    return lines
