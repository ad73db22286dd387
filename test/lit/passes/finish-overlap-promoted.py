# tk-pipeline-staging, persistent: the finish moves into the next item's loop only when
# the tiles it carries fit beside every wgmma accumulator live in that loop, the ones its
# body starts itself too (a promoted GEMM's partial tile, zeroed each step). Three
# consumer warpgroups: the f32 accumulator alone leaves room for its bf16 copy, the
# finish tile (overlapped), the accumulator and the partial tile do not (the finish stays at
# the item's end; counted by iter args alone, the FP8 grouped GEMM carried them: 340
# bytes of spills, 2.3x slower on an H200).
# RUN: tkc %s --kernel plain | FileCheck %s --check-prefix=PLAIN
# RUN: tkc %s --kernel promoted | FileCheck %s --check-prefix=PROMOTED
import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import subtile, zero

# PLAIN-LABEL: func.func @plain
# PLAIN: scf.for {{.*}} iter_args({{.*}} = %false) -> ({{.*}}!tk.rt<bf16, 16 : i64, 128 : i64, "row">{{.*}}, i1) {
# PLAIN: } {tk.staged = {role = "consumer"
# PLAIN: } {tk.work_items}

# PROMOTED-LABEL: func.func @promoted
# PROMOTED-NOT: = %false) ->
# PROMOTED: } {tk.staged = {role = "consumer"
# PROMOTED: "tk.tma_store"
# PROMOTED: } {tk.work_items}


def gemm(promote: bool):
    def body(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "N", "K"), c: gl(bf16, 1, 1, "M", "N")):
        bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
        a_s, b_s = st(bf16, 192, 64), st(bf16, 128, 64)
        c_s = st(bf16, 192, 128)
        acc = zero(rt(f32, 16, 128))
        for k in tkc.range(a.c // 64, stages=3):
            tma.load(a_s, a, (0, 0, bm, k))
            tma.load(b_s, b, (0, 0, bn, k))
            if promote:   # each step's product into a partial tile, then into acc
                part = zero(rt(f32, 16, 128))
                warpgroup.mma_ABt(part, subtile(a_s, 64, 64, (wg, 0)), b_s)
                warpgroup.mma_async_wait(part)
                acc = acc + part
            else:
                warpgroup.mma_ABt(acc, subtile(a_s, 64, 64, (wg, 0)), b_s)
                warpgroup.mma_async_wait(acc)
        warpgroup.store(c_s, acc.to(bf16), (wg, 0))
        tma.store(c, c_s, (0, 0, bm, bn))
    body.__name__ = "promoted" if promote else "plain"
    return tkc.kernel(body, warps=12, persistent=True,
                      grid=lambda a, b, c: (c.c // 128, c.r // 192))


plain, promoted = gemm(False), gemm(True)
