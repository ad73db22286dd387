# tk-pipeline-staging keeps a loop's wgmma in flight into the next iteration
# only when it reads A from shared memory. Here each step loads A's 16 rows
# into every warp's registers and multiplies them: the next iteration writes
# its A while this one's wgmma would still read the registers (undefined in
# PTX), so the body's wait stays a full one (pending = 0).
# RUN: tkc %s --emit=tile | FileCheck %s
import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import load, store, zero


# CHECK-LABEL: func.func @reg_a(
# CHECK: scf.for
# CHECK: "tk.load"
# CHECK: "tk.warpgroup_mma_ab"
# CHECK-NOT: pending = 1
# CHECK: "tk.warpgroup_mma_wait"({{.*}}) {pending = 0 : i64}
# CHECK-NOT: pending = 1
# CHECK: return
@tkc.kernel(warps=4, grid=lambda a, b, c: (tkc.cdiv(c.c, 64), 1))
def reg_a(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), c: gl(f32, 1, 1, "M", "N")):
    a_s, b_s = st(bf16, 16, 64), st(bf16, 64, 64)
    acc = zero(rt(f32, 16, 64))
    for k in tkc.range(tkc.cdiv(a.c, 64), stages=3):
        tma.load(a_s, a, (0, 0, 0, k))
        tma.load(b_s, b, (0, 0, k, tkc.block_idx.x))
        warpgroup.mma_AB(acc, load(rt(bf16, 16, 64), a_s, (0, 0)), b_s)
        warpgroup.mma_async_wait(acc)
    store(c, acc, (0, 0, tkc.warpid(), tkc.block_idx.x), clip=True)
