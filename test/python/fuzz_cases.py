"""Programs tkc fuzz generated that once computed wrong values, pinned as
text: the generator grows with the language, so (seed, index) names a
different program after each change (docs/fuzz.md). Each is a Program as
the generator of its day wrote it, with its arguments' shapes and the GPU
check's tolerances; tkc.fuzz.program.kernel_of / arrays work on it as on a
fresh one.
"""
from tkc.fuzz.core import Program
from tkc.fuzz.gls import Arg


# seed 2 program 764, as generated at a9c2f01
SEED2_764 = Program(seed=2, index=764, name='fuzz_2_764', grid=(2, 1), body_line=12,
    features=set(['broadcast', 'fma', 'load_ragged', 'load_vector', 'mma_AtB', 'persistent', 'range', 'row_sum', 'store_clip', 'swap_layout', 'tma_load', 'transpose', 'wgmma_mma_AB', 'zero']),
    args=[
        Arg('x0', 'f32', (1, 1, 64, 40), output=False, tol=0.0),
        Arg('x1', 'bf16', (1, 1, 64, 56), output=False, tol=0.0),
        Arg('a', 'bf16', (1, 1, 123, 16), output=False, tol=0.0),
        Arg('b', 'bf16', (1, 1, 16, 88), output=False, tol=0.0),
        Arg('o0', 'f32', (1, 1, 117, 104), output=True, tol=0.71875),
        Arg('o1', 'f32', (1, 1, 495, 32), output=True, tol=0.0625),
        Arg('o2', 'f32', (1, 1, 505, 24), output=True, tol=3.0),
    ],
    source='''\
import tkc
from tkc import bf16, f32, gl, rt, rv, st, sv, tma, warpgroup
from tkc.ops import *

@tkc.kernel(warps=8, grid=lambda x0, x1, a, b, o0, o1, o2: (2, 1), persistent=True)
def fuzz_2_764(x0: gl(f32, 1, 1, 64, 40), x1: gl(bf16, 1, 1, None, None), a: gl(bf16, 1, 1, None, 16), b: gl(bf16, 1, 1, 16, None), o0: gl(f32, 1, 1, None, 104), o1: gl(f32, 1, 1, None, 32), o2: gl(f32, 1, 1, None, None)):
    bx, by = tkc.block_idx.x, tkc.block_idx.y
    wg = tkc.warpgroupid()
    tr = by * 8 + tkc.warpid()
    s0 = st(bf16, 128, 64)
    s1 = st(bf16, 64, 64)
    acc = zero(rt(f32, 16, 64))
    k = 0
    tma.load(s0, a, (0, 0, by, k))
    tma.load(s1, b, (0, 0, k, bx))
    warpgroup.mma_AB(acc, subtile(s0, 64, 64, (wg, 0)), s1)
    warpgroup.mma_async_wait(acc)
    v1 = transpose(acc)
    v2 = load(rv(f32, 32, 'row'), x1, (0, 0, tr, bx), fill=-0.5)
    v4 = row_sum(v1)
    for i0 in tkc.range(3):
        v5 = fma(v1, v1, v1)
        v6 = load(rv(f32, 16, 'row'), x1, (0, 0, tr, i0), fill=-0.5)
        v7 = load(rt(bf16, 32, 16, 'row'), x0, (0, 0, tr, i0), fill=0.0)
        v8 = swap_layout(v7)
        v9 = load(rt(bf16, 32, 64, 'col'), x0, (0, 0, tr, i0), fill=-0.5)
        acc = mma_AtB(v8, v9, acc)
    v11 = add_row(zero(rt(f32, 64, 16)), v4)
    store(o0, acc, (0, 0, tr, bx), clip=True)
    store(o1, v1, (0, 0, tr, bx), clip=True)
    store(o2, v11, (0, 0, tr, bx), clip=True)
''')

# seed 2 program 1881, as generated at a9c2f01
SEED2_1881 = Program(seed=2, index=1881, name='fuzz_2_1881', grid=(2, 1), body_line=12,
    features=set(['binary_min', 'persistent', 'store_clip', 'tma_load', 'wgmma_mma_AtB', 'zero']),
    args=[
        Arg('x0', 'f32', (1, 1, 32, 16), output=False, tol=0.0),
        Arg('a', 'bf16', (1, 1, 56, 128), output=False, tol=0.0),
        Arg('b', 'bf16', (1, 1, 56, 80), output=False, tol=0.0),
        Arg('o0', 'f32', (1, 1, 128, 80), output=True, tol=0.0625),
        Arg('o1', 'f32', (1, 1, 113, 120), output=True, tol=0.0625),
    ],
    source='''\
import tkc
from tkc import bf16, f32, gl, rt, rv, st, sv, tma, warpgroup
from tkc.ops import *

@tkc.kernel(warps=8, grid=lambda x0, a, b, o0, o1: (2, 1), persistent=True)
def fuzz_2_1881(x0: gl(f32, 1, 1, 32, 16), a: gl(bf16, 1, 1, None, 128), b: gl(bf16, 1, 1, None, None), o0: gl(f32, 1, 1, 128, 80), o1: gl(f32, 1, 1, None, None)):
    bx, by = tkc.block_idx.x, tkc.block_idx.y
    wg = tkc.warpgroupid()
    tr = by * 8 + tkc.warpid()
    s0 = st(bf16, 64, 128)
    s1 = st(bf16, 64, 64)
    acc = zero(rt(f32, 16, 64))
    k = 0
    tma.load(s0, a, (0, 0, k, by))
    tma.load(s1, b, (0, 0, k, bx))
    warpgroup.mma_AtB(acc, subtile(s0, 64, 64, (0, wg)), s1)
    warpgroup.mma_async_wait(acc)
    v1 = min(acc, acc)
    store(o0, acc, (0, 0, tr, bx), clip=True)
    store(o1, v1, (0, 0, tr, bx), clip=True)
''')

PROGRAMS = [SEED2_764, SEED2_1881]
