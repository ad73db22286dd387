import tkc
from tkc import bf16, f32, gl, rt
from tkc.frontend.ops import load, mma_AB, zero


@tkc.kernel
def bad(a: gl(bf16, 1, 1, 32, 32)):
    x = load(rt(bf16, 16, 32), a, (0, 0, 0, 0))
    mma_AB(x, x, zero(rt(f32, 16, 16)))
