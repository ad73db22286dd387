# Two small kernels for the CLI tests (tkc --kernel picks one).
import tkc
from tkc import bf16, f32, gl, rt, st
from tkc.frontend.ops import exp, group_load, load, row_max, store, sub_row, zero

G = gl(f32, 1, 1, None, 32)


@tkc.kernel(warps=2, grid=lambda a, o: (a.r // 32, 1, 1))
def softmax_rows(a: G, o: G):
    s = st(f32, 32, 32)
    group_load(s, a, (0, 0, tkc.block_idx.x, 0))
    tkc.sync()
    x = load(rt(f32, 16, 32), s, (tkc.warpid(), 0))
    m = row_max(x)
    y = exp(sub_row(x, m))
    store(o, y, (0, 0, tkc.block_idx.x * 2 + tkc.warpid(), 0))


@tkc.kernel
def zero_fill(o: gl(bf16, 1, 1, 16, 16)):
    store(o, zero(rt(bf16, 16, 16)), (0, 0, 0, 0))
