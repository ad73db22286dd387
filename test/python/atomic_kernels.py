"""A test kernel shared by the interpreter test (test_interpreter_frontend.py)
and the GPU's (test/gpu/test_scalars_gpu.py): imports tkc only, so a GPU
machine without MLIR imports it too."""
import tkc
from tkc import bf16, f32, gl, i32, rt
from tkc.ops import atomic_add, load, store


@tkc.kernel(warps=2, grid=lambda x, o1, o2, count, y: (x.r // 32, 1, 1))
def atomic_after_two(x: gl(f32, 1, 1, "R", 16), o1: gl(f32, 1, 1, 32, 16), o2: gl(bf16, 1, 1, "R", 16),
                     count: gl(i32, 1, 1, 1, 1), y: gl(f32, 1, 1, 32, 16)):
    """atomic_add after two outputs of different shapes and dtypes (issue 41:
    the traced IR did not verify): each block adds its rows into o1 and
    copies them to o2; the last block to count itself writes o1 + the sum
    of o2's tiles into y."""
    b, w = tkc.block_idx.x, tkc.warpid()
    t = load(rt(f32, 16, 16), x, (0, 0, 2 * b + w, 0))
    store(o1, t, (0, 0, w, 0), add=True)
    store(o2, t.to(bf16), (0, 0, 2 * b + w, 0))
    done = atomic_add(count, 1, at=(0, 0, 0, 0), after=[o1, o2])
    with tkc.if_(done == x.r // 32 - 1):
        acc = load(rt(f32, 16, 16), o1, (0, 0, w, 0))
        for k in tkc.range(x.r // 32):
            acc = acc + load(rt(bf16, 16, 16), o2, (0, 0, 2 * k + w, 0)).to(f32)
        store(y, acc, (0, 0, w, 0))
