# tk-pipeline-staging in (1, 2, 1) clusters, A read through a slice of its gl at
# the block's first row: the load's coordinates are the same in both CTAs of a
# cluster's column, but its source follows block_idx.y, so A stays a plain load
# in each CTA; B's (block_idx.x, k) is shared down the column, each CTA loading
# 32 of its 64 rows. The k loop's bound is the slice's columns, its source's:
# the same in both CTAs, so B's k coordinate is too.
# RUN: tkc %s --kernel column_slices --emit=tile | FileCheck %s
import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import store, subtile, zero

# CHECK-LABEL: func.func @column_slices
# CHECK: %[[ROWS:.*]] = "tk.gl_slice"
# CHECK-NOT: "tk.tma_load_multicast"(%{{[0-9]+}}, %[[ROWS]],
# CHECK: "tk.tma_load"(%{{.*}}, %[[ROWS]], {{.*}}) : (!tk.st<bf16, 128 : i64, 64 : i64, "128b">
# CHECK: "tk.tma_load_multicast"(%{{.*}}, %arg1, {{.*}}) : (!tk.st<bf16, 32 : i64, 128 : i64, "128b">
# CHECK: } {tk.staged = {role = "producer"
# CHECK: } {tk.staged = {role = "consumer"
@tkc.kernel(warps=8, cluster=(1, 2, 1),
            grid=lambda a, b, c: (tkc.cdiv(c.c, 128), tkc.cdiv(c.r, 2 * 128) * 2))
def column_slices(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), c: gl(f32, 1, 1, "M", "N")):
    bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
    rows = a.slice("r", bm * 128, 128)
    a_s, b_s = st(bf16, 128, 64), st(bf16, 64, 128)
    acc = zero(rt(f32, 16, 128))
    for k in tkc.range(tkc.cdiv(rows.c, 64), stages=3):
        tma.load(a_s, rows, (0, 0, 0, k))
        tma.load(b_s, b, (0, 0, k, bn))
        warpgroup.mma_AB(acc, subtile(a_s, 64, 64, (wg, 0)), b_s)
        warpgroup.mma_async_wait(acc)
    store(c, acc, (0, 0, bm * 8 + tkc.warpid(), bn), clip=True)
