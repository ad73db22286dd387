"""ThunderKittens' Based output (tk_based's dump at L 1024) against FLA's
parallel_based(use_norm=False) on the same inputs (q = k), on the GPU
machine with FLA on PYTHONPATH: python3 check.py DUMP."""
import sys, numpy as np, torch
from fla.ops.based import parallel_based
B, H, N = 16, 16, 1024
raw = np.fromfile(sys.argv[1], dtype=np.uint16)
nqk, nvo = B * H * N * 16, B * H * N * 64
t = lambda a, d: torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16).reshape(B, H, N, d).cuda()
q, v, o = t(raw[:nqk], 16), t(raw[nqk:nqk + nvo], 64), t(raw[nqk + nvo:], 64)
ref = parallel_based(q.transpose(1, 2), q.transpose(1, 2), v.transpose(1, 2), use_norm=False).transpose(1, 2).float()
print("TK based L1024 vs FLA parallel_based: rel. difference %.2e" % ((o.float() - ref).norm() / ref.norm()).item())
