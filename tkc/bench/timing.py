"""Timing on the GPU: CUDA events around many launches, median of repeats."""
from __future__ import annotations

import statistics


def bench(fn, *, warmup: int = 10, reps: int = 50, inner: int = 5) -> float:
    """Median milliseconds of one call of fn (events around `inner` calls)."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times)


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12
