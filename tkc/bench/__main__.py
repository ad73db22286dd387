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

from .timing import bench, launch_overhead_us, tflops


def _rel_err(x, ref) -> float:
    x, ref = x.double(), ref.double()
    return float((x - ref).norm() / ref.norm())


def gemm_rows(quick: bool):
    import torch
    from tkc.kernels import gemm, gemm_hopper, gemm_pipelined
    sizes = [1024, 2048] if quick else [1024, 2048, 4096, 8192]
    kernels = (gemm("bf16"), gemm_hopper("bf16"), gemm_pipelined("bf16"))
    for k, n in ((k, n) for k in kernels for n in sizes):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        c = torch.full((n, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        k(a, b, c)
        ref = a.float() @ b.float()
        err = _rel_err(c, ref)
        flops = 2.0 * n ** 3
        t_tkc = bench(lambda: k(a, b, c))
        t_ref = bench(lambda: torch.matmul(a, b))
        yield dict(kernel=k.name, shape=f"{n}x{n}x{n}", rel_err=err,
                   tkc_tflops=tflops(flops, t_tkc), peer="cuBLAS",
                   peer_tflops=tflops(flops, t_ref))


def attention_rows(quick: bool):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    from tkc.kernels import attention_fwd, attention_hopper
    configs = [(16, 16, 1024), (8, 16, 4096)] if not quick else [(4, 8, 1024)]
    kernels = [(64, attention_fwd(64, KV_SUB=32)), (64, attention_hopper(64, KV=128)),
               (128, attention_fwd(128, KV_SUB=16)), (128, attention_hopper(128, KV=64))]
    for D, k in kernels:
        for B, H, N in configs:
            q, kk, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            o = torch.full_like(q, float("nan"))
            scale = 1.0 / math.sqrt(D)
            k(q, kk, v, o, scale)
            ref = sdpa(q.float(), kk.float(), v.float(), scale=scale)
            err = _rel_err(o, ref)
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


def _overhead() -> float:
    import torch
    from tkc.kernels import gemm
    k = gemm("bf16")
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
    print(f"{'kernel':28} {'shape':22} {'rel err':>9} {'tkc TF/s':>9} {'peer':>11} {'peer TF/s':>9} {'ratio':>6}")
    for row in (*gemm_rows(args.quick), *attention_rows(args.quick)):
        ok = row["rel_err"] < 2e-2
        bad += not ok
        ratio = row["tkc_tflops"] / row["peer_tflops"] if row["peer_tflops"] == row["peer_tflops"] else float("nan")
        row["ratio"] = ratio
        rows.append(row)
        print(f"{row['kernel']:28} {row['shape']:22} {row['rel_err']:9.2e} {row['tkc_tflops']:9.1f} "
              f"{row['peer']:>11} {row['peer_tflops']:9.1f} {ratio:6.2f}{'' if ok else '  WRONG'}",
              flush=True)
    meta = dict(date=datetime.date.today().isoformat(), gpu=gpu, commit=_git_commit(),
                torch=torch.__version__, launch_overhead_us=_overhead())
    print(f"tkc eager launch overhead (argument checks + cuLaunchKernel): "
          f"{meta['launch_overhead_us']:.1f} us per call")
    with open(args.out, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    print(f"{meta}  -> {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
