# A persistent kernel's once-per-item tma.loads (tkc fuzz seed 2 program
# 1881): tk-pipeline-staging gives each tile two slots, by the work item's
# parity, so the wgmma reads a ring slot at a run-time index (A: a subtile of
# it at the warpgroup's column). Each descriptor is the shared array's
# address field plus the slot's (and subtile's) run-time part, completed in
# the wgmma's asm from 32-bit words: `add.u32` of the constant's low word
# (LBO, static offset and k step >> 4), `mov.b64` with its high word (SBO
# 1024 >> 4 = 64, 128B swizzle 1 << 30: 1073741888). Never one 64-bit add
# of the whole constant: ptxas 12.9/13.0 compiled that, for this kernel, to
# HGMMAs whose descriptors' high words no instruction set (wrong values or
# an illegal address on the H200). ptxas assembles the result.
# RUN: tkc %s --emit=tile | FileCheck %s --check-prefix=TILE
# RUN: tkc %s --emit=ptx -o %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
import tkc
from tkc import bf16, f32, gl, ops, rt, st, tma, warpgroup
from tkc.ops import store, subtile, zero

# TILE: %[[A:.*]] = "tk.alloc"() {stages = 2 : i64} : () -> !tk.st<bf16, 64 : i64, 128 : i64, "128b">
# TILE: %[[B:.*]] = "tk.alloc"() {stages = 2 : i64} : () -> !tk.st<bf16, 64 : i64, 64 : i64, "128b">
# TILE: } {tk.staged = {role = "producer"
# TILE: %[[SA:.*]] = "tk.stage"(%[[A]], %{{.*}})
# TILE: %[[SB:.*]] = "tk.stage"(%[[B]], %{{.*}})
# TILE: %[[SUB:.*]] = "tk.subtile"(%[[SA]], %{{.*}}, %{{.*}})
# TILE: "tk.warpgroup_mma_atb"(%[[SUB]], %[[SB]], %{{.*}})

# PTX-LABEL: .entry ring_slot_wgmma(
# PTX: and.b32 %r[[F:[0-9]+]], %r{{[0-9]+}}, 16320;
# PTX: wgmma.fence.sync.aligned;
# A (MN-major): LBO 128 * 64 bytes >> 4 = 512 << 16; B at 32768 (past A's two
# slots): + 2048; a k step is 16 rows of 128 bytes: + 128.
# PTX: add.u32 %tkl0, %r[[DA:[0-9]+]], 33554432;
# PTX-NEXT: mov.b64 %tkd0, {%tkl0, 1073741888};
# PTX-NEXT: add.u32 %tkl1, %r[[DB:[0-9]+]], 33556480;
# PTX-NEXT: mov.b64 %tkd1, {%tkl1, 1073741888};
# PTX-NEXT: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, %tkd0, %tkd1, 1, 1, 1, 1, 1;
# PTX: add.u32 %tkl0, %r[[DA]], 33554560;
# PTX-NEXT: mov.b64 %tkd0, {%tkl0, 1073741888};
# PTX-NEXT: add.u32 %tkl1, %r[[DB]], 33556608;
# PTX: add.u32 %tkl0, %r[[DA]], 33554688;
# PTX: add.u32 %tkl0, %r[[DA]], 33554816;
# PTX-NEXT: mov.b64 %tkd0, {%tkl0, 1073741888};
# PTX-NEXT: add.u32 %tkl1, %r[[DB]], 33556864;
# PTX-NEXT: mov.b64 %tkd1, {%tkl1, 1073741888};
# PTX-NEXT: wgmma.mma_async
# PTX-NOT: wgmma.mma_async
# PTX: wgmma.commit_group.sync.aligned;
# PTX-NOT: add.s64 %tkd


@tkc.kernel(warps=8, grid=lambda a, b, o, m: (2, 1), persistent=True)
def ring_slot_wgmma(a: gl(bf16, 1, 1, None, 128), b: gl(bf16, 1, 1, None, None),
                    o: gl(f32, 1, 1, 128, 80), m: gl(f32, 1, 1, None, None)):
    bx, by = tkc.block_idx.x, tkc.block_idx.y
    wg = tkc.warpgroupid()
    tr = by * 8 + tkc.warpid()
    s0 = st(bf16, 64, 128)
    s1 = st(bf16, 64, 64)
    acc = zero(rt(f32, 16, 64))
    tma.load(s0, a, (0, 0, 0, by))
    tma.load(s1, b, (0, 0, 0, bx))
    warpgroup.mma_AtB(acc, subtile(s0, 64, 64, (0, wg)), s1)
    warpgroup.mma_async_wait(acc)
    store(o, acc, (0, 0, tr, bx), clip=True)
    store(m, ops.min(acc, acc), (0, 0, tr, bx), clip=True)
