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
import contextlib
import os
import sys
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---------------------------------------------------------------- fake driver

class _Handle(int):
    """A CUcontext/CUfunction stand-in: cuda-bindings handles convert with int()."""


def fake_cuda():
    """A namespace with the cuda.bindings.driver calls tkc.runtime.driver makes,
    each returning (CUDA_SUCCESS, ...) at the cost of one Python call."""
    ok = 0
    state = SimpleNamespace(current=_Handle(0), launches=0, last=None, set_current=0, result=ok)

    def set_current(ctx):
        state.current = ctx
        state.set_current += 1
        return (ok,)

    def launch(*args):
        state.launches += 1
        state.last = args
        return (state.result,)

    return SimpleNamespace(
        CUresult=SimpleNamespace(CUDA_SUCCESS=ok),
        CUdevice_attribute=SimpleNamespace(
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR=75,
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR=76,
            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN=97),
        CUfunction_attribute=SimpleNamespace(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8),
        CUstream=_Handle,
        cuInit=lambda flags: (ok,),
        cuDeviceGet=lambda ordinal: (ok, ordinal),
        cuDevicePrimaryCtxRetain=lambda dev: (ok, _Handle(1000 + dev)),
        cuCtxGetCurrent=lambda: (ok, state.current),
        cuCtxSetCurrent=set_current,
        cuDeviceGetAttribute=lambda attr, dev: (ok, {75: 9, 76: 0}.get(attr, 228 * 1024)),
        cuModuleLoadData=lambda image: (ok, _Handle(1)),
        cuModuleGetFunction=lambda module, name: (ok, _Handle(2)),
        cuFuncSetAttribute=lambda *args: (ok,),
        cuLaunchKernel=launch,
        state=state,
    )


@contextlib.contextmanager
def fake_driver(bf16_from_f16: bool = False):
    """Within: tkc.runtime uses fake_cuda(), and tensors the full checks see
    claim to be on cuda:0 (numpy f16 arrays claim bf16 if bf16_from_f16).
    Yields the fake (its .state counts launches); restores everything after."""
    from tkc.runtime import args, driver
    tables = (driver._contexts, driver._streams, driver._functions, driver._shared_optin)
    saved = (driver._cuda, args.view, [dict(t) for t in tables])
    real_view = args.view

    def view(obj, stream=None):
        v = real_view(obj, stream)
        if v is not None and bf16_from_f16 and v.dtype == "f16":
            v = v._replace(dtype="bf16")
        return v and v._replace(device="cuda")

    fake = fake_cuda()
    driver._cuda, args.view = fake, view
    for table in tables:  # what the real driver made stays out of the fake's way
        table.clear()
    try:
        yield fake
    finally:
        driver._cuda, args.view = saved[0], saved[1]
        for table, old in zip(tables, saved[2]):
            table.clear()
            table.update(old)


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
