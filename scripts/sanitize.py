"""The library GEMMs once each on small shapes, for compute-sanitizer:

    compute-sanitizer --tool memcheck|racecheck|synccheck --report-api-errors no \
        python3 scripts/sanitize.py

Shapes give several work items per persistent block, K steps that wrap the
ring, and ragged edges (TMA zero-fill and clipping). Results are checked
too, so a tool that perturbs timing cannot hide a wrong answer.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tkc.kernels import gemm_hopper  # noqa: E402

SHAPES = [(384, 768, 320), (200, 264, 72)]
bad = 0
for out in ("bf16", "f32"):
    for transpose_b in (False, True):
        k = gemm_hopper(out, transpose_b=transpose_b)
        for m, n, kk in SHAPES:
            a = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(*((n, kk) if transpose_b else (kk, n)), device="cuda", dtype=torch.bfloat16)
            c = torch.full((m, n), float("nan"), device="cuda",
                           dtype=torch.bfloat16 if out == "bf16" else torch.float32)
            k(a, b, c)
            torch.cuda.synchronize()
            ref = a.float() @ (b.float().T if transpose_b else b.float())
            err = float((c.double() - ref.double()).norm() / ref.double().norm())
            ok = err < (1e-2 if out == "bf16" else 1e-5)
            bad += not ok
            print(f"{k.name} {m}x{n}x{kk}: rel err {err:.2e} {'ok' if ok else 'WRONG'}", flush=True)
sys.exit(1 if bad else 0)
