"""Ragged programs tkc fuzz generated (tkc/fuzz/ragged.py), pinned as text
for test/gpu/test_fuzz_ragged_gpu.py and test_fuzz_ragged.py: the generator
grows, so (seed, index) names another program after a change (docs/fuzz.md).
Seed 40, as generated at 796f4e3: zigzag and not, "auto" and grouped orders,
2 consumer warpgroups, partly live groups, a count gl shorter than the groups,
every group empty, TMA stores and atomic_add counters."""
from tkc.fuzz.core import Program
from tkc.fuzz.gls import Arg


# seed 40 program 343
SEED40_343 = Program(seed=40, index=343, name='fuzz_40_343', grid=(1, 2), body_line=12,
    features=set(['atomic_add', 'persistent', 'pipelined', 'ragged', 'store_clip', 'store_index_element', 'tma_load', 'wgmma_mma_AtBt', 'zero']),
    args=[
        Arg(name='x0', dtype='f32', shape=(1, 1, 21, 48), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='w0', dtype='i64', shape=(1, 1, 1, 16), output=False, tol=0.0, static=False, ints=(1099511627779, 1099511627843), block_rows=0, values=None),
        Arg(name='count', dtype='i32', shape=(1, 1, 1, 2), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=(89, 0)),
        Arg(name='a', dtype='bf16', shape=(1, 1, 144, 232), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='b', dtype='bf16', shape=(1, 1, 16, 144), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='o0', dtype='f32', shape=(1, 3, 246, 16), output=True, tol=0.1875, static=False, ints=(-100, 100), block_rows=128, values=None),
        Arg(name='o1', dtype='i32', shape=(1, 3, 2, 1), output=True, tol=0.0, static=False, ints=(-100, 100), block_rows=1, values=None),
        Arg(name='o2', dtype='i32', shape=(1, 3, 16, 1), output=True, tol=0.0, static=False, ints=(-100, 100), block_rows=8, values=None),
    ],
    source='''\
import tkc
from tkc import bf16, f32, gl, i32, i64, rt, rv, st, sv, tma, warpgroup
from tkc.ops import *

@tkc.kernel(warps=8, grid=lambda x0, w0, count, a, b, o0, o1, o2: (1, 2, 3), persistent="zigzag", ragged=("count", 128))
def fuzz_40_343(x0: gl(f32, 1, 1, 21, None), w0: gl(i64, 1, 1, 1, 16), count: gl(i32, 1, 1, None, None), a: gl(bf16, 1, 1, 144, 232), b: gl(bf16, 1, 1, None, 144), o0: gl(f32, 1, 3, None, None), o1: gl(i32, 1, 3, None, 1), o2: gl(i32, 1, 3, None, 1)):
    bx, by, bz = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
    wg = tkc.warpgroupid()
    tr = by * 8 + tkc.warpid()
    s0 = st(bf16, 64, 128)
    s1 = st(bf16, 16, 64)
    acc = zero(rt(f32, 16, 16))
    for k in tkc.range(3, stages=2):
        tma.load(s0, a, (0, 0, k, by))
        tma.load(s1, b, (0, 0, bx, k))
        warpgroup.mma_AtBt(acc, subtile(s0, 64, 64, (0, wg)), s1)
        warpgroup.mma_async_wait(acc)
    store(o0, acc, (0, bz, tr, bx), clip=True)
    old = atomic_add(o1, 1, at=(0, bz, by, bx), after=[o0])
    store(o2, old + tr, at=(0, bz, tr, bx), clip=True)
''')

