import torch, sys
sys.path.insert(0, ".")
from tkc.kernels import gemm_pipelined
k = gemm_pipelined("bf16")
a = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16); b = torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)
c = torch.full((256, 512), float("nan"), device="cuda", dtype=torch.bfloat16)
k(a, b, c); torch.cuda.synchronize()
ref = a.float() @ b.float()
print("pipelined smoke rel err", float((c.float() - ref).norm() / ref.norm()))
