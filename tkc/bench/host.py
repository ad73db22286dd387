"""Host time per eager op call, beside the nearest torch call: what a model
author's Python pays per op when the inputs are too small for the GPU to be
the bottleneck; the fwd+bwd rows also beside their floor (`floor`: a Python
autograd.Function that only allocates: tkc's ops wanting a gradient are Python Functions)
and with the backward on the calling thread (`calling`).

    python -m tkc.bench.host [--fake] [--calls N] [--rounds R] [--json FILE]

On a GPU: tiny inputs, `calls` calls per measurement with a synchronise at
each end, tkc's op and its peer interleaved over `rounds` rounds; the median
µs per call of each, and their ratio. With --fake (or without a GPU) the same
calls run on CPU tensors through tkc.bench.fake_driver: tkc's host work is
real (checks, keys, allocations, packing), the launches are stubs and the
torch peers run on the CPU, so only tkc's column means what it says there;
it is the calling thread's CPU time (time.thread_time: the fake runs
everything on it), which other processes on the machine do not inflate.
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time

from .timing import interleaved


def _wall_us(fn, calls: int, sync, clock=time.perf_counter) -> float:
    sync()
    t0 = clock()
    for _ in range(calls):
        fn()
    sync()
    return (clock() - t0) / calls * 1e6


def cases(device: str) -> dict:
    """{row: (tkc call, peer name, peer call)} on tiny inputs on device."""
    import contextlib

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import tkc
    from tkc.kernels import gemm_hopper

    bf = torch.bfloat16
    new = lambda *shape, grad=False: torch.randn(*shape, device=device, dtype=bf,  # noqa: E731
                                                 requires_grad=grad)
    q, qg = new(1, 1, 128, 64), new(1, 1, 128, 64, grad=True)
    qd, kd = new(1, 8, 1, 64), new(1, 2, 1024, 64)   # a decode step: 4 query heads a KV head
    a, b, c, wl = new(128, 64), new(64, 256), new(128, 256), new(256, 64)
    u = new(1, 8, 1024)
    kf = tkc.fftconv_filter(torch.randn(8, 1024, device=device), 1024)
    ql = new(1, 1, 64, 64)
    x, xg = new(64, 1024), new(64, 1024, grad=True)
    w, bias = torch.ones(1024, device=device, dtype=bf), torch.zeros(1024, device=device, dtype=bf)
    xr, xrg = new(1, 64, 1, 128), new(1, 64, 1, 128, grad=True)
    ang = torch.rand(64, 64, device=device)
    cos, sin = ang.cos().to(bf), ang.sin().to(bf)
    gemm = gemm_hopper("bf16")
    add = ("torch.add", lambda: torch.add(a, a))
    # a model's layers: one kernel at 128 call sites, each its own weight, in turn
    layers = [new(64, 256) for _ in range(128)]
    mine_w, theirs_w = itertools.cycle(layers), itertools.cycle(layers)
    sdpa = ("SDPA", lambda: F.scaled_dot_product_attention(q, q, q))
    # a decode step over a cache one key longer each call (transformers' DynamicCache): a new key every call;
    # SDPA on its flash backend (its default on the H200, cuDNN, plans each new key count: ~50 ms a call)
    kbuf = new(1, 2, 2048, 64)
    grown_mine, grown_theirs = (itertools.cycle([kbuf[:, :, :n] for n in range(1024, 2048)]) for _ in "ab")
    flash = (lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)) if device == "cuda" else contextlib.nullcontext

    def tkc_grown():
        k = next(grown_mine)
        return tkc.attention(qd, k, k)

    def sdpa_grown():
        k = next(grown_theirs)
        with flash():
            return F.scaled_dot_product_attention(qd, k, k, enable_gqa=True)
    return {
        "gemm_hopper kernel": (lambda: gemm(a, b, c), "torch.matmul", lambda: torch.matmul(a, b)),
        "tkc.matmul": (lambda: tkc.matmul(a, b), "torch.matmul", lambda: torch.matmul(a, b)),
        "tkc.matmul, 128 weights in turn": (lambda: tkc.matmul(a, next(mine_w)), "torch.matmul",
                                            lambda: torch.matmul(a, next(theirs_w))),
        "tkc.linear": (lambda: tkc.linear(a, wl), "F.linear", lambda: F.linear(a, wl)),
        "tkc.swiglu": (lambda: tkc.swiglu(a, wl, wl), "F.linear", lambda: F.linear(a, wl)),
        "tkc.attention": (lambda: tkc.attention(q, q, q), *sdpa),
        "tkc.attention decode (GQA 4:1, split keys)": (lambda: tkc.attention(qd, kd, kd), "SDPA",
                                                       lambda: F.scaled_dot_product_attention(qd, kd, kd,
                                                                                              enable_gqa=True)),
        "tkc.attention decode, growing cache": (tkc_grown, "SDPA (flash)", sdpa_grown),
        "tkc.attention causal": (lambda: tkc.attention(q, q, q, causal=True), "SDPA causal",
                                 lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True)),
        "tkc.attention fwd+bwd": (lambda: tkc.attention(qg, qg, qg).sum().backward(),
                                  "SDPA fwd+bwd",
                                  lambda: F.scaled_dot_product_attention(qg, qg, qg).sum().backward()),
        "tkc.fftconv": (lambda: tkc.fftconv(u, kf), *add),
        "tkc.linear_attention": (lambda: tkc.linear_attention(ql, ql, ql), *add),
        "tkc.layer_norm": (lambda: tkc.layer_norm(x, w, bias), "F.layer_norm",
                           lambda: F.layer_norm(x, (1024,), w, bias)),
        "tkc.layer_norm fwd+bwd": (lambda: tkc.layer_norm(xg, w, bias).sum().backward(),
                                   "F.layer_norm fwd+bwd",
                                   lambda: F.layer_norm(xg, (1024,), w, bias).sum().backward()),
        "tkc.rotary_embedding": (lambda: tkc.rotary_embedding(xr, cos, sin), *add),
        "tkc.rotary_embedding fwd+bwd": (lambda: tkc.rotary_embedding(xrg, cos, sin).sum().backward(),
                                         "x.mul(2) fwd+bwd", lambda: xrg.mul(2).sum().backward()),
        # the same fwd+bwd calls with the backward on the calling thread, not autograd's device thread
        # (torch.autograd.set_multithreading_enabled(False): what a host-bound loop can do; docs/torch-ops.md)
        "tkc.layer_norm fwd+bwd, calling thread": (calling(lambda: tkc.layer_norm(xg, w, bias).sum().backward()),
                                                   "F.layer_norm fwd+bwd, calling thread",
                                                   calling(lambda: F.layer_norm(xg, (1024,), w, bias).sum().backward())),
        "tkc.attention fwd+bwd, calling thread": (calling(lambda: tkc.attention(qg, qg, qg).sum().backward()),
                                                  "SDPA fwd+bwd, calling thread",
                                                  calling(lambda: F.scaled_dot_product_attention(qg, qg, qg).sum()
                                                          .backward())),
        # the same fwd+bwd calls beside their floor in Python: what is left above it is tkc's own work
        "tkc.attention fwd+bwd (floor)": (lambda: tkc.attention(qg, qg, qg).sum().backward(), *floor(1, qg, qg, qg)),
        "tkc.layer_norm fwd+bwd (floor)": (lambda: tkc.layer_norm(xg, w, bias).sum().backward(),
                                           *floor(2, xg, w, bias)),
    }


def calling(fn):
    """fn with autograd's engine running its backward on the calling thread
    (on a GPU the engine runs the backward's nodes on the device's thread,
    which a Python formula reaches through two thread handoffs)."""
    import torch

    def run():
        with torch.autograd.set_multithreading_enabled(False):
            return fn()
    return run


def floor(stats: int, *inputs) -> tuple:
    """(name, fwd+bwd call) of a Python autograd.Function that allocates and
    saves what a tkc op's forward does (its output like the first input, and
    `stats` f32 statistics a row) and allocates its inputs' gradients, but
    launches nothing: the host time an eager fwd+bwd through autograd's Python
    Functions cannot go below (the engine, the graph node, the Function's
    frames, the allocations), where torch's own ops run those steps in C++."""
    import torch

    class Floor(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *xs):
            ctx.set_materialize_grads(False)
            x = xs[0]
            kept = [torch.empty(x.shape[:-1], device=x.device, dtype=torch.float32) for _ in range(stats)]
            ctx.save_for_backward(*xs, *kept)
            return torch.empty_like(x)

        @staticmethod
        def backward(ctx, dy):
            saved = ctx.saved_tensors
            return tuple(torch.empty_like(saved[i]) if want else None
                         for i, want in enumerate(ctx.needs_input_grad))

    apply = torch._C._FunctionBase.__dict__["apply"].__get__(None, Floor)   # the C apply, as tkc's ops call it
    return "a Python Function's floor", lambda: apply(*inputs).sum().backward()


