"""One tkc.attention forward and backward (B4 H16 L4096 D128, causal and not),
for ncu: `ncu -k regex:attn --section SpeedOfLight --section WarpStateStats
--section ComputeWorkloadAnalysis python3 scripts/ncu_attention.py` (scripts/gpu.sh
step `profile`). Warmed up first, so only these launches are profiled."""
import torch

import tkc

q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
           for _ in range(3))
for causal in (False, True):
    tkc.attention(q, k, v, causal=causal).sum().backward()  # load the modules
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for causal in (False, True):
    o = tkc.attention(q, k, v, causal=causal)
    o.backward(torch.ones_like(o))
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
