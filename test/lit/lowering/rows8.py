# 8-row tiles (fragments.HALF): an mma with an 8-row a and c is m16n8k16 with
# a zero register for a1 and a3 (rows 8-15) and one per 16 x 8 output; an
# 8-row bf16 tile moves through shared memory by ldmatrix/stmatrix .x2; a row
# reduction shuffles within the quad (xor 1, 2), a column reduction across
# the 8 row groups (xor 4, 8, 16), one element a lane and column.
# RUN: tkc %s --kernel mma8 --emit=tile | FileCheck %s
# RUN: tkc %s --kernel mma8 --emit=ptx | FileCheck %s --check-prefix=MMA
# RUN: tkc %s --kernel shared8 --emit=ptx | FileCheck %s --check-prefix=SHARED
# RUN: tkc %s --kernel reduce8 --emit=ptx | FileCheck %s --check-prefix=REDUCE
import tkc
from tkc import bf16, f32, gl, rt, st
from tkc.ops import col_sum, load, mma_ABt, row_max, store, zero

# CHECK-LABEL: func.func @mma8
# CHECK: "tk.mma_abt"{{.*}} -> !tk.rt<f32, 8 : i64, 16 : i64, "row">
# MMA-LABEL: .entry mma8(
# MMA: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# MMA-NEXT: {{.*}},
# MMA-NEXT: {%r{{[0-9]+}}, [[ZERO:%r[0-9]+]], %r{{[0-9]+}}, [[ZERO]]},
# MMA: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# MMA-NEXT: {{.*}},
# MMA-NEXT: {%r{{[0-9]+}}, [[ZERO]], %r{{[0-9]+}}, [[ZERO]]},
# MMA-NOT: mma.sync


@tkc.kernel(warps=1)
def mma8(a: gl(bf16, 1, 1, 8, 16), b: gl(bf16, 1, 1, 16, 16), c: gl(f32, 1, 1, 8, 16)):
    acc = zero(rt(f32, 8, 16))
    mma_ABt(acc, load(rt(bf16, 8, 16), a, (0, 0, 0, 0)), load(rt(bf16, 16, 16), b, (0, 0, 0, 0)), acc)
    store(c, acc, (0, 0, 0, 0))


# SHARED-LABEL: .entry shared8(
# SHARED-COUNT-2: ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r{{[0-9]+}}, %r{{[0-9]+}}}, [%r{{[0-9]+}}{{.*}}];
# SHARED-NOT: ldmatrix
# SHARED-COUNT-2: stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r{{[0-9]+}}{{.*}}], {%r{{[0-9]+}}, %r{{[0-9]+}}};
# SHARED-NOT: stmatrix


@tkc.kernel(warps=1)
def shared8(x: gl(bf16, 1, 1, 8, 32), y: gl(bf16, 1, 1, 8, 32)):
    s, t = st(bf16, 8, 32), st(bf16, 8, 32)
    tkc.ops.group_load(s, x, (0, 0, 0, 0))
    tkc.sync()
    store(t, load(rt(bf16, 8, 32), s, (0, 0)), (0, 0))
    tkc.sync()
    tkc.ops.group_store(y, t, (0, 0, 0, 0))


# REDUCE-LABEL: .entry reduce8(
# REDUCE: shfl.sync.bfly.b32 {{.*}}, 1, 31, -1;
# REDUCE: shfl.sync.bfly.b32 {{.*}}, 2, 31, -1;
# REDUCE-COUNT-4: shfl.sync.bfly.b32 {{.*}}, 4, 31, -1;
# REDUCE-NOT: shfl.sync.bfly.b32 {{.*}}, 1, 31, -1;


@tkc.kernel(warps=1)
def reduce8(x: gl(f32, 1, 1, 8, 16), r: gl(f32, 1, 1, 1, 8), c: gl(f32, 1, 1, 1, 16)):
    t = load(rt(f32, 8, 16), x, (0, 0, 0, 0))
    store(r, row_max(t), (0, 0, 0, 0))
    store(c, col_sum(t), (0, 0, 0, 0))