def measure(calls: int = 300, rounds: int = 5, fake: bool | None = None) -> dict:
    """{'mode', 'rows': {row: {tkc_us, peer, peer_us, ratio}}}."""
    import torch
    fake = not torch.cuda.is_available() if fake is None else fake
    if fake:
        from .fake_driver import fake_driver
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # torch's CPU work on this thread too, not spinning for others
        try:
            with fake_driver():  # the time: this thread's CPU time, which a shared machine's
                return {"mode": "fake driver (CPU time)",  # other work does not inflate
                        "rows": _rows(cases("cpu"), calls, rounds, lambda: None, time.thread_time)}
        finally:
            torch.set_num_threads(threads)
    return {"mode": torch.cuda.get_device_name(), "rows": _rows(cases("cuda"), calls, rounds,
                                                                 torch.cuda.synchronize)}


def _rows(table: dict, calls: int, rounds: int, sync, clock=time.perf_counter) -> dict:
    rows = {}
    for name, (mine, peer, theirs) in table.items():
        for fn in (mine, theirs):  # warm: kernels loaded, plans cached
            for _ in range(20):
                fn()
        us = interleaved({"tkc": mine, "peer": theirs}, rounds,
                         timer=lambda fn: _wall_us(fn, calls, sync, clock))
        tm, pm = statistics.median(us["tkc"]), statistics.median(us["peer"])
        rows[name] = {"tkc_us": round(tm, 1), "peer": peer, "peer_us": round(pm, 1),
                      "ratio": round(tm / pm, 2)}
    return rows


def table(result: dict) -> str:
    lines = [f"host µs per eager call ({result['mode']}); ratio = tkc / peer",
             f"{'call':32} {'tkc µs':>8}  {'peer':24} {'µs':>7} {'ratio':>6}"]
    for name, r in result["rows"].items():
        lines.append(f"{name:32} {r['tkc_us']:8.1f}  {r['peer']:24} {r['peer_us']:7.1f} "
                     f"{r['ratio']:6.2f}")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fake", action="store_true", help="the fake driver, even with a GPU")
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", help="also write the result here")
    opts = p.parse_args(argv)
    result = measure(opts.calls, opts.rounds, True if opts.fake else None)
    print(table(result))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
