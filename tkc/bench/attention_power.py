"""The SM clock and board power while one attention runs alone, tkc's against SDPA-cuDNN's.
Each contender is replayed from a CUDA graph for a few seconds while nvidia-smi samples every
50 ms (the first quarter of the samples dropped): the forward alone, then forward and backward
in one graph (as bench/attention.py times the backward). On the H100 both run at the 700 W board
limit, so their clocks, and the ratio at boost clocks, follow energy per call (docs/attention.md).

    python3 -m tkc.bench.attention_power     (on the GPU machine; the library's kernels)
"""
import statistics
import subprocess
import time

ROWS = [(64, False, 1024), (128, False, 1024), (64, False, 4096), (128, False, 4096)]  # (D, causal, L)
SECONDS = 2.5
INNER = 20                  # calls a graph replay


def sustained(name: str, fn) -> None:
    """Replay fn for SECONDS; print µs a call and the median SM clock and power meanwhile."""
    import torch

    from tkc.bench.timing import captured
    graph = captured(fn, INNER)
    graph.replay()
    torch.cuda.synchronize()
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                            "--format=csv,noheader,nounits", "-lms", "50"], stdout=subprocess.PIPE, text=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0, n = time.time(), 0
    start.record()
    while time.time() - t0 < SECONDS:
        graph.replay()
        n += 1
        if n % 20 == 0:          # keep the queue short
            torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    smi.terminate()
    samples = [[float(x) for x in line.split(",")] for line in smi.communicate()[0].splitlines() if line.strip()]
    samples = samples[len(samples) // 4:]
    clock, power = (statistics.median(s[i] for s in samples) for i in (0, 1))
    us = start.elapsed_time(end) * 1e3 / (n * INNER)
    print(f"{name:26} {us:9.1f} us a call   SM clock {clock:5.0f} MHz (min {min(s[0] for s in samples):.0f})"
          f"   power {power:6.1f} W", flush=True)


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    import tkc
    torch.manual_seed(0)
    for D, causal, L in ROWS:
        shape = (16384 // L, 16, L, D)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        do = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return sdpa(q, k, v, is_causal=causal)
        fwds = {"tkc": lambda: tkc.attention(q, k, v, causal=causal), "cudnn": cudnn}
        row = f"D{D}{' causal' if causal else ''} L{L}"
        with torch.no_grad():
            for _ in range(2):
                for who, f in fwds.items():
                    sustained(f"fwd {row} {who}", f)
        for who, f in fwds.items():
            sustained(f"fwd+bwd {row} {who}", lambda f=f: torch.autograd.grad(f(), (q, k, v), do))


if __name__ == "__main__":
    main()
