"""Host time per eager launch of a library kernel: `k(a, b, c)` for
tkc.kernels.gemm("bf16") on three 128x128 bf16 tensors.

    python3 bench/launch_overhead.py [--calls N] [--fake] [--profile]

On a machine with a CUDA GPU and torch it measures the real path (argument
checks + cuLaunchKernel) next to a torch launch of the same size. Elsewhere
(or with --fake) it measures the host path with a fake CUDA driver: the
cuda-bindings module is replaced by Python stubs that return success, and
tensors (torch CPU tensors when torch is installed, else numpy arrays) pass
the device check as if they lived on cuda:0. Every other check still runs.
--profile prints the top of a cProfile of the timed loop.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tkc.bench.fake_driver import fake_cuda, fake_driver  # noqa: E402,F401 (tests use both)


# ---------------------------------------------------------------- measuring

def per_call_us(fn, calls: int, repeats: int = 5) -> float:
    """Best of `repeats` mean host times of `calls` calls of fn, in µs."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e6


def tensors_for(device: str | None):
    """Three 128x128 bf16 tensors: torch (on device) when torch is there, else
    16-byte aligned numpy f16 arrays (numpy has no bf16: see _pretend_bf16)."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        return [torch.randn(128, 128, dtype=torch.bfloat16, device=device or "cpu") for _ in range(3)]
    import numpy as np
    out = []
    for _ in range(3):
        raw = np.zeros(128 * 128 + 8, np.float16)
        skip = (-raw.ctypes.data % 16) // 2
        out.append(raw[skip:skip + 128 * 128].reshape(128, 128))
    return out


def run(calls: int = 2000, fake: bool | None = None, profile: bool = False) -> dict:
    """Measure; returns {'mode', 'tkc_us', 'launches' (fake) or 'torch_us' (GPU)}."""
    from tkc.kernels import gemm
    k = gemm("bf16")
    k.build()
    if not (_have_gpu() if fake is None else not fake):
        a, b, c = tensors_for(None)
        with fake_driver(bf16_from_f16=not _is_torch(a)) as cuda:
            us = _measure(lambda: k(a, b, c), calls, profile)
        return {"mode": "fake driver", "tkc_us": us, "launches": cuda.state.launches}
    import torch
    a, b, c = tensors_for("cuda")
    result = {"mode": "gpu", "torch_us": per_call_us(lambda: torch.add(a, b, out=c), calls),
              "tkc_us": _measure(lambda: k(a, b, c), calls, profile)}
    torch.cuda.synchronize()
    return result


def _measure(call, calls: int, profile: bool) -> float:
    us = per_call_us(call, calls)
    if profile:
        _profile(call, calls)
    return us


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _have_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _profile(fn, calls: int) -> None:
    import cProfile
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--fake", action="store_true", help="fake driver even on a GPU machine")
    p.add_argument("--profile", action="store_true")
    opts = p.parse_args(argv)
    r = run(opts.calls, fake=True if opts.fake else None, profile=opts.profile)
    line = f"tkc eager launch, gemm bf16 128x128 ({r['mode']}): {r['tkc_us']:.2f} us per call"
    if "torch_us" in r:
        line += f"; torch.add(out=) {r['torch_us']:.2f} us per call"
    print(line)


if __name__ == "__main__":
    main()
