"""The attention benchmark's rows that miss issue 7's bar, profiled beside
the peer: for each (phase, D, causal, L) of ROWS at 16k tokens x 16 heads,
tkc.attention's kernel and cuDNN's (SDPA's main forward or backward kernel),
one launch each, under ncu; --parse prints each kernel's time, pipe
utilisation, issue activity and its largest warp stall reasons.

    ncu --profile-from-start off -k regex:"$(python3 scripts/ncu_attention_rows.py --kernels)" \\
        --section WarpStateStats --metrics "$(python3 scripts/ncu_attention_rows.py --metrics)" \\
        --csv --page raw --print-units base --log-file rows.csv \\
        python3 scripts/ncu_attention_rows.py > launches.txt
    python3 scripts/ncu_attention_rows.py --parse rows.csv launches.txt

(`tkc build scripts/ncu_attention_rows.py` first.) The stall reasons are
ncu's smsp__average_warps_issue_stalled_*_per_issue_active: warps waiting
for that reason per issued instruction, the producer warpgroup's waits
included."""
import csv
import re
import sys

from tkc.kernels.attention_bwd import attention_kernels

# (phase, D, causal, L): the rows below the bar in the run of 2026-11-27
# (1f3ffbe, BENCHMARKS.md session 7)
ROWS = [("fwd", 64, False, 1024), ("fwd", 128, False, 1024), ("bwd", 64, False, 1024),
        ("bwd", 64, False, 4096), ("bwd", 64, True, 1024), ("bwd", 64, True, 16384),
        ("bwd", 128, False, 1024), ("bwd", 128, False, 4096), ("bwd", 128, False, 16384),
        ("bwd", 128, True, 1024), ("bwd", 128, True, 4096), ("bwd", 128, True, 16384)]
KERNELS = [k for D, c in sorted({(D, c) for _, D, c, _ in ROWS}) for k in attention_kernels(D, c, "bhld")]
KERNEL_NAMES = "attn_fwd|attn_bwd|flash_fprop|flash_bprop"   # tkc's, cuDNN's
METRICS = ["gpu__time_duration.sum",
           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
           "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_elapsed",
           "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
           "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed",
           "smsp__issue_active.avg.pct_of_peak_sustained_elapsed",
           "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed",
           "launch__grid_size", "launch__registers_per_thread"]
SHORT = ["us", "tensor%", "mufu%", "fma%", "alu%", "issue%", "smem%", "grid", "regs"]
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    import tkc
    from tkc.bench.timing import profile_once
    torch.manual_seed(0)
    for phase, D, causal, L in ROWS:
        shape = (16384 // L, 16, L, D)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        do = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

        def cudnn_fwd():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return sdpa(q, k, v, is_causal=causal)
        fwds = {"tkc": lambda: tkc.attention(q, k, v, causal=causal), "cudnn": cudnn_fwd}
        if phase == "fwd":
            fns = {n: (lambda f=f: f().detach()) for n, f in fwds.items()}
        else:                            # each backward on a saved forward
            outs = {n: f() for n, f in fwds.items()}
            fns = {n: (lambda o=o: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
                   for n, o in outs.items()}
        profile_once(list(fns.values()))
        row = f"{phase} D{D} {'causal' if causal else 'full'} L{L}"
        print("\n".join(f"{row}|{n}" for n in fns), flush=True)


def parse(csv_path, launches_path):
    rows = [r for r in csv.DictReader(line for line in open(csv_path) if line.startswith('"'))
            if re.search(KERNEL_NAMES, r.get("Kernel Name", ""))]
    launches = [line.strip().split("|") for line in open(launches_path) if "|" in line]
    if len(rows) != len(launches):
        raise SystemExit(f"{len(rows)} profiled kernels for {len(launches)} launches")
    num = lambda x: float(x.replace(",", "")) if x not in ("", "n/a") else float("nan")  # noqa: E731
    print(f"{'row':24} {'who':6} " + " ".join(f"{s:>8}" for s in SHORT) + "  largest stalls (warps per issue)")
    for (row, who), r in zip(launches, rows):
        vals = [num(r[m]) for m in METRICS]
        vals[0] /= 1e3
        stalls = sorted(((num(v), STALL.match(k).group(1)) for k, v in r.items() if STALL.match(k or "")),
                        reverse=True)
        top = ", ".join(f"{n} {v:.2f}" for v, n in stalls[:5] if v == v)
        print(f"{row:24} {who:6} " + " ".join(f"{v:8.1f}" for v in vals) + f"  {top}")
        print(f"{'':31} {r['Kernel Name'][:100]}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--parse"]:
        parse(*sys.argv[2:4])
    elif sys.argv[1:2] == ["--metrics"]:
        print(",".join(METRICS))
    elif sys.argv[1:2] == ["--kernels"]:
        print(KERNEL_NAMES)
    else:
        main()
