"""`tkc fuzz`: run the checks over a range of programs of one seed.

    tkc fuzz --seed S --count N [--start I] [-j J]      passes + refusals, on the CPU
    tkc fuzz --seed S --count N --build DIR [-j J]      also compile each program into the
                                                        artifact cache and write the
                                                        interpreter's outputs to DIR
    tkc fuzz --seed S --count N --gpu DIR               on a GPU machine (TKC_OFFLINE=1, no
                                                        MLIR): run each cached kernel, compare
                                                        with DIR's outputs
    tkc fuzz --ops --seed S --count N [--fake]          tkc's torch ops at random shapes against
                                                        PyTorch (ops.py, ops_run.py)

Program i of seed S is generate(S, i) (and refusal(S, i)): the same text, so
the same artifact key, on both machines. Failures print as the program's
source with what went wrong; the exit status is 1 if there was any.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from collections import Counter
from pathlib import Path

from ..diagnostics import at_least


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tkc fuzz", description="Generate tile programs and check "
                                "the passes, the verifier's refusals and (--build/--gpu) the GPU.")
    p.add_argument("--seed", type=at_least(0), default=0)
    p.add_argument("--count", type=at_least(1), default=100)
    p.add_argument("--start", type=at_least(0), default=0, help="first program index (default 0)")
    p.add_argument("-j", "--jobs", type=at_least(1), default=1, help="worker processes (CPU checks and --build)")
    p.add_argument("--build", metavar="DIR", help="compile each program into the artifact cache "
                   "and write the interpreter's outputs to DIR")
    p.add_argument("--gpu", metavar="DIR", help="run the cached kernels on the GPU against DIR's outputs")
    p.add_argument("--no-refusals", action="store_true", help="only the well-typed programs")
    p.add_argument("-q", "--quiet", action="store_true", help="print failures' first lines only")
    p.add_argument("--ops", action="store_true", help="call tkc's torch ops at random shapes instead and "
                   "check them against PyTorch (on the GPU; docs/fuzz.md, \"Ops\")")
    p.add_argument("--fake", action="store_true", help="with --ops: on a CPU through the fake driver "
                   "(served or refused where they should be; no values)")
    return p


def _gpu_dir_problem(root: Path, seed: int) -> str | None:
    """Why --gpu DIR cannot check seed `seed` at all (None: it can): --build
    writes DIR/<seed>/<index>.npz, so a run must name the seed it built."""
    if (root / str(seed)).is_dir():
        return None
    seeds = sorted(d.name for d in root.iterdir() if d.is_dir() and d.name.lstrip("-").isdigit()) \
        if root.is_dir() else []
    if not seeds:
        return f"--gpu {root}: no programs built there (run --build {root} first, where MLIR is)"
    held = ", ".join(f"{s} ({len(list((root / s).glob('*.npz')))} programs)" for s in seeds)
    return (f"--gpu {root}: no programs of seed {seed} there; it holds seed {held}: pass the --seed "
            f"and --count its --build ran with")


def main(argv: list[str]) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.ops:
        from .ops_run import run_ops
        return run_ops(args)
    indices = range(args.start, args.start + args.count)
    t0 = time.time()
    if args.gpu:
        problem = _gpu_dir_problem(Path(args.gpu), args.seed)
        if problem:
            p.error(problem)
        from .gpu import run_range
        stream = run_range(args.seed, indices, Path(args.gpu), args.quiet)
    else:
        work = [(args.seed, i, args.build, not args.no_refusals) for i in indices]
        stream = _map(check_one, work, args.jobs)
    results = []
    for r in stream:  # failures as they come, and a progress line every 500 programs
        results.append(r)
        for f in r["failures"]:
            print(f.splitlines()[0] if args.quiet else f, flush=True)
        if len(results) % 500 == 0:
            bad = sum(len(x["failures"]) for x in results)
            print(f"... {len(results)} programs, {bad} failures, {time.time() - t0:.0f} s",
                  file=sys.stderr, flush=True)
    print(summary(args, results, time.time() - t0))
    return 1 if any(r["failures"] for r in results) else 0


def _map(fn, work: list, jobs: int) -> list:
    """fn over work, in order, as an iterator (in `jobs` processes)."""
    if jobs <= 1:
        yield from map(fn, work)
        return
    import multiprocessing
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with ctx.Pool(jobs) as pool:
        yield from pool.imap(fn, work, chunksize=4)


def check_one(work) -> dict:
    """The checks of program `index` (and its refusal twin): a result dict of
    failure reports (str), the program's features, and counts."""
    seed, index, build, refusals = work
    from .checks import check_passes, check_refusal
    from .generate import generate
    out = {"failures": [], "features": [], "programs": 1, "refusals": 0, "built": 0}
    with contextlib.redirect_stderr(io.StringIO()):  # layout selection's bank-conflict warnings
        p = generate(seed, index)
        out["features"] = sorted(p.features)
        f, results = check_passes(p)
        if f is not None:
            out["failures"].append(f.report())
        elif build:
            from .gpu import build_one
            msg = build_one(p, results, Path(build))
            out["built"] = msg is None
            if msg:
                out["failures"].append(msg)
        if refusals:
            from .refusals import refusal
            f = check_refusal(refusal(seed, index))
            out["refusals"] = 1
            if f is not None:
                out["failures"].append(f.report())
    return out


def summary(args, results: list, seconds: float) -> str:
    n = sum(r["programs"] for r in results)
    refused = sum(r["refusals"] for r in results)
    bad = sum(len(r["failures"]) for r in results)
    what = "on the GPU" if args.gpu else "passes" + (" + build" if args.build else "")
    feats = Counter(f for r in results for f in r["features"])
    line = (f"tkc fuzz: seed {args.seed}, programs {args.start}..{args.start + args.count - 1}: "
            f"{n} programs ({what})" + (f", {refused} refusals" if refused else "")
            + f", {bad} failures, {seconds:.1f} s")
    if feats and not args.quiet:
        line += "\nfeatures: " + ", ".join(f"{k} {v}" for k, v in sorted(feats.items()))
    return line


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
