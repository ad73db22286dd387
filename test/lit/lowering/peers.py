# Several GPUs, point to point: a pgl argument's parameters are its pointer
# and runtime dims, then 8 peer pointers, the rank and the world size; a TMA
# store into x.peer(p) picks rank p's tensor map (one of 8) with selects; a
# signal is a proxy fence then red.release.sys.global.add.s32; a wait spins
# on ld.acquire.sys, fences the async proxy and converges the warp. No
# multicast anywhere: no multimem instruction.
# RUN: tkc %s --emit=ptx | FileCheck %s
# RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=NOMC
import tkc
from tkc import bf16, gl, i32, pgl, st, tma

# CHECK-LABEL: .entry push(
# CHECK-NEXT: .param .u64 .ptr .global .align 1 push_param_0,
# CHECK-NEXT: .param .u32 push_param_1,
# CHECK-COUNT-8: .param .u64 .ptr .global .align 1
# CHECK-NEXT: .param .u32 push_param_10,
# CHECK-NEXT: .param .u32 push_param_11,
# CHECK-COUNT-9: .param .u64 .ptr .global .align 1
# CHECK-NEXT: .param .u32 push_param_21,
# CHECK-NEXT: .param .u32 push_param_22,
# CHECK-NEXT: .param .u64 .ptr .global .align 1 push_param_23,
# CHECK-COUNT-9: .param .align 64 .b8 push_param_{{[0-9]+}}[128]
# CHECK-NEXT: )
# CHECK: ld.param.b32 {{%r[0-9]+}}, [push_param_11];
# CHECK: cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group
# CHECK: cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group
# CHECK: cp.async.bulk.wait_group 0;
# CHECK: fence.proxy.async.global;
# CHECK-NEXT: red.release.sys.global.add.s32 [{{%rd[0-9]+}}], {{%r[0-9]+}};
# CHECK: ld.acquire.sys.global.s32 f, [{{%rd[0-9]+}}];
# CHECK-NEXT: setp.ge.s32 ok, f, {{%r[0-9]+}};
# CHECK-NEXT: @!ok bra SPIN;
# CHECK-NEXT: fence.proxy.async.global;
# CHECK: bar.warp.sync -1;
# NOMC-NOT: multimem
# NOMC-NOT: multicast


@tkc.kernel(warps=1, grid=lambda x, flags, y: (1,))
def push(x: pgl(bf16, 1, 1, None, 64), flags: pgl(i32, 1, 1, 1, 16), y: gl(bf16, 1, 1, 64, 64)):
    me, n = tkc.rank(), tkc.world_size()
    s = st(bf16, 64, 64)
    bar = tkc.barrier()
    tma.expect(bar, s)
    tma.load_async(s, y, (0, 0, 0, 0), bar)
    tkc.wait(bar, 0)
    for p in tkc.range(n):
        tma.store_async(x.peer(p), s, (0, 0, me, 0))
        tma.store_add_async(x.peer(p), s, (0, 0, n + me, 0))
    tma.store_async_wait(writes=True)
    for p in tkc.range(n):
        tkc.signal(flags.peer(p), at=(0, 0, 0, me))
    tkc.wait_signal(flags, at=(0, 0, 0, (me + 1) % n), value=1)