# seed 40 program 845
SEED40_845 = Program(seed=40, index=845, name='fuzz_40_845', grid=(1, 3), body_line=14,
    features=set(['group_load', 'if', 'load_shared', 'persistent', 'ragged', 'store_clip', 'store_shared', 'sync', 'tma_load', 'tma_store', 'wgmma_mma_AtBt', 'zero']),
    args=[
        Arg(name='x0', dtype='f32', shape=(1, 1, 37, 32), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='x1', dtype='bf16', shape=(1, 1, 72, 72), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='n0', dtype='i32', shape=(1, 1, 37, 24), output=False, tol=0.0, static=False, ints=(-2147483648, 2147483647), block_rows=0, values=None),
        Arg(name='count', dtype='i32', shape=(1, 1, 1, 3), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=(24, 108, 146)),
        Arg(name='a', dtype='bf16', shape=(1, 1, 8, 160), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='b', dtype='bf16', shape=(1, 1, 16, 8), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='y0', dtype='f32', shape=(1, 1, 384, 96), output=False, tol=0.0, static=True, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='o0', dtype='f32', shape=(1, 3, 178, 24), output=True, tol=0.0625, static=False, ints=(-100, 100), block_rows=64, values=None),
        Arg(name='o1', dtype='f32', shape=(1, 3, 353, 8), output=True, tol=0.0, static=False, ints=(-100, 100), block_rows=128, values=None),
    ],
    source='''\
import tkc
from tkc import bf16, f32, gl, i32, i64, rt, rv, st, sv, tma, warpgroup
from tkc.ops import *

@tkc.kernel(warps=4, grid=lambda x0, x1, n0, count, a, b, y0, o0, o1: (1, 3, 3), persistent=True, order="grouped(y, 2)", ragged=("count", 64))
def fuzz_40_845(x0: gl(f32, 1, 1, 37, None), x1: gl(bf16, 1, 1, None, 72), n0: gl(i32, 1, 1, 37, 24), count: gl(i32, 1, 1, None, None), a: gl(bf16, 1, 1, 8, None), b: gl(bf16, 1, 1, 16, 8), y0: gl(f32, 1, 1, 384, 96), o0: gl(f32, 1, 3, None, None), o1: gl(f32, 1, 3, None, 8)):
    bx, by, bz = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
    wg = tkc.warpgroupid()
    tr = by * 4 + tkc.warpid()
    s0 = st(bf16, 32, 64)
    s1 = st(bf16, 32, 32)
    s2 = st(f32, 128, 32)
    s3 = st(f32, 128, 32)
    acc = zero(rt(f32, 16, 32))
    k = 0
    tma.load(s0, a, (0, 0, k, by))
    tma.load(s1, b, (0, 0, bx, k))
    warpgroup.mma_AtBt(acc, subtile(s0, 32, 64, (0, wg)), s1)
    warpgroup.mma_async_wait(acc)
    group_load(s2, y0, (0, 0, by, bx))
    tkc.sync()
    v1 = load(rt(f32, 32, 32, 'col'), s2, (0, 0))
    tkc.sync()
    with tkc.if_(tr > 0):
        acc = acc * 1.0
    store(o0, acc, (0, bz, tr, bx), clip=True)
    store(s3, v1, (tkc.warpid(), 0))
    tma.store(o1, s3, (0, bz, by, bx))
''')

