"""Kernel launches for Nsight Compute (ncu), and readers of what it writes
(scripts/gpu.sh's steps `ncu`, `profile` and `ncu-linear` run them):

    ncu --profile-from-start off --section SpeedOfLight ... python3 -m tkc.bench.ncu SET [ARGS]
    python3 -m tkc.bench.ncu order-table NCU.csv       # `order`'s CSV as a markdown table
    python3 -m tkc.bench.ncu stalls SRC.csv [TOP]      # warp stall samples by SASS instruction

A SET launches each of its kernels once after a warm-up call, between
cudaProfilerStart and Stop (timing.profile_once: run ncu with
--profile-from-start off), except `order` and `banks`, which ncu profiles from
the start (pick their kernels with -k):

    attention [--d 64,128,256] [--blhd] [L ...]
                tkc.attention's forward and backward, causal and not, at 16k
                tokens x 16 heads a length (default D 128, L 4096: B4 H16);
                --blhd: FlashAttention's memory layout. ncu locks the clocks,
                so two builds compare even when run apart (`-k regex:attn_
                --metrics gpu__time_duration.sum`, each tree with its own
                TKC_CACHE_DIR, e.g. under .cache-ab/)
    rotary      a copy (x.clone()), tkc's rotary (half-split, interleaved) and
                torch.compile's, B16 H16 L4096 D128; inductor's Triton source
                goes to $OUT/rotary-inductor-*.py when OUT is set
    linear      tkc.based (L 4096), tkc.linear_attention with decay (F = DV =
                64, L 1024) and tkc.hedgehog (L 4096), B16 H16; with
                `--section SourceCounters -o REPORT`, then `ncu -i
                REPORT.ncu-rep --page source --csv --print-source sass >
                SRC.csv` for `stalls`
    fftconv     tkc.fftconv at N 1024 and 4096 (B16, D 1024)
    banks [N]   each library GEMM at N x N x N (default 1024) and attention_fwd
                at D 64, for shared-memory bank conflict counters
    order       each block order of the library GEMM (xyz, grouped(y, 8), auto)
                at 4096 and 16384, twice (warm-up, then the one `order-table`
                keeps): `ncu --csv --page raw --print-units base -k
                regex:gemm_hopper --metrics dram__bytes_read.sum,
                dram__bytes_write.sum,gpu__time_duration.sum` (the paper's
                HBM traffic table; bench/gemm_tables.py builds the variants)

The kernels come from the artifact cache (`tkc build`; `order`'s variants from
`tkc build bench/gemm_tables.py`). `rotary` and `linear` import the repository's
bench/ (run from its root).
"""
from __future__ import annotations

import csv
import os
import sys
from collections import Counter

from .timing import profile_once


