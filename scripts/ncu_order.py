"""HBM traffic of the GEMM block orders, read by ncu (the paper's third table).

    ncu --csv --page raw -k regex:gemm_hopper \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
        python3 scripts/ncu_order.py run > ncu-order.csv
    python3 scripts/ncu_order.py parse ncu-order.csv      # a markdown table

`run` launches each order variant of the library GEMM once per size (after one
warm-up launch, which ncu also profiles: `parse` keeps the last launch of each).
"""
from __future__ import annotations

import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ORDERS = ("xyz", "grouped(y, 8)", "auto")
SIZES = (4096, 16384)


def run() -> None:
    import torch
    from tkc.kernels import gemm_hopper
    for n in SIZES:
        a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        for o in ORDERS:
            k = gemm_hopper("bf16", order=o)
            k(a, b, c)
            k(a, b, c)
        torch.cuda.synchronize()
        del a, b, c


def parse(path: str) -> str:
    rows = {}
    with open(path) as f:
        lines = [ln for ln in f if ln.startswith('"')]
    reader = csv.DictReader(lines)
    for r in reader:
        name = r.get("Kernel Name", "")
        if not name.startswith("gemm_hopper"):
            continue
        try:  # ncu writes thousands separators
            read, write, ns = (float(r[k].replace(",", "")) for k in
                               ("dram__bytes_read.sum", "dram__bytes_write.sum",
                                "gpu__time_duration.sum"))
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


if __name__ == "__main__":
    if sys.argv[1:2] == ["parse"]:
        print(parse(sys.argv[2]))
    else:
        run()
