# A Python mistake in the kernel body (block_idx is not callable).
import tkc
from tkc import f32, gl, rt
from tkc.frontend.ops import store, zero

@tkc.kernel
def k(o: gl(f32, 1, 1, 16, 16)):
    store(o, zero(rt(f32, 16, 16)), (0, 0, tkc.block_idx("x"), 0))
