"""The GPU check, in two halves on two machines.

Here (MLIR): build_one compiles a program into the artifact cache
($TKC_CACHE_DIR) and writes what the interpreter computed to
DIR/<seed>/<index>.npz (the outputs, a digest of the inputs).
There (a GPU, no MLIR, TKC_OFFLINE=1): run_gpu regenerates the program and its
inputs from (seed, index), launches the cached kernel on torch tensors and
compares its outputs with the file's (checks.compare_gpu). Nothing here
imports MLIR at module level; run_gpu never does.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .checks import Failure, _crash, compare_gpu
from .core import Program
from .generate import generate
from .program import arrays, digest, kernel_of


def expected_path(root: Path, p: Program) -> Path:
    return root / str(p.seed) / f"{p.index}.npz"


def build_one(p: Program, outputs: list, root: Path) -> str | None:
    """Compile p into the cache and save the interpreter's outputs; a failure
    report, or None."""
    from ..diagnostics import TkcError
    try:
        kernel_of(p).build()
    except TkcError as e:
        return Failure(p, "gpu", "compile", f"a well-typed program does not compile: {e}").report()
    except Exception as e:  # noqa: BLE001
        return Failure(p, "gpu", "compile", f"crash: {_crash(e)}").report()
    path = expected_path(root, p)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, digest=np.array(digest(arrays(p))), *outputs)
    return None


def run_range(seed: int, indices, root: Path, quiet: bool = False):
    """run_gpu over indices. A kernel that faults (an illegal address) leaves
    the process's CUDA context unusable: the rest then run in a new process."""
    indices = list(indices)
    for n, i in enumerate(indices):
        r = run_gpu(seed, i, root)
        yield r
        if r["context_lost"] and indices[n + 1:]:
            yield _in_new_process(seed, indices[n + 1:], root, quiet)
            return


def _in_new_process(seed: int, rest: list, root: Path, quiet: bool) -> dict:
    import subprocess
    import sys
    cmd = [sys.executable, "-m", "tkc.cli", "fuzz", "--seed", str(seed), "--start", str(rest[0]),
           "--count", str(len(rest)), "--gpu", str(root)] + (["-q"] if quiet else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    reports = done.stdout.split("FAIL ")[1:]  # each failure's report starts a line with FAIL
    return {"failures": ["FAIL " + r.split("\ntkc fuzz: ")[0].rstrip() for r in reports],
            "features": [], "programs": len(rest), "refusals": 0, "built": 0, "context_lost": False}


def run_gpu(seed: int, index: int, root: Path) -> dict:
    """One program on the GPU against the interpreter's outputs."""
    p = generate(seed, index)
    out = {"failures": [], "features": sorted(p.features), "programs": 1, "refusals": 0, "built": 0,
           "context_lost": False}
    f = _run(p, root)
    if f is not None:
        out["failures"].append(f.report())
        out["context_lost"] = f.stage == "launch" and "CUDA error" in f.message
    return out


def _run(p: Program, root: Path) -> Failure | None:
    import torch
    path = expected_path(root, p)
    if not path.exists():
        return Failure(p, "gpu", "expected", f"no {path}: run `tkc fuzz --seed {p.seed} --start {p.index} "
                                             f"--count 1 --build {root}` where MLIR is")
    saved = np.load(path)
    xs = arrays(p)
    if str(saved["digest"]) != digest(xs):
        return Failure(p, "gpu", "inputs", "this machine generated other inputs than the build's")
    want = [saved[f"arr_{j}"] for j in range(len(saved.files) - 1)]
    try:
        ts = [_on_gpu(torch, a, x) for a, x in zip(p.args, xs)]
        kernel_of(p)(*ts)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        return Failure(p, "gpu", "launch", f"{type(e).__name__}: {e}")
    got = [t.cpu().numpy() if a.dtype in ("i32", "i64") else t.float().cpu().numpy()
           for a, t in zip(p.args, ts) if a.output]
    for a, t in zip(p.args, ts):   # a strided output's pad: never written
        if a.output and a.pad and not bool((t._base[..., t.shape[-1]:] == 0.5).all()):
            return Failure(p, "gpu", "compare", f"output {a.name} was written outside its view (its pad)")
    return compare_gpu(p, got, want)


def _on_gpu(torch, a, x):
    """Argument x on the GPU in its gl's dtype; a strided gl's as a view of its
    wider rows there too (its strides, not a contiguous copy's: the view's
    `_base` is the whole array, which the pad check reads)."""
    dtype = {"i32": None, "i64": None, "bf16": torch.bfloat16, "f8e4m3": torch.float8_e4m3fn,
             "f8e5m2": torch.float8_e5m2}.get(a.dtype, torch.float32)
    whole = np.lib.stride_tricks.as_strided(x, x.shape[:-1] + (x.shape[-1] + a.pad,), x.strides) if a.pad else x
    t = torch.from_numpy(np.ascontiguousarray(whole)).cuda()
    t = t if dtype is None else t.to(dtype)
    return t[..., :x.shape[-1]] if a.pad else t
