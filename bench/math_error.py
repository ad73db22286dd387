"""The error of each tile math function on the GPU, against float64.

    python3 bench/math_error.py        # on the GPU; `tkc build bench/math_error.py` first

Each function runs on 2^20 inputs of its domain (positive ones log-spaced over
[2^-10, 2^10], signed ones evenly over [-8, 8]); the table gives the largest
absolute error, and the largest relative error where |f(x)| >= 1e-3, against
torch in float64. docs/tile-ir.md ("Math") quotes it.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tkc  # noqa: E402
from tkc import f32, gl, rt  # noqa: E402
from tkc import ops  # noqa: E402

# (exp2 over the signed inputs: over the positive ones it reaches 2^1024, past
# float32's and float64's range, and the table read nan)
SIGNED = ("exp", "exp2", "tanh", "sigmoid", "silu", "erf", "gelu", "gelu_tanh")
POSITIVE = ("log", "log2", "sqrt", "rsqrt", "rcp")
NAMES = SIGNED + POSITIVE + ("div", "div_ieee", "fma", "exp_fma")   # exp_fma: exp(x, fma=1)


@tkc.kernel(warps=4, grid=lambda s, p, o: (s.r // 64, 1, 1))
def math_ops(s: gl(f32, 1, 1, "R", 64), p: gl(f32, 1, 1, "R", 64), o: gl(f32, 1, 17, "R", 64)):
    row = tkc.block_idx.x * 4 + tkc.warpid()
    x = ops.load(rt(f32, 16, 64), s, (0, 0, row, 0))
    y = ops.load(rt(f32, 16, 64), p, (0, 0, row, 0))
    for i, name in enumerate(SIGNED):
        ops.store(o, getattr(ops, name)(x), (0, i, row, 0))
    for i, name in enumerate(POSITIVE):
        ops.store(o, getattr(ops, name)(y), (0, len(SIGNED) + i, row, 0))
    ops.store(o, ops.div(x, y), (0, 13, row, 0))
    ops.store(o, ops.div(x, y, ieee=True), (0, 14, row, 0))
    ops.store(o, ops.fma(x, y, x), (0, 15, row, 0))
    ops.store(o, ops.exp(x, fma=1.0), (0, 16, row, 0))   # every element on the FMA pipe


KERNELS = [math_ops]


def references(x, y):
    import torch
    r = {"exp": torch.exp(x), "tanh": torch.tanh(x), "sigmoid": torch.sigmoid(x),
         "silu": x * torch.sigmoid(x), "erf": torch.erf(x),
         "gelu": 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
         "gelu_tanh": 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
         "exp2": torch.exp2(x), "log": torch.log(y), "log2": torch.log2(y), "sqrt": torch.sqrt(y),
         "rsqrt": torch.rsqrt(y), "rcp": 1 / y, "div": x / y, "div_ieee": x / y, "fma": x * y + x,
         "exp_fma": torch.exp(x)}
    return [r[n] for n in NAMES]


def main():
    import torch
    n = 1 << 20
    s = torch.linspace(-8, 8, n, device="cuda", dtype=torch.float32).reshape(-1, 64)
    p = torch.exp2(torch.linspace(-10, 10, n, device="cuda", dtype=torch.float32)).reshape(-1, 64)
    o = torch.full((1, len(NAMES), n // 64, 64), float("nan"), device="cuda")
    math_ops(s, p, o)
    torch.cuda.synchronize()
    print(f"{'function':10} {'max abs err':>12} {'max rel err':>12}")
    for i, (name, ref) in enumerate(zip(NAMES, references(s.double(), p.double()))):
        got = o[0, i].double()
        err = (got - ref).abs()
        big = ref.abs() >= 1e-3
        rel = (err[big] / ref.abs()[big]).max().item()
        print(f"{name:10} {err.max().item():12.3e} {rel:12.3e}")


if __name__ == "__main__":
    main()
