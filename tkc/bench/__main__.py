"""python -m tkc.bench: check and benchmark the kernel library on the GPU.

Every row is measured in this run, on this GPU: tkc next to its peer
(cuBLAS through torch.matmul; SDPA's flash and cuDNN backends). Each tkc
kernel is first checked against PyTorch on fresh random inputs. Results go
to a table on stdout and to JSON (--out, default bench-results.json).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import subprocess
import sys

from .fp8_operands import block_operands, tensor_operands
from .peer import rel_err
from .timing import bench, launch_overhead_us, tflops


GEMM_SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
               (16384, 16384, 16384), (8192, 8192, 1024), (4096, 4096, 16384)]
L2_BYTES = 50 * 2**20


def gemm_inputs(m, n, k, transpose_b=False, out=None):
    """Enough (a, b, c) sets that rotating through them defeats the L2 (METHOD.md)."""
    import torch
    out = out or torch.bfloat16
    size = 2 * (m * k + k * n) + m * n * torch.finfo(out).bits // 8
    sets = max(1, min(4, -(-3 * L2_BYTES // size)))
    return [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
             torch.randn(*((n, k) if transpose_b else (k, n)), device="cuda", dtype=torch.bfloat16),
             torch.full((m, n), float("nan"), device="cuda", dtype=out)) for _ in range(sets)]


def rotating(fn, sets):
    """fn over the input sets in turn (one set per call)."""
    state = {"i": 0}

    def call():
        fn(*sets[state["i"] % len(sets)])
        state["i"] += 1
    return call


def timing_for(flops: float) -> dict:
    """bench() repeats scaled to the work: ~0.3 s per measurement at 700 TFLOP/s."""
    per_call = flops / 700e12
    inner = max(1, min(10, int(0.03 / per_call)))
    return dict(inner=inner, reps=max(5, min(30, int(0.3 / (per_call * inner)))))


def compare_gemm(kernel, m, n, k, rounds, transpose_b=False, out_dtype="bf16"):
    """One row: tkc interleaved with cuBLAS (torch.matmul) over `rounds`."""
    import torch
    from .timing import interleaved, median_ratio
    out = {"bf16": torch.bfloat16, "f32": torch.float32}[out_dtype]
    sets = gemm_inputs(m, n, k, transpose_b, out)
    a, b, c = sets[0]
    kernel(a, b, c)
    ref = a.float() @ (b.float().T if transpose_b else b.float())
    err = rel_err(c, ref)
    if out_dtype != "bf16":  # torch's matmul writes its inputs' dtype: the peer writes bf16
        peer = lambda a, b, c: torch.matmul(a, b.T if transpose_b else b)  # noqa: E731
    else:
        peer = (lambda a, b, c: torch.matmul(a, b.T, out=c)) if transpose_b else \
            (lambda a, b, c: torch.matmul(a, b, out=c))
    flops = 2.0 * m * n * k
    ms = interleaved({"tkc": rotating(kernel, sets), "peer": rotating(peer, sets)}, rounds,
                     **timing_for(flops))
    ratios = [p / t for p, t in zip(ms["peer"], ms["tkc"])]
    import statistics
    return dict(kernel=kernel.name, shape=f"{m}x{n}x{k}", rel_err=err,
                tkc_tflops=tflops(flops, statistics.median(ms["tkc"])), peer="cuBLAS",
                peer_tflops=tflops(flops, statistics.median(ms["peer"])),
                ratio=median_ratio(ms["peer"], ms["tkc"]), ratio_min=min(ratios),
                ratio_max=max(ratios), rounds=rounds)


def compare_scaled_mm(m, n, k, rowwise, rounds, fast=False):
    """One row: tkc.scaled_mm interleaved with torch._scaled_mm (cuBLASLt), e4m3
    in, bf16 out, per-tensor or row-wise scales, both with use_fast_accum=fast;
    the error against float32."""
    import statistics

    import torch

    import tkc
    from .timing import interleaved, median_ratio
    sets = max(1, min(4, -(-3 * L2_BYTES // (m * k + k * n + 2 * m * n))))
    sets = [tensor_operands(m, n, k, rowwise) for _ in range(sets)]
    a, b, sa, sb = sets[0]
    err = rel_err(tkc.scaled_mm(a, b, sa, sb, use_fast_accum=fast), (a.float() @ b.float()) * sa * sb)
    flops = 2.0 * m * n * k
    ms = interleaved({"tkc": rotating(lambda *x: tkc.scaled_mm(*x, use_fast_accum=fast), sets),
                      "peer": rotating(lambda *x: torch._scaled_mm(*x, out_dtype=torch.bfloat16,
                                                                   use_fast_accum=fast), sets)},
                     rounds, **timing_for(flops / 2))       # FP8 runs about twice bf16's rate
    ratios = [p / t for p, t in zip(ms["peer"], ms["tkc"])]
    return dict(kernel=f"scaled_mm {'rowwise' if rowwise else 'per-tensor'}{' fast' if fast else ''}",
                shape=f"{m}x{n}x{k}",
                rel_err=err, tkc_tflops=tflops(flops, statistics.median(ms["tkc"])),
                peer="torch._scaled_mm", peer_tflops=tflops(flops, statistics.median(ms["peer"])),
                ratio=median_ratio(ms["peer"], ms["tkc"]), ratio_min=min(ratios),
                ratio_max=max(ratios), rounds=rounds)


def compare_scaled_mm_blockwise(m, n, k, rounds):
    """One row: tkc.scaled_mm with block scales (1x128, 128x128) interleaved with
    torch._scaled_mm with the same scales where this torch takes them on this GPU, else
    with per-tensor scales of the same operands (the issue's bar: 1200 TFLOP/s either way);
    the error against the float32 product of the dequantised operands."""
    import statistics

    import torch

    import tkc
    from .timing import interleaved, median_ratio
    sets = [block_operands(m, n, k) for _ in range(max(1, min(4, -(-3 * L2_BYTES // (m * k + k * n + 2 * m * n)))))]
    a, b, sa, sb = sets[0]
    deq_a = a.float() * sa.repeat_interleave(128, 1)
    deq_b = b.float() * sb.repeat_interleave(128, 0).repeat_interleave(128, 1)
    err = rel_err(tkc.scaled_mm(a, b, sa, sb), deq_a @ deq_b)
    del deq_a, deq_b
    one = torch.tensor(1.0, device="cuda")
    try:
        torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
        peer, peer_name = (lambda *x: torch._scaled_mm(*x, out_dtype=torch.bfloat16)), "torch._scaled_mm blockwise"
    except (RuntimeError, NotImplementedError, ValueError):
        peer = lambda a, b, sa, sb: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)  # noqa: E731
        peer_name = "torch._scaled_mm per-tensor"
    flops = 2.0 * m * n * k
    ms = interleaved({"tkc": rotating(tkc.scaled_mm, sets), "peer": rotating(peer, sets)},
                     rounds, **timing_for(flops / 2))
    ratios = [p / t for p, t in zip(ms["peer"], ms["tkc"])]
    return dict(kernel="scaled_mm blockwise", shape=f"{m}x{n}x{k}", rel_err=err,
                tkc_tflops=tflops(flops, statistics.median(ms["tkc"])), peer=peer_name,
                peer_tflops=tflops(flops, statistics.median(ms["peer"])),
                ratio=median_ratio(ms["peer"], ms["tkc"]), ratio_min=min(ratios),
                ratio_max=max(ratios), rounds=rounds)


MOE_COUNTS = [4000, 0, 2100, 1000, 3072, 0, 500, 5712]   # 8 experts, two empty: 16384 rows


def compare_grouped(layout, n, k, rounds):
    """One row: tkc.grouped_scaled_mm (contiguous, contiguous by counts, or masked layout)
    interleaved with a loop of per-expert tkc.scaled_mm calls with block scales over the
    same rows (empty experts skipped), the issue's peer; the error against the loop's result.
    The contiguous layout pads each expert to 128 rows (zeros), the counts one to 4."""
    import statistics

    import torch

    import tkc
    from .timing import interleaved, median_ratio
    E, top, kb = len(MOE_COUNTS), max(MOE_COUNTS), k // 128
    f8, u8 = torch.float8_e4m3fn, torch.uint8      # 8-bit floats are joined as bytes

    def rows(t, m, total):
        """t's first m rows (bytes or f32), zero rows after them up to `total`."""
        return torch.cat([t[:m], t.new_zeros(total - m, t.shape[1])])

    ops = [block_operands(max(m, 128), n, k) for m in MOE_COUNTS]          # per expert: a, b, sa, sb
    b = torch.stack([o[1].t().view(u8) for o in ops]).view(f8).transpose(1, 2)   # [E, K, N], column-major each
    sb = torch.stack([o[3].t() for o in ops]).transpose(1, 2)             # [E, K/128, N/128]
    loop_args = [(o[0][:m], o[1], o[2][:m].t().contiguous().t(), o[3]) for o, m in zip(ops, MOE_COUNTS) if m]
    unit = 4 if layout == "counts" else 128    # (the counts layout's counts: multiples of 4)
    pads = [-(-m // unit) * unit for m in MOE_COUNTS]
    extra = {}
    if layout in ("contiguous", "counts"):
        a = torch.cat([rows(o[0].view(u8), m, p) for o, m, p in zip(ops, MOE_COUNTS, pads)]).view(f8)
        sa = torch.cat([rows(o[2], m, p) for o, m, p in zip(ops, MOE_COUNTS, pads)]).t().contiguous().t()
        if layout == "counts":
            groups, extra = None, {"counts": torch.tensor(pads, dtype=torch.int32, device="cuda")}
        else:
            groups = torch.tensor([e for e, p in enumerate(pads) for _ in range(p // 128)], dtype=torch.int32,
                                  device="cuda")
    else:
        a = torch.stack([rows(o[0].view(u8), m, top) for o, m in zip(ops, MOE_COUNTS)]).view(f8)
        sa = torch.stack([rows(o[2], m, top).t() for o, m in zip(ops, MOE_COUNTS)]).transpose(1, 2)
        groups = torch.tensor(MOE_COUNTS, dtype=torch.int32, device="cuda")
    assert sa.shape[-1] == kb
    got = tkc.grouped_scaled_mm(a, b, sa, sb, groups, **extra)
    mine = torch.cat([got[sum(pads[:e]):sum(pads[:e]) + m] for e, m in enumerate(MOE_COUNTS)]) \
        if layout != "masked" else torch.cat([got[e, :m] for e, m in enumerate(MOE_COUNTS)])
    err = rel_err(mine, torch.cat([tkc.scaled_mm(*x) for x in loop_args]))
    flops = 2.0 * sum(MOE_COUNTS) * n * k
    ms = interleaved({"tkc": lambda: tkc.grouped_scaled_mm(a, b, sa, sb, groups, **extra),
                      "peer": lambda: [tkc.scaled_mm(*x) for x in loop_args]}, rounds, **timing_for(flops / 2))
    ratios = [p / t for p, t in zip(ms["peer"], ms["tkc"])]
    return dict(kernel=f"grouped_scaled_mm {layout}", shape=f"{E}x({'+'.join(map(str, MOE_COUNTS))})x{n}x{k}",
                rel_err=err, tkc_tflops=tflops(flops, statistics.median(ms["tkc"])),
                peer="loop of tkc.scaled_mm blockwise", peer_tflops=tflops(flops, statistics.median(ms["peer"])),
                ratio=median_ratio(ms["peer"], ms["tkc"]), ratio_min=min(ratios),
                ratio_max=max(ratios), rounds=rounds)


def gemm_rows(quick: bool):
    from tkc.kernels import gemm, gemm_hopper
    rounds = 3 if quick else 5
    shapes = GEMM_SHAPES[:2] if quick else GEMM_SHAPES
    for m, n, k in shapes:
        yield compare_gemm(gemm_hopper("bf16"), m, n, k, rounds)
    if not quick:
        # FP8 (issue 45): per-tensor and row-wise scales at the shapes,
        # promoted (torch's default) and with use_fast_accum
        for fast in (False, True):
            for (m, n, k), rowwise in (((8192, 8192, 8192), False), ((8192, 8192, 8192), True),
                                       ((4096, 7168, 16384), False), ((4096, 7168, 16384), True)):
                yield compare_scaled_mm(m, n, k, rowwise, rounds, fast)
        for m, n, k in ((4096, 7168, 16384), (8192, 8192, 8192)):   # block scales (DeepSeek-V3's)
            yield compare_scaled_mm_blockwise(m, n, k, rounds)
        for layout in ("contiguous", "counts", "masked"):             # MoE experts, two empty
            yield compare_grouped(layout, 4096, 7168, rounds)
        yield compare_gemm(gemm_hopper("bf16", transpose_b=True), 4096, 4096, 4096, rounds,
                           transpose_b=True)
        yield compare_gemm(gemm_hopper("f32"), 4096, 4096, 4096, rounds, out_dtype="f32")
        yield compare_gemm(gemm("bf16"), 4096, 4096, 4096, rounds)


def attention_rows(quick: bool):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    from tkc.kernels import attention_fwd
    configs = [(16, 16, 1024), (8, 16, 4096)] if not quick else [(4, 8, 1024)]
    # the paper's Figure 1 kernel (warp-level mma.sync); tkc.attention, the
    # Hopper kernels forward and backward, has its own benchmark: bench/attention.py
    kernels = [(64, attention_fwd(64, KV_SUB=32)), (128, attention_fwd(128, KV_SUB=16))]
    for D, k in kernels:
        for B, H, N in configs:
            q, kk, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            o = torch.full_like(q, float("nan"))
            scale = 1.0 / math.sqrt(D)
            k(q, kk, v, o, scale)
            ref = sdpa(q.float(), kk.float(), v.float(), scale=scale)
            err = rel_err(o, ref)
            flops = 4.0 * B * H * N * N * D
            t_tkc = bench(lambda: k(q, kk, v, o, scale))
            row = dict(kernel=k.name, shape=f"B{B} H{H} N{N} D{D}", rel_err=err,
                       tkc_tflops=tflops(flops, t_tkc))
            for name, backend in (("SDPA-flash", SDPBackend.FLASH_ATTENTION),
                                  ("SDPA-cuDNN", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        t = bench(lambda: sdpa(q, kk, v, scale=scale))
                    yield {**row, "peer": name, "peer_tflops": tflops(flops, t)}
                except RuntimeError as e:  # backend unavailable for this shape
                    yield {**row, "peer": name, "peer_tflops": float("nan"), "note": str(e)[:80]}
    from .attention_fp8 import rows as fp8_rows   # tkc.attention_fp8 against bf16 tkc.attention
    yield from fp8_rows(quick)


def _overhead() -> float:
    import torch
    from tkc.kernels import gemm
    k = gemm("bf16")  # the warp-level GEMM: a small kernel, so launch cost dominates
    a, b, c = (torch.randn(128, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    return launch_overhead_us(lambda: k(a, b, c))


def _git_commit() -> str:
    import os
    if os.environ.get("TKC_COMMIT"):  # the GPU machine gets a copy of the tree without .git
        return os.environ["TKC_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except Exception:
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tkc.bench")
    ap.add_argument("--out", default="bench-results.json")
    ap.add_argument("--quick", action="store_true", help="fewer, smaller shapes")
    ap.add_argument("--only", choices=("gemm", "attention"), help="one family of rows")
    args = ap.parse_args(argv)
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        print("tkc.bench: no CUDA GPU here (or no torch): kernels were compiled, not run.")
        return 0
    gpu = torch.cuda.get_device_name()
    rows, bad = [], 0
    print(f"{'kernel':36} {'shape':22} {'rel err':>9} {'tkc TF/s':>9} {'peer':>11} {'peer TF/s':>9} {'ratio':>6}  range")
    families = {"gemm": gemm_rows, "attention": attention_rows}
    picked = [families[args.only]] if args.only else list(families.values())
    for row in (r for family in picked for r in family(args.quick)):
        ok = row["rel_err"] < row.get("tol", 2e-2)   # FP8 attention's P: its own bound
        bad += not ok
        if "ratio" not in row:
            row["ratio"] = row["tkc_tflops"] / row["peer_tflops"] \
                if row["peer_tflops"] == row["peer_tflops"] else float("nan")
        rows.append(row)
        spread = f"{row['ratio_min']:.2f}-{row['ratio_max']:.2f}" if "ratio_min" in row else ""
        print(f"{row['kernel']:36} {row['shape']:22} {row['rel_err']:9.2e} {row['tkc_tflops']:9.1f} "
              f"{row['peer']:>11} {row['peer_tflops']:9.1f} {row['ratio']:6.2f}  {spread}"
              f"{'' if ok else '  WRONG'}", flush=True)
    meta = dict(date=datetime.date.today().isoformat(), gpu=gpu, commit=_git_commit(),
                torch=torch.__version__, launch_overhead_us=_overhead())
    print(f"tkc eager launch overhead (argument checks + cuLaunchKernelEx): "
          f"{meta['launch_overhead_us']:.1f} us per call")
    with open(args.out, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    print(f"{meta}  -> {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
