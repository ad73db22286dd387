# wgmma with 8-bit operands: m64nNk32 (32 bytes of each row a step, as
# bf16's k16), .f32.e4m3.e5m2 (a's and b's types may differ), no transpose
# immediates (both operands K-major: scale-d, imm-scale-a, imm-scale-b only).
# A 64 x 128 fp8 tile is one 128-byte swizzle panel, so its four k32 steps
# start 32 bytes apart: the descriptor's address field (bytes >> 4) steps by
# 2; LBO unused (1), SBO 1024 bytes (8 rows of 128) = 64, swizzle mode 1
# (128B) in bits 62-63: high word 0x40000040 = 1073741888. The low words are
# LBO's 1 << 16 plus the tile's offset >> 4: A's ring at 0, B's after A's two
# 8 KiB slots (16384 >> 4 = 1024).
# RUN: tkc %s --emit=ptx -o %t.ptx && FileCheck %s < %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
import tkc
from tkc import f8e4m3, f8e5m2, f32, gl, rt, st, tma, warpgroup
from tkc.ops import store, zero

# CHECK-LABEL: .entry mma_f8(
# CHECK: add.u32 %tkl0, %r[[F:[0-9]+]], 65536;
# CHECK-NEXT: mov.b64 %tkd0, {%tkl0, 1073741888};
# CHECK-NEXT: add.u32 %tkl1, %r[[F]], 66560;
# CHECK-NEXT: mov.b64 %tkd1, {%tkl1, 1073741888};
# CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2 {{{.*}}}, %tkd0, %tkd1, 1, 1, 1;
# CHECK: add.u32 %tkl0, %r[[F]], 65538;
# CHECK: add.u32 %tkl1, %r[[F]], 66562;
# CHECK-NEXT: mov.b64
# CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2
# CHECK: add.u32 %tkl0, %r[[F]], 65540;
# CHECK: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2
# CHECK: add.u32 %tkl0, %r[[F]], 65542;
# CHECK: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2
# CHECK: wgmma.commit_group.sync.aligned


@tkc.kernel(warps=4, grid=lambda a, b, c: (c.c // 128, c.r // 64))
def mma_f8(a: gl(f8e4m3, 1, 1, "M", "K"), b: gl(f8e5m2, 1, 1, "N", "K"), c: gl(f32, 1, 1, "M", "N")):
    x, y, w = tkc.block_idx.x, tkc.block_idx.y, tkc.warpid()
    a_s, b_s = st(f8e4m3, 64, 128), st(f8e5m2, 128, 128)
    acc = zero(rt(f32, 16, 128))
    for k in tkc.range(a.c // 128, stages=2):
        tma.load(a_s, a, (0, 0, y, k))
        tma.load(b_s, b, (0, 0, x, k))
        warpgroup.mma_ABt(acc, a_s, b_s)
        warpgroup.mma_async_wait(acc)
    store(c, acc, (0, 0, y * 4 + w, x))