# seed 40 program 1322
SEED40_1322 = Program(seed=40, index=1322, name='fuzz_40_1322', grid=(1, 2), body_line=18,
    features=set(['atomic_add', 'load_ragged', 'load_shared', 'mma_AtBt', 'persistent', 'pipelined', 'ragged', 'store_clip', 'store_index_element', 'store_shared', 'swap_layout', 'sync', 'tma_gather', 'tma_load', 'tma_load_subtile', 'tma_store', 'wgmma_mma_AB', 'zero']),
    args=[
        Arg(name='x0', dtype='f32', shape=(1, 1, 129, 32), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='x1', dtype='bf16', shape=(1, 1, 96, 56), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='count', dtype='i32', shape=(1, 1, 1, 1), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=(94,)),
        Arg(name='a', dtype='bf16', shape=(1, 1, 102, 96), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='b', dtype='bf16', shape=(1, 1, 96, 16), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='t0', dtype='i32', shape=(1, 1, 1, 4), output=False, tol=0.0, static=False, ints=(-2, 5), block_rows=0, values=None),
        Arg(name='o0', dtype='f32', shape=(1, 2, 124, 8), output=True, tol=0.09375, static=False, ints=(-100, 100), block_rows=64, values=None),
        Arg(name='o1', dtype='f32', shape=(1, 2, 128, 8), output=True, tol=0.21875, static=False, ints=(-100, 100), block_rows=64, values=None),
        Arg(name='o2', dtype='f32', shape=(1, 2, 115, 24), output=True, tol=0.0, static=False, ints=(-100, 100), block_rows=64, values=None),
        Arg(name='o3', dtype='i32', shape=(1, 2, 2, 1), output=True, tol=0.0, static=False, ints=(-100, 100), block_rows=1, values=None),
        Arg(name='o4', dtype='i32', shape=(1, 2, 8, 1), output=True, tol=0.0, static=False, ints=(-100, 100), block_rows=4, values=None),
    ],
    source='''\
import tkc
from tkc import bf16, f32, gl, i32, i64, rt, rv, st, sv, tma, warpgroup
from tkc.ops import *

@tkc.kernel(warps=4, grid=lambda x0, x1, count, a, b, t0, o0, o1, o2, o3, o4: (1, 2, 2), persistent=True, order="grouped(x, 2)", ragged=("count", 64))
def fuzz_40_1322(x0: gl(f32, 1, 1, None, 32), x1: gl(bf16, 1, 1, 96, 56), count: gl(i32, 1, 1, None, 1), a: gl(bf16, 1, 1, None, None), b: gl(bf16, 1, 1, 96, None), t0: gl(i32, 1, 1, None, None), o0: gl(f32, 1, 2, None, 8), o1: gl(f32, 1, 2, None, 8), o2: gl(f32, 1, 2, 115, None), o3: gl(i32, 1, 2, 2, 1), o4: gl(i32, 1, 2, None, 1)):
    bx, by, bz = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
    wg = tkc.warpgroupid()
    tr = by * 4 + tkc.warpid()
    s0 = st(bf16, 64, 32)
    s1 = st(bf16, 32, 32)
    s2 = subtile(s0, 32, 32, (0, 0))
    s3 = subtile(s0, 32, 32, (1, 0))
    p0 = load(i32, t0, at=(0, 0, 0, by * 2 + 0), fill=-1)
    p1 = load(i32, t0, at=(0, 0, 0, by * 2 + 1), fill=-1)
    s6 = st(f32, 64, 32)
    s7 = st(f32, 64, 32)
    acc = zero(rt(f32, 16, 32))
    for k in tkc.range(3, stages="auto"):
        tma.load(s2, a, (0, 0, p0, k))
        tma.load(s3, a, (0, 0, p1, k))
        tma.load(s1, b, (0, 0, k, bx))
        warpgroup.mma_AB(acc, subtile(s0, 64, 32, (wg, 0)), s1)
        warpgroup.mma_async_wait(acc)
    store(s6, acc, (tkc.warpid(), 0))
    tkc.sync()
    v1 = load(rt(f32, 16, 32, 'row'), s6, ((tkc.warpid() + 1) % 4, 0))
    tkc.sync()
    v2 = load(rt(bf16, 16, 16, 'col'), x0, (0, 0, tr, bx), fill=-0.5)
    v3 = load(rt(bf16, 32, 16, 'col'), x0, (0, 0, tr, bx), fill=-0.5)
    v4 = swap_layout(v3)
    v5 = mma_AtBt(v2, v4, acc)
    v6 = load(rt(f32, 16, 32, 'col'), x0, (0, 0, tr, bx), fill=0.0)
    store(o0, v1, (0, bz, tr, bx), clip=True)
    store(o1, v5, (0, bz, tr, bx), clip=True)
    store(s7, v6, (tkc.warpid(), 0))
    tma.store(o2, s7, (0, bz, by, bx))
    old = atomic_add(o3, 1, at=(0, bz, by, bx), after=[o2, o1, o0])
    store(o4, old + tr, at=(0, bz, tr, bx), clip=True)
''')

