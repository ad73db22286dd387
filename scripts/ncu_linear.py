"""One launch each of tkc.based (L 4096) and tkc.linear_attention with decay
(F = DV = 64, L 1024), B16 H16, for ncu (scripts/gpu.sh, step "profile")."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tkc  # noqa: E402

q, k = (torch.randn(16, 16, 4096, 16, device="cuda").bfloat16() for _ in range(2))
v = torch.randn(16, 16, 4096, 64, device="cuda").bfloat16()
tkc.based(q, k, v)
q, k, v = (torch.randn(16, 16, 1024, 64, device="cuda").bfloat16() * 0.3 for _ in range(3))
g = -torch.rand(16, 16, 1024, device="cuda") * 0.05
tkc.linear_attention(q, k, v, g=g)
torch.cuda.synchronize()
