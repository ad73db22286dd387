# tk-pipeline-staging, persistent: an activation in the finish (tkc.linear's silu,
# tkc.swiglu's gating: silu of one half of the accumulator times the other) is register
# work like a conversion: it stays at the item's end, its bf16 results are carried, and
# the stores run in the next item's loop. gelu's erf stays in place (its temporaries
# beside the carried tiles spilled): that finish is not rotated.
# RUN: tkc %s --kernel gated | FileCheck %s
# RUN: tkc %s --kernel gated_gelu | FileCheck %s --check-prefix=GELU
import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import gelu, silu, subtile, zero

# CHECK-LABEL: func.func @gated
# CHECK: scf.for %{{.*}} iter_args({{.*}}, %[[PREV:.*]] = %false) -> ({{.*}}!tk.rt<bf16, 16 : i64, 64 : i64, "row">{{.*}}, i1) {
# CHECK:   scf.for
# CHECK:     "tk.warpgroup_mma_abt"
# CHECK:     arith.andi %[[PREV]]
# CHECK:     scf.if
# CHECK:       "tk.tma_store"
# CHECK:   } {tk.staged = {role = "consumer"
# CHECK:   "tk.silu"
# CHECK:   "tk.mul"
# CHECK:   "tk.copy"
# CHECK:   "tk.silu"
# CHECK:   "tk.mul"
# CHECK:   scf.yield {{.*}}, %true
# CHECK: } {tk.work_items}
# GELU-LABEL: func.func @gated_gelu
# GELU-NOT: %false
# GELU: "tk.gelu"
# GELU: "tk.store"
# GELU: "tk.tma_store"
# GELU: } {tk.work_items}


def make(name, act):
    @tkc.kernel(name=name, warps=8, grid=lambda a, b, u, c: (c.c // 128, c.r // 128), persistent=True)
    def gated(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "N", "K"), u: gl(bf16, 1, 1, "N", "K"),
              c: gl(bf16, 1, 1, "M", "N")):
        bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
        a_s, b_s = st(bf16, 128, 64), st(bf16, 256, 64)
        c_s = [st(bf16, 128, 64) for _ in range(2)]
        acc = zero(rt(f32, 16, 256))
        for k in tkc.range(a.c // 64, stages=3):
            tma.load(a_s, a, (0, 0, bm, k))
            tma.load(subtile(b_s, 128, 64, (0, 0)), b, (0, 0, bn, k))
            tma.load(subtile(b_s, 128, 64, (1, 0)), u, (0, 0, bn, k))
            warpgroup.mma_ABt(acc, subtile(a_s, 64, 64, (wg, 0)), b_s)
            warpgroup.mma_async_wait(acc)
        for j in range(2):
            y = act(subtile(acc, 16, 64, (0, j))) * subtile(acc, 16, 64, (0, j + 2))
            warpgroup.store(c_s[j], y.to(bf16), (wg, 0))
            tma.store(c, c_s[j], (0, 0, bm, bn * 2 + j))

    return gated


gated = make("gated", silu)
gated_gelu = make("gated_gelu", gelu)
