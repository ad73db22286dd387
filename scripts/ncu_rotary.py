"""One launch each of a copy (x.clone()), tkc's rotary (half-split and
interleaved) and torch.compile's rotary, B16 H16 L4096 D128, for ncu (the
profile that showed the register-tile rotary L1-bound):
`ncu --profile-from-start off --section SpeedOfLight --section
MemoryWorkloadAnalysis_Tables ... python3 scripts/ncu_rotary.py` (scripts/gpu.sh,
step "profile"). torch.compile's Triton source goes to $OUT/rotary-inductor.py
when OUT is set. Everything is warmed up first, so only these launches are profiled."""
import os
import sys

import torch
from torch._inductor.utils import run_and_get_code

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.memory_bound import rope_eager  # noqa: E402
from tkc.bench.timing import profile_once  # noqa: E402
import tkc.torchops as torch_ops  # noqa: E402

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