def attention(args: list[str]) -> None:
    import torch

    import tkc
    dims, blhd, lengths = (128,), False, []
    for a in args:
        if a.startswith("--d"):
            dims = tuple(int(d) for d in a.split("=", 1)[1].split(","))
        elif a == "--blhd":
            blhd = True
        else:
            lengths.append(int(a))
    runs = []
    for L in lengths or (4096,):
        for D in dims:
            shape = (16384 // L, L, 16, D) if blhd else (16384 // L, 16, L, D)
            q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            if blhd:
                q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            q, k, v = (t.requires_grad_() for t in (q, k, v))
            runs += [lambda q=q, k=k, v=v, causal=causal: tkc.attention(q, k, v, causal=causal).sum().backward()
                     for causal in (False, True)]
    profile_once(runs)


def rotary(args: list[str]) -> None:
    import torch
    from torch._inductor.utils import run_and_get_code

    import tkc.torchops as torch_ops
    from bench.memory_bound import rope_eager   # the repository's bench/ (run from its root)
    B, L, H, D = 16, 4096, 16, 128
    x = torch.randn(B, L, H, D, device="cuda", dtype=torch.bfloat16)
    theta = torch.randn(L, D // 2, device="cuda")
    cos, sin = theta.cos().bfloat16(), theta.sin().bfloat16()
    rope_c = torch.compile(rope_eager)
    for il in (False, True):  # compile, keeping inductor's source
        _, code = run_and_get_code(rope_c, x, cos, sin, il)
        if os.environ.get("OUT"):
            with open(os.path.join(os.environ["OUT"], f"rotary-inductor-{'il' if il else 'half'}.py"), "w") as f:
                f.write("\n\n".join(code))
    runs = [lambda: x.clone()]
    for il in (False, True):
        runs += [lambda il=il: torch_ops.rotary_embedding(x, cos, sin, il), lambda il=il: rope_c(x, cos, sin, il)]
    profile_once(runs)


def linear(args: list[str]) -> None:
    import torch

    import tkc
    from bench.linear_attention import hedgehog_args   # the repository's bench/
    q, k = (torch.randn(16, 16, 4096, 16, device="cuda").bfloat16() for _ in range(2))
    v = torch.randn(16, 16, 4096, 64, device="cuda").bfloat16()
    qd, kd, vd = (torch.randn(16, 16, 1024, 64, device="cuda").bfloat16() * 0.3 for _ in range(3))
    g = -torch.rand(16, 16, 1024, device="cuda") * 0.05
    qh, kh, vh = (torch.randn(16, 16, 4096, 128, device="cuda").bfloat16() * 0.3 for _ in range(3))
    maps = hedgehog_args(16, 128)
    profile_once([lambda: tkc.based(q, k, v), lambda: tkc.linear_attention(qd, kd, vd, g=g),
                  lambda: tkc.hedgehog(qh, kh, vh, *maps)])


def fftconv(args: list[str]) -> None:
    import torch

    import tkc
    runs = []
    for N in (1024, 4096):
        u = torch.randn(16, 1024, N, device="cuda").bfloat16()
        kf = tkc.fftconv_filter(torch.randn(1024, N, device="cuda"), N)
        runs.append(lambda u=u, kf=kf: tkc.fftconv(u, kf))
    profile_once(runs)


def banks(args: list[str]) -> None:
    import torch

    from tkc.kernels import attention_fwd, gemm, gemm_hopper
    n = int(args[0]) if args else 1024
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    for k in (gemm("bf16"), gemm_hopper("bf16")):
        k(a, b, c)
    q, kk, v = (torch.randn(1, 4, 512, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    attention_fwd(64)(q, kk, v, torch.empty_like(q), 0.125)
    torch.cuda.synchronize()


ORDERS = ("xyz", "grouped(y, 8)", "auto")
ORDER_SIZES = (4096, 16384)


def order(args: list[str]) -> None:
    import torch

    from tkc.kernels import gemm_hopper
    for n in ORDER_SIZES:
        a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        for o in ORDERS:
            k = gemm_hopper("bf16", order=o)
            k(a, b, c)
            k(a, b, c)
        torch.cuda.synchronize()
        del a, b, c


def order_table(path: str) -> str:
    """`order`'s ncu CSV as a markdown table: HBM traffic and time of the
    second (timed) launch of each pair."""
    rows = {}
    with open(path) as f:
        lines = [ln for ln in f if ln.startswith('"')]
    for r in csv.DictReader(lines):
        name = r.get("Kernel Name", "")
        if not name.startswith("gemm_hopper"):
            continue
        try:  # ncu writes thousands separators
            read, write, ns = (float(r[k].replace(",", "")) for k in
                               ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"))
        except (KeyError, ValueError, AttributeError):
            continue  # the units row
        rows.setdefault(name, []).append((read, write, ns))
    out = ["| kernel (size in launch order) | HBM read GB | HBM write GB | time ms | HBM GB/s |",
           "| --- | ---: | ---: | ---: | ---: |"]
    for name, launches in rows.items():
        for read, write, ns in launches[1::2]:  # the second (timed) launch of each pair
            out.append(f"| {name} | {read / 1e9:.2f} | {write / 1e9:.2f} | {ns / 1e6:.3f} | "
                       f"{(read + write) / ns:.0f} |")
    return "\n".join(out)


def source_kernels(path):
    """(kernel name, [row dicts]) for each kernel in ncu's source-page CSV."""
    name, header, rows = None, None, []
    with open(path, newline="") as f:
        for rec in csv.reader(f):
            if rec and rec[0] == "Kernel Name":
                if name:
                    yield name, rows
                name, header, rows = rec[1], None, []
            elif header is None:
                header = rec
            elif rec:
                rows.append(dict(zip(header, rec)))
    if name:
        yield name, rows


def _n(x: str) -> int:
    try:
        return int(float(x.replace(",", "")))
    except ValueError:
        return 0


def stalls(name, rows, top=20) -> None:
    """A kernel's warp stall samples by reason, and its `top` instructions by
    samples (offset from its first instruction, warp-level executions, the
    instruction, its top two reasons)."""
    reasons = [c for c in rows[0] if c.startswith("stall_") and "Not Issued" not in c]
    total = sum(_n(r["Warp Stall Sampling (All Samples)"]) for r in rows)
    by = Counter({c[6:]: sum(_n(r[c]) for r in rows) for c in reasons})
    print(f'"{name}" samples {total}')
    print("  by reason: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by.most_common(8)))
    base = int(rows[0]["Address"], 16)
    for r in sorted(rows, key=lambda r: -_n(r["Warp Stall Sampling (All Samples)"]))[:top]:
        s = _n(r["Warp Stall Sampling (All Samples)"])
        why = Counter({c[6:]: _n(r[c]) for c in reasons}).most_common(2)
        print(f"  {100 * s / total:5.1f}% {int(r['Address'], 16) - base:6x} exec {_n(r['Instructions Executed']):7d}"
              f"  {r['Source'].strip()[:56]:56} " + ", ".join(f"{k} {v}" for k, v in why))


SETS = {"attention": attention, "rotary": rotary, "linear": linear, "fftconv": fftconv,
        "banks": banks, "order": order}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in (*SETS, "order-table", "stalls"):
        sys.stderr.write(__doc__)
        return 2
    what, args = argv[0], argv[1:]
    if what == "order-table":
        print(order_table(args[0]))
    elif what == "stalls":
        top = int(args[1]) if len(args) > 1 else 20
        for name, rows in source_kernels(args[0]):
            stalls(name, rows, top)
            print()
    else:
        SETS[what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
