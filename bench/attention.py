"""tkc.attention on the GPU next to its peers: SDPA's cuDNN and FlashAttention-2
backends and FlexAttention (torch.compile of flex_attention), forward and
backward, interleaved in rounds (each round times every contender once), the
median of the per-round ratios (METHOD.md; BENCHMARKS.md has the results).

    python bench/attention.py [--out FILE.json] [--quick] [--no-flex] [--flex-only] [--only 64c 128]

TFLOP/s: forward 4·B·H·Lq·Lk·D (halved when causal), backward 2.5x that (its
five matrix products against the forward's two). The backward is timed as
autograd.grad of a saved forward (tkc: the delta kernel, the backward kernel
and dQ's conversion to bf16; the peers: their own backward). Every
contender's output is checked against float32 before it is timed.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys

try:
    import torch
except ImportError:  # a CPU machine: main() says so
    torch = None

ROUNDS = 3
TIMING = dict(reps=10, inner=5)  # a 16k-token forward takes milliseconds: fewer replays suffice


FLEX = [(4, 4096, 64), (4, 4096, 128)]   # (B, L, D) with FlexAttention (compiled per shape: minutes)


def configs(quick: bool, flex_only: bool = False, only=()):
    """(B, H, L, D, causal) of each row; only: head dims to keep, "c" after
    one for its causal rows alone (e.g. 64c 128)."""
    shapes = [(16, 1024), (4, 4096), (1, 16384)] if not quick else [(4, 1024)]
    for D in (64, 128, 256):
        for causal in (False, True):
            if only and str(D) not in only and f"{D}{'c' if causal else 'n'}" not in only:
                continue
            for B, L in shapes:
                if not flex_only or (B, L, D) in FLEX:
                    yield B, 16, L, D, causal


def contenders(q, k, v, causal, flex: bool):
    import tkc
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    def backend(be):
        def run(q, k, v):
            with sdpa_kernel(be):
                return sdpa(q, k, v, is_causal=causal)
        return run
    out = {"tkc": lambda q, k, v: tkc.attention(q, k, v, causal=causal),
           "cudnn": backend(SDPBackend.CUDNN_ATTENTION),
           "flash": backend(SDPBackend.FLASH_ATTENTION)}
    if flex:
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            L = q.shape[2]
            mask = create_block_mask(lambda b, h, i, j: i >= j, None, None, L, L) if causal else None
            compiled = torch.compile(flex_attention)
            compiled(q, k, v, block_mask=mask)  # compile now: a failure drops the peer, not the run
            out["flex"] = lambda q, k, v: compiled(q, k, v, block_mask=mask)
        except Exception as e:  # noqa: BLE001 (report and go on)
            print(f"# FlexAttention unavailable: {type(e).__name__}: {str(e)[:200]}", flush=True)
    return out


def measure(B, H, L, D, causal, flex: bool) -> list[dict]:
    from tkc.bench.timing import interleaved, median_ratio, tflops
    q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    fns = contenders(q, k, v, causal, flex)
    ref = None
    outs, fwd, bwd = {}, {}, {}
    do = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
    for name, fn in fns.items():
        with torch.no_grad():
            o = fn(q, k, v)
        if ref is None:  # float32 reference of the first, once, a head at a time (L x L each)
            ref = torch.empty(B, H, L, D, device="cuda")
            future = torch.ones(L, L, device="cuda", dtype=torch.bool).triu(1) if causal else None
            for b in range(B):
                for h in range(H):
                    s = q[b, h].detach().float() @ k[b, h].detach().float().T / math.sqrt(D)
                    if causal:
                        s = s.masked_fill(future, -math.inf)
                    ref[b, h] = torch.softmax(s, -1) @ v[b, h].detach().float()
                    del s
        err = float((o.detach().float() - ref).norm() / ref.norm())
        outs[name] = err
        fwd[name] = (lambda fn=fn: fn(q, k, v))
        # forward and backward in one graph (a backward alone would replay on the
        # stream its forward ran on, outside the capture): bwd = both - forward
        bwd[name] = (lambda fn=fn: torch.autograd.grad(fn(q, k, v), (q, k, v), do))
    flops = 4.0 * B * H * L * L * D / (2 if causal else 1)
    rows = []
    fwd_times = None
    for phase, table, f in (("fwd", fwd, flops), ("bwd", bwd, 2.5 * flops)):
        times = interleaved(table, rounds=ROUNDS, **TIMING)
        if phase == "fwd":
            fwd_times = times
        else:
            times = {n: [b - a for a, b in zip(fwd_times[n], t)] for n, t in times.items()}
        row = {"phase": phase, "shape": f"B{B} H{H} L{L} D{D}", "causal": causal,
               "tkc_tflops": tflops(f, statistics.median(times["tkc"])), "rel_err": outs,
               "times_ms": times}
        for peer in table:
            if peer != "tkc":
                row[f"{peer}_tflops"] = tflops(f, statistics.median(times[peer]))
                row[f"vs_{peer}"] = median_ratio(times[peer], times["tkc"])
                row[f"vs_{peer}_range"] = [min(p / t for p, t in zip(times[peer], times["tkc"])),
                                           max(p / t for p, t in zip(times[peer], times["tkc"]))]
        rows.append(row)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="attention-bench.json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-flex", action="store_true", help="skip FlexAttention (its compiles take minutes)")
    ap.add_argument("--flex-only", action="store_true", help="only the shapes with FlexAttention")
    ap.add_argument("--only", nargs="+", default=(), metavar="ROWS",
                    help="head dims, with c (causal) or n (not) for half of them: e.g. 64c 128")
    args = ap.parse_args(argv)
    if torch is None or not torch.cuda.is_available():
        print("bench/attention.py: no CUDA GPU here (or no torch): nothing run.")
        return
    rows = []
    print(f"{'phase':4} {'shape':22} {'causal':6} {'tkc':>6} {'cuDNN':>6} {'flash':>6} {'flex':>6}"
          "  tkc/cuDNN  tkc/flash  tkc/flex   (TFLOP/s; ratios: median peer time / tkc time)")
    for B, H, L, D, causal in configs(args.quick, args.flex_only, args.only):
        flex = not args.no_flex and (B, L, D) in FLEX
        for r in measure(B, H, L, D, causal, flex):
            rows.append(r)
            f = lambda key: f"{r[key]:6.0f}" if key in r else "     -"  # noqa: E731
            g = lambda key: f"{r[key]:9.2f}" if key in r else "        -"  # noqa: E731
            print(f"{r['phase']:4} {r['shape']:22} {str(r['causal']):6} {f('tkc_tflops')} "
                  f"{f('cudnn_tflops')} {f('flash_tflops')} {f('flex_tflops')}  {g('vs_cudnn')}  "
                  f"{g('vs_flash')}  {g('vs_flex')}   err {max(r['rel_err'].values()):.1e}", flush=True)
    with open(args.out, "w") as fh:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
