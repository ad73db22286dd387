"""Where a warm compile's time goes: a kernel built again and again in one
process (tracing, every pass of the pipeline, LLVM to PTX, ptxas), the
median of each phase and of the whole build.

    python -m tkc.bench.compile_time [--repeats N] [KERNEL ...]
    python -m tkc.bench.compile_time --library N [--seed S]

KERNEL: gemm (the library GEMM, A·Bᵀ at its 128x256 tile: issue 39's
compile-time bar), attention (the D 128 forward), layer_norm (D 1024's
forward); all three by default. --library N: N kernels of `tkc build`'s
library drawn at random, each built once, their mean and each phase's
share of it: where a build of the whole library spends its time (three
quarters of its kernels are GEMMs, most smaller than the 128x256 one).
Needs MLIR; runs anywhere (no GPU). The
build's cache is a temporary folder, so nothing is read from or left in the
user's. The times are this machine's and its load's: compare phases of one
run, not runs of two machines.
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import statistics
import tempfile
import time

from tkc.diagnostics import at_least


def kernels() -> dict:
    """{name: a function returning the library kernel}."""
    def gemm():
        from tkc.kernels import gemm_hopper
        return gemm_hopper("bf16", True)

    def attention():
        from tkc.kernels import attention_hopper
        return attention_hopper(128, False, "bhld")

    def layer_norm():
        from tkc.kernels.layernorm import layernorm_fwd
        return layernorm_fwd(1024)
    return {"gemm": gemm, "attention": attention, "layer_norm": layer_norm}


def phases(kernel, repeats: int) -> tuple[list[float], dict[str, list[float]]]:
    """The whole build's seconds per repeat, and each phase's (after one
    build off the record: imports, first-use caches)."""
    kernel.build(force=True)
    return _builds([kernel] * repeats)


def sample(count: int, seed: int = 0) -> tuple[list[float], dict[str, list[float]]]:
    """Each build's seconds and each phase's, for `count` library kernels
    drawn at random (after a kernel off the record: imports, first-use
    caches)."""
    from tkc.kernels import library
    kernels = library()
    drawn = random.Random(seed).sample(kernels, min(count + 1, len(kernels)))
    drawn[0].build(force=True)
    return _builds(drawn[1:])


def _builds(kernels: list) -> tuple[list[float], dict[str, list[float]]]:
    """Each kernel built (forced: nothing reused), its seconds and its phases'."""
    from tkc.pass_pipeline import timed
    totals, by_phase = [], collections.defaultdict(list)
    for kernel in kernels:
        with timed() as record:
            t0 = time.perf_counter()
            kernel.build(force=True)
            totals.append(time.perf_counter() - t0)
        for name, seconds in _summed(record).items():
            by_phase[name].append(seconds)
    return totals, by_phase


def _summed(record: list[tuple[str, float]]) -> dict[str, float]:
    out = collections.defaultdict(float)
    for name, seconds in record:
        out[name] += seconds
    return out


def _label(phase: str) -> str:
    from tkc.compiler import TO_PTX_PIPELINE, UPSTREAM_PIPELINE
    return {UPSTREAM_PIPELINE: "upstream MLIR to the LLVM dialect", TO_PTX_PIPELINE: "LLVM to PTX"}.get(phase, phase)


def report(name: str, totals: list[float], by_phase: dict[str, list[float]]) -> str:
    total = statistics.median(totals)
    rows = [(_label(phase), statistics.median(v)) for phase, v in by_phase.items()]
    rows.append(("tracing, keys, the manifest (the rest)", total - sum(s for _, s in rows)))
    lines = [f"{name}: {total * 1e3:.0f} ms a warm build (median of {len(totals)}; "
             f"{min(totals) * 1e3:.0f}-{max(totals) * 1e3:.0f})"]
    lines += [f"  {s * 1e3:7.1f} ms  {phase}" for phase, s in rows]
    return "\n".join(lines)


def sample_report(totals: list[float], by_phase: dict[str, list[float]]) -> str:
    """The mean build of the drawn kernels and each phase's mean and share
    (means: a library build's time is their sum)."""
    n, total = len(totals), sum(totals)
    rows = [(_label(phase), sum(v)) for phase, v in by_phase.items()]
    rows.append(("tracing, keys, the manifest (the rest)", total - sum(s for _, s in rows)))
    lines = [f"library ({n} kernels drawn): {total / n * 1e3:.0f} ms a kernel (mean; median "
             f"{statistics.median(totals) * 1e3:.0f}, {min(totals) * 1e3:.0f}-{max(totals) * 1e3:.0f})"]
    lines += [f"  {s / n * 1e3:7.1f} ms  {s / total:4.0%}  {phase}" for phase, s in rows]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tkc.bench.compile_time", description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", nargs="*", help=f"of {', '.join(kernels())} (default: all)")
    ap.add_argument("--repeats", type=at_least(1), default=5)
    ap.add_argument("--library", type=at_least(1), metavar="N",
                    help="N library kernels drawn at random instead, each built once")
    ap.add_argument("--seed", type=int, default=0, help="--library's draw")
    args = ap.parse_args(argv)
    if args.library and args.kernel:
        ap.error("--library draws its kernels: name none")
    unknown = sorted(set(args.kernel) - set(kernels()))
    if unknown:
        ap.error(f"unknown kernel {', '.join(unknown)} (known: {', '.join(kernels())})")
    before = os.environ.get("TKC_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="tkc-compile-time-") as cache:
        os.environ["TKC_CACHE_DIR"] = cache
        try:
            if args.library:
                print(sample_report(*sample(args.library, args.seed)), flush=True)
            for name in () if args.library else args.kernel or kernels():
                print(report(name, *phases(kernels()[name](), args.repeats)), flush=True)
        finally:
            if before is None:
                del os.environ["TKC_CACHE_DIR"]
            else:
                os.environ["TKC_CACHE_DIR"] = before


if __name__ == "__main__":
    main()