# seed 40 program 1633
SEED40_1633 = Program(seed=40, index=1633, name='fuzz_40_1633', grid=(1, 3), body_line=12,
    features=set(['atomic_add', 'binary_min', 'carry_add', 'load_at', 'load_ragged', 'persistent', 'pipelined', 'ragged', 'range', 'rows8', 'store_clip', 'store_index_element', 'tma_load', 'wgmma_mma_AtB', 'zero']),
    args=[
        Arg(name='x0', dtype='bf16', shape=(1, 1, 32, 64), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='count', dtype='i32', shape=(1, 1, 1, 3), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=(31, 11, 46)),
        Arg(name='a', dtype='bf16', shape=(1, 1, 64, 192), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='b', dtype='bf16', shape=(1, 1, 64, 16), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='o0', dtype='f32', shape=(1, 3, 180, 8), output=True, tol=0.1259765625, static=False, ints=(-100, 100), block_rows=64, values=None),
        Arg(name='o1', dtype='bf16', shape=(1, 3, 368, 24), output=True, tol=0.0, static=False, ints=(-100, 100), block_rows=128, values=None),
        Arg(name='o2', dtype='f32', shape=(1, 3, 177, 8), output=True, tol=0.1259765625, static=False, ints=(-100, 100), block_rows=64, values=None),
        Arg(name='o3', dtype='i32', shape=(1, 3, 3, 1), output=True, tol=0.0, static=False, ints=(-100, 100), block_rows=1, values=None),
        Arg(name='o4', dtype='i32', shape=(1, 3, 12, 1), output=True, tol=0.0, static=False, ints=(-100, 100), block_rows=4, values=None),
    ],
    source='''\
import tkc
from tkc import bf16, f32, gl, i32, i64, rt, rv, st, sv, tma, warpgroup
from tkc.ops import *

@tkc.kernel(warps=4, grid=lambda x0, count, a, b, o0, o1, o2, o3, o4: (1, 3, 3), persistent="zigzag", order="grouped(x, 2)", ragged=("count", 16))
def fuzz_40_1633(x0: gl(bf16, 1, 1, None, 64), count: gl(i32, 1, 1, 1, 3), a: gl(bf16, 1, 1, 64, None), b: gl(bf16, 1, 1, None, 16), o0: gl(f32, 1, 3, None, 8), o1: gl(bf16, 1, 3, 368, 24), o2: gl(f32, 1, 3, 177, None), o3: gl(i32, 1, 3, None, None), o4: gl(i32, 1, 3, 12, 1)):
    bx, by, bz = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
    wg = tkc.warpgroupid()
    tr = by * 4 + tkc.warpid()
    s0 = st(bf16, 32, 64)
    s1 = st(bf16, 32, 16)
    acc = zero(rt(f32, 16, 16))
    for k in tkc.range(2, stages="auto"):
        tma.load(s0, a, (0, 0, k, by))
        tma.load(s1, b, (0, 0, k, bx))
        warpgroup.mma_AtB(acc, subtile(s0, 32, 64, (0, wg)), s1)
        warpgroup.mma_async_wait(acc)
    for i0 in tkc.range(1):
        v1 = load(rt(f32, 8, 64, 'row'), x0, (0, 0, tr, bx), fill=0.0)
        v2 = load(rt(f32, 16, 16, 'row'), x0, at=(0, 0, tr * 16 + 1, bx * 16 + 16), fill=-0.5)
        acc = acc + v2
    v3 = zero(rt(bf16, 32, 32, 'col'))
    v5 = min(acc, 1.0)
    store(o0, acc, (0, bz, tr, bx), clip=True)
    store(o1, v3, (0, bz, tr, bx), clip=True)
    store(o2, v5, (0, bz, tr, bx), clip=True)
    old = atomic_add(o3, 1, at=(0, bz, by, bx), after=[o2, o1, o0])
    store(o4, old + tr, at=(0, bz, tr, bx), clip=True)
''')

