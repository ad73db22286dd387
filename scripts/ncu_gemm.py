"""One 4096^3 launch of each Hopper GEMM, for `ncu` (tensor-pipe utilisation,
DRAM throughput, shared-memory bank conflicts)."""
import torch

from tkc.kernels import gemm_hopper, gemm_pipelined

n = 4096
a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
for k in (gemm_hopper("bf16"), gemm_pipelined("bf16")):
    k(a, b, c)
torch.cuda.synchronize()
