"""The paper's three GEMM tables for tkc's library GEMM, next to cuBLAS, plus plots.

    python3 bench/gemm_tables.py --out DIR [--quick]

1. pipeline stages 1/2/3/4 at 4096^3 (paper: 260 / 484 / 683 / 760 TFLOP/s);
2. persistent grid on and off as K grows at M = N = 8192 (paper: persistent
   helps small-K GEMMs by 10-15%);
3. block order: the hardware's ("xyz") against the L2-aware super-rows the pass
   picks (and other widths) at 4096^3 and 16384^3 (paper: 767 -> 735 and
   797 -> 387 TFLOP/s for L2-aware -> naive); HBM traffic comes from ncu
   (`python -m tkc.bench.ncu order`, scripts/gpu.sh's step ncu), run separately
   since ncu replays kernels.
4. tkc against cuBLAS over sizes (the plot of `python -m tkc.bench`'s rows).

Every variant is timed interleaved with cuBLAS in the same rounds (median of
the rounds). Writes DIR/gemm_tables.json, DIR/gemm_tables.md (the tables for
BENCHMARKS.md) and DIR/gemm_*.png. `tkc build bench/gemm_tables.py` builds
the variants (KERNELS).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tkc.kernels import gemm_hopper  # noqa: E402

STAGES = (1, 2, 3, 4)
PAPER_STAGES = {1: 260, 2: 484, 3: 683, 4: 760}
KS = (64, 128, 256, 512, 1024, 2048, 4096)
ORDERS = ("xyz", "grouped(y, 4)", "grouped(y, 8)", "auto", "grouped(y, 32)")
PAPER_ORDER = {4096: (767, 735), 16384: (797, 387)}  # (L2-aware, naive)
SIZES = (1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384)

EPILOGUES = ((64, 2), (128, 2), (256, 1))  # finish tiles (cols, buffers); the first is the default

KERNELS = ([gemm_hopper("bf16", stages=s) for s in STAGES]
           + [gemm_hopper("bf16", epilogue=e) for e in EPILOGUES[1:]]
           + [gemm_hopper("bf16", persistent=False)]
           + [gemm_hopper("bf16", order=o) for o in ORDERS if o != "auto"])


def _time(kernel, m, n, k, rounds):
    from tkc.bench.__main__ import compare_gemm
    return compare_gemm(kernel, m, n, k, rounds)


def stages_table(rounds):
    return [dict(_time(gemm_hopper("bf16", stages=s), 4096, 4096, 4096, rounds), stages=s,
                 paper_tflops=PAPER_STAGES[s]) for s in STAGES]


def persistent_table(rounds, ks=KS, mn=8192):
    rows = []
    for k in ks:
        on = _time(gemm_hopper("bf16"), mn, mn, k, rounds)
        off = _time(gemm_hopper("bf16", persistent=False), mn, mn, k, rounds)
        rows.append(dict(k=k, persistent=on, launched=off,
                         gain=on["tkc_tflops"] / off["tkc_tflops"]))
    return rows


def order_table(rounds, sizes=(4096, 16384)):
    rows = []
    for n in sizes:
        for o in ORDERS:
            r = _time(gemm_hopper("bf16", order=o), n, n, n, rounds)
            rows.append(dict(r, order=o, n=n))
    return rows


def epilogue_table(rounds, shapes=((8192, 8192, 1024), (4096, 4096, 4096))):
    """The finish's tile size against the ring depth it leaves (auto stages)."""
    return [dict(_time(gemm_hopper("bf16", epilogue=e), *shape, rounds), epilogue=f"{e[1]} x 128x{e[0]}")
            for shape in shapes for e in EPILOGUES]


def sizes_table(rounds, sizes=SIZES):
    return [_time(gemm_hopper("bf16"), n, n, n, rounds) for n in sizes]


# ---------------------------------------------------------------- output