# seed 40 program 1830
SEED40_1830 = Program(seed=40, index=1830, name='fuzz_40_1830', grid=(2, 3), body_line=14,
    features=set(['binary_add', 'binary_sub', 'carry_scalar', 'carry_scalar_count', 'if', 'if_scalar', 'load_f32_element', 'load_ragged', 'load_shared', 'mma_AtB', 'mma_relayout', 'neg_infty_i32', 'ones', 'persistent', 'pipelined', 'ragged', 'ragged_empty', 'range', 'relu', 'row_max', 'store_clip', 'store_index_element', 'store_shared', 'swap_layout', 'sync', 'tma_load', 'tma_store', 'wgmma_mma_AtBt', 'zero']),
    args=[
        Arg(name='x0', dtype='f32', shape=(1, 1, 27, 144), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='x1', dtype='bf16', shape=(1, 1, 21, 56), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='n0', dtype='i32', shape=(1, 1, 37, 104), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='count', dtype='i32', shape=(1, 1, 1, 3), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=(-1, -128, 0)),
        Arg(name='a', dtype='bf16', shape=(1, 1, 64, 360), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='b', dtype='bf16', shape=(1, 1, 80, 64), output=False, tol=0.0, static=False, ints=(-100, 100), block_rows=0, values=None),
        Arg(name='o0', dtype='f32', shape=(1, 3, 369, 112), output=True, tol=0.09375, static=False, ints=(-100, 100), block_rows=128, values=None),
        Arg(name='o1', dtype='f32', shape=(1, 3, 380, 96), output=True, tol=0.8154296875, static=False, ints=(-100, 100), block_rows=128, values=None),
        Arg(name='o2', dtype='f32', shape=(1, 3, 378, 56), output=True, tol=0.0, static=False, ints=(-100, 100), block_rows=128, values=None),
        Arg(name='o3', dtype='i64', shape=(1, 3, 24, 2), output=True, tol=0.0, static=False, ints=(-100, 100), block_rows=8, values=None),
    ],
    source='''\
import tkc
from tkc import bf16, f32, gl, i32, i64, rt, rv, st, sv, tma, warpgroup
from tkc.ops import *

@tkc.kernel(warps=8, grid=lambda x0, x1, n0, count, a, b, o0, o1, o2, o3: (2, 3, 3), persistent=True, order="xyz", ragged=("count", 128))
def fuzz_40_1830(x0: gl(f32, 1, 1, 27, 144), x1: gl(bf16, 1, 1, 21, 56), n0: gl(i32, 1, 1, None, None), count: gl(i32, 1, 1, 1, None), a: gl(bf16, 1, 1, None, 360), b: gl(bf16, 1, 1, 80, None), o0: gl(f32, 1, 3, None, None), o1: gl(f32, 1, 3, 380, 96), o2: gl(f32, 1, 3, None, None), o3: gl(i64, 1, 3, None, None)):
    bx, by, bz = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
    wg = tkc.warpgroupid()
    tr = by * 8 + tkc.warpid()
    s0 = st(bf16, 64, 128)
    s1 = st(bf16, 64, 64)
    s2 = st(f32, 128, 64)
    s3 = st(f32, 128, 64)
    acc = zero(rt(f32, 16, 64))
    for k in tkc.range(1, stages="auto"):
        tma.load(s0, a, (0, 0, k, by))
        tma.load(s1, b, (0, 0, bx, k))
        warpgroup.mma_AtBt(acc, subtile(s0, 64, 64, (0, wg)), s1)
        warpgroup.mma_async_wait(acc)
    with tkc.if_(tr > 0):
        v1 = acc - -0.75
        v2 = neg_infty(rt(i32, 16, 64, 'row'))
        acc = acc * -0.75
    store(s2, acc, (tkc.warpid(), 0))
    tkc.sync()
    v3 = load(rt(f32, 16, 64, 'row'), s2, ((tkc.warpid() + 1) % 8, 0))
    tkc.sync()
    v4 = v3 + -0.75
    v5 = ones(rt(f32, 16, 32, 'row'))
    v6 = tkc.i32(0)
    for i0 in tkc.range(3):
        v7 = relu(v3)
        v8 = row_max(acc)
        v9 = load(rt(bf16, 32, 16, 'row'), x1, (0, 0, tr, i0), fill=-0.5)
        v10 = load(rt(bf16, 32, 64, 'row'), x0, (0, 0, tr, bx), fill=-0.5)
        v11 = swap_layout(v10)
        v4 = mma_AtB(v9, v11, v4)
        v13 = load(f32, x1, at=(0, 0, tr, i0 * 8 + 5), fill=-2.0)
        with tkc.if_(v13 > 0.0):
            v6 = v6 + 2
    store(o0, v3, (0, bz, tr, bx), clip=True)
    store(s3, v4, (tkc.warpid(), 0))
    tma.store(o1, s3, (0, bz, by, bx))
    store(o2, v5, (0, bz, tr, bx), clip=True)
    store(o3, v6, at=(0, bz, tr, bx), clip=True)
''')

PROGRAMS = [SEED40_343, SEED40_845, SEED40_1322, SEED40_1633, SEED40_1830]
