"""tkc.attention's forward and cuDNN's at B4 H16 L4096 D64, one launch each,
for ncu's pipe utilisation (is the softmax's MUFU the bound at head dim 64?):
`ncu --profile-from-start off --section ComputeWorkloadAnalysis --page raw
python3 scripts/ncu_pipes.py`, then read sm__inst_executed_pipe_xu (MUFU)
and sm__pipe_tensor_cycles_active."""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

import tkc
from tkc.bench.timing import profile_once

q, k, v = (torch.randn(4, 16, 4096, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))


def cudnn():
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        sdpa(q, k, v)


profile_once([lambda: tkc.attention(q, k, v), cudnn])
