"""One tkc.attention forward and backward (B4 H16 L4096 D128, causal and not),
for ncu: `ncu -k regex:attn --section SpeedOfLight --section WarpStateStats
--section ComputeWorkloadAnalysis python3 scripts/ncu_attention.py` (scripts/gpu.sh
step `profile`). Warmed up first, so only these launches are profiled."""
import torch

import tkc
from tkc.bench.timing import profile_once

q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
           for _ in range(3))
profile_once([lambda causal=causal: tkc.attention(q, k, v, causal=causal).sum().backward()
              for causal in (False, True)])