def markdown(t) -> str:
    out = ["### Pipeline stages, 4096³ (persistent, auto order)", "",
           "| stages | tkc TFLOP/s | cuBLAS TFLOP/s | tkc / cuBLAS | paper TFLOP/s |",
           "| ---: | ---: | ---: | ---: | ---: |"]
    out += [f"| {r['stages']} | {r['tkc_tflops']:.0f} | {r['peer_tflops']:.0f} | {r['ratio']:.2f} "
            f"| {r['paper_tflops']} |" for r in t["stages"]]
    out += ["", "### Persistent grid as K grows, M = N = 8192", "",
            "| K | persistent TFLOP/s | one block per tile TFLOP/s | persistent gain | "
            "cuBLAS TFLOP/s | persistent / cuBLAS |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    out += [f"| {r['k']} | {r['persistent']['tkc_tflops']:.0f} | {r['launched']['tkc_tflops']:.0f} "
            f"| {r['gain']:.2f} | {r['persistent']['peer_tflops']:.0f} | {r['persistent']['ratio']:.2f} |"
            for r in t["persistent"]]
    out += ["", "### Block order (persistent)", "",
            "| size | order | tkc TFLOP/s | cuBLAS TFLOP/s | tkc / cuBLAS | paper (L2-aware / naive) |",
            "| --- | --- | ---: | ---: | ---: | --- |"]
    out += [f"| {r['n']}³ | {r['order']} | {r['tkc_tflops']:.0f} | {r['peer_tflops']:.0f} "
            f"| {r['ratio']:.2f} | {'%d / %d' % PAPER_ORDER[r['n']] if r['n'] in PAPER_ORDER else ''} |"
            for r in t["order"]]
    out += ["", "### Finish tiles (auto stages: 4 with 2 x 16 KiB, 3 with more)", "",
            "| shape | finish tiles | tkc TFLOP/s | cuBLAS TFLOP/s | tkc / cuBLAS |",
            "| --- | --- | ---: | ---: | ---: |"]
    out += [f"| {r['shape']} | {r['epilogue']} | {r['tkc_tflops']:.0f} | {r['peer_tflops']:.0f} "
            f"| {r['ratio']:.2f} |" for r in t.get("epilogue", [])]
    out += ["", "### tkc against cuBLAS over sizes (n³)", "",
            "| n | tkc TFLOP/s | cuBLAS TFLOP/s | tkc / cuBLAS (median, range) |", "| ---: | ---: | ---: | ---: |"]
    out += [f"| {r['shape'].split('x')[0]} | {r['tkc_tflops']:.0f} | {r['peer_tflops']:.0f} "
            f"| {r['ratio']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f}) |" for r in t["sizes"]]
    return "\n".join(out) + "\n"


def plots(t, folder) -> list:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    files = []

    def save(fig, name):
        path = os.path.join(folder, name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)

    fig, ax = plt.subplots(figsize=(5, 3.2))
    s = [r["stages"] for r in t["stages"]]
    ax.bar([x - 0.2 for x in s], [r["tkc_tflops"] for r in t["stages"]], 0.4, label="tkc")
    ax.bar([x + 0.2 for x in s], [r["paper_tflops"] for r in t["stages"]], 0.4, label="paper (TK)")
    ax.axhline(statistics.median(r["peer_tflops"] for r in t["stages"]), color="k", ls="--",
               label="cuBLAS")
    ax.set(xlabel="pipeline stages", ylabel="TFLOP/s", title="GEMM 4096³ bf16", xticks=s)
    ax.legend()
    save(fig, "gemm_stages.png")

    fig, ax = plt.subplots(figsize=(5, 3.2))
    ks = [r["k"] for r in t["persistent"]]
    ax.plot(ks, [r["persistent"]["tkc_tflops"] for r in t["persistent"]], "o-", label="persistent")
    ax.plot(ks, [r["launched"]["tkc_tflops"] for r in t["persistent"]], "s-", label="block per tile")
    ax.plot(ks, [r["persistent"]["peer_tflops"] for r in t["persistent"]], "k--", label="cuBLAS")
    ax.set(xscale="log", xlabel="K", ylabel="TFLOP/s", title="GEMM 8192 x 8192 x K")
    ax.legend()
    save(fig, "gemm_persistent.png")

    fig, ax = plt.subplots(figsize=(6, 3.2))
    for i, n in enumerate(sorted({r["n"] for r in t["order"]})):
        rows = [r for r in t["order"] if r["n"] == n]
        ax.bar([j + 0.4 * i for j in range(len(rows))], [r["tkc_tflops"] for r in rows], 0.4,
               label=f"{n}³")
    ax.set(xticks=[j + 0.2 for j in range(len(ORDERS))], ylabel="TFLOP/s", title="block order")
    ax.set_xticklabels(ORDERS, rotation=15, fontsize=8)
    ax.legend()
    save(fig, "gemm_order.png")

    fig, ax = plt.subplots(figsize=(5, 3.2))
    ns = [int(r["shape"].split("x")[0]) for r in t["sizes"]]
    ax.plot(ns, [r["tkc_tflops"] for r in t["sizes"]], "o-", label="tkc")
    ax.plot(ns, [r["peer_tflops"] for r in t["sizes"]], "k--", label="cuBLAS")
    ax.set(xscale="log", xlabel="n (n³ GEMM)", ylabel="TFLOP/s", title="bf16 GEMM, H100")
    ax.legend()
    save(fig, "gemm_sizes.png")
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gemm-tables")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    r = 2 if args.quick else args.rounds
    t = dict(stages=stages_table(r),
             persistent=persistent_table(r, ks=KS[::3] if args.quick else KS),
             order=order_table(r, sizes=(4096,) if args.quick else (4096, 16384)),
             epilogue=epilogue_table(r),
             sizes=sizes_table(r, sizes=SIZES[:4:2] if args.quick else SIZES))
    with open(os.path.join(args.out, "gemm_tables.json"), "w") as f:
        json.dump(t, f, indent=1)
    md = markdown(t)
    with open(os.path.join(args.out, "gemm_tables.md"), "w") as f:
        f.write(md)
    print(md)
    print("plots:", plots(t, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
