# TMA of 8-bit tiles: an st<f8E4M3FN, 64, 256> with the 128-byte swizzle is
# two panels of 128 elements (one 128-byte row each: TMA's widest swizzled
# box row), so one cp.async.bulk.tensor per panel, the second 128 columns
# further and 64 x 128 bytes = 8 KiB further in shared memory; the expected
# bytes are the tile's 16 KiB. The manifest's tensor map names the 8-bit
# dtype (the runtime encodes it as UINT8: TMA does not convert).
# RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
# RUN: tkc %s --emit=ptx -o %t.ptx && FileCheck %s < %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
import tkc
from tkc import f8e4m3, gl, st, tma

# NVVM: \22tensor_maps\22: [{\22param\22: 0, \22name\22: \22a\22, \22dtype\22: \22f8e4m3\22, \22box\22: [64, 128], \22swizzle\22: \22128b\22}, {\22param\22: 1, \22name\22: \22o\22, \22dtype\22: \22f8e4m3\22, \22box\22: [64, 128], \22swizzle\22: \22128b\22}]
# CHECK-LABEL: .entry tma_roundtrip_f8(
# CHECK: mov.b32 %r{{[0-9]+}}, 16384;
# CHECK: mbarrier.arrive.expect_tx
# CHECK: shl.b32 %r[[C0:[0-9]+]], %r{{[0-9]+}}, 8;
# CHECK: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd{{[0-9]+}}], [%rd{{[0-9]+}}, {%r[[C0]],
# CHECK: or.b32 %r[[C1:[0-9]+]], %r[[C0]], 128;
# CHECK: add.s64 %rd{{[0-9]+}}, %rd{{[0-9]+}}, 8192;
# CHECK: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd{{[0-9]+}}], [%rd{{[0-9]+}}, {%r[[C1]],
# CHECK: cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%rd{{[0-9]+}}, {%r[[C0]], {{.*}}], [__tkc_shared];
# CHECK: cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%rd{{[0-9]+}}, {%r[[C1]], {{.*}}], [__tkc_shared+8192];


@tkc.kernel(warps=1, grid=lambda a, o: (a.c // 256, a.r // 64))
def tma_roundtrip_f8(a: gl(f8e4m3, 1, 1, "M", "N"), o: gl(f8e4m3, 1, 1, "M", "N")):
    x, y = tkc.block_idx.x, tkc.block_idx.y
    s = st(f8e4m3, 64, 256)
    bar = tkc.barrier()
    tma.expect(bar, s)
    tma.load_async(s, a, (0, 0, y, x), bar)
    tkc.wait(bar, 0)
    tma.store_async(o, s, (0, 0, y, x))
    tma.store_async_wait()
