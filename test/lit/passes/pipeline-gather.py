# tk-pipeline-staging with coordinates read from memory (a block table of page
# indices) and loads into subtiles: the producer re-reads each index itself
# (a pure read: the kernel never writes the table), hoisted out of its loop
# when it does not change there; a tile filled by subtile loads is one ring
# whose slot the producer views as the author's subtiles, expecting the
# pieces' bytes; a top-level load into a subtile chosen at run time stays one
# slot. The kernels run in test/python/test_gather.py (interpreter) and
# test/gpu/test_gather_gpu.py (GPU).
# RUN: tkc %s --kernel paged_sum | FileCheck %s --check-prefix=PAGED
# RUN: tkc %s --kernel gather_gemm | FileCheck %s --check-prefix=GATHER
# RUN: tkc %s --kernel pick_page | FileCheck %s --check-prefix=PICK
# RUN: tkc %s --kernel paged_sum --emit=ptx | FileCheck %s --check-prefix=PTX
# RUN: tkc %s --kernel copy_wide | FileCheck %s --check-prefix=WIDE
import tkc
from tkc import bf16, f32, gl, i32, rt, st, tma, warpgroup
from tkc.ops import load, subtile, zero

# The producer's loop reads table[b, j] and loads that page into the slot.
# PAGED-LABEL: func.func @paged_sum
# PAGED: scf.for %[[J:arg[0-9]+]] =
# PAGED: "tk.expect_bytes"(%[[FULL:[0-9]+]]) {bytes = 8192 : i64}
# PAGED: %[[PAGE:[0-9]+]] = "tk.load"(%arg1, %{{.*}}, %{{.*}}, %{{[0-9]+}}, %[[J]]) {elements, fill = -1.000000e+00 : f32} {{.*}} -> i32
# PAGED: %[[ROW:[0-9]+]] = arith.index_cast %[[PAGE]] : i32 to index
# PAGED: %[[SLOT:[0-9]+]] = "tk.stage"(%0, %{{[0-9]+}})
# PAGED: "tk.tma_load"(%[[SLOT]], %arg0, %{{.*}}, %{{.*}}, %[[ROW]], %{{.*}}, %[[FULL]])
# PAGED: } {tk.staged = {role = "producer", stages = 2 : i64}}
# PAGED: } {tk.staged = {role = "consumer", stages = 2 : i64}}

# The page coordinate is clamped in 64 bits to [-64, P] before it narrows:
# an index however far out of range reads zeros, never wraps into the pages.
# PTX: ld.global.b32 %r[[P:[0-9]+]],
# PTX: mul.wide.s32 %rd[[ROW:[0-9]+]], %r[[P]], 64;
# PTX: max.s64 %rd[[LO:[0-9]+]], %rd[[ROW]], -64;
# PTX: min.s64 %rd[[HI:[0-9]+]], %rd{{[0-9]+}}, %rd{{[0-9]+}};
# PTX: cvt.u32.u64 %r[[C:[0-9]+]], %rd[[HI]];
# PTX: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd{{[0-9]+}}], [%rd{{[0-9]+}}, {%r{{[0-9]+}}, %r[[C]], %r{{[0-9]+}}, %r{{[0-9]+}}}]


@tkc.kernel(warps=4, grid=lambda pages, table, out: (out.b,))
def paged_sum(pages: gl(bf16, 1, 1, "P", 64), table: gl(i32, 1, 1, "B", "J"),
              out: gl(f32, "B", 1, 64, 64)):
    """out[b] = the sum of the 64 x 64 pages that row b of the block table
    names; a page index out of range reads as zeros."""
    b = tkc.block_idx.x
    p_s = st(bf16, 64, 64)
    acc = zero(rt(f32, 16, 64))
    for j in tkc.range(table.c, stages=2):
        page = load(i32, table, at=(0, 0, b, j), fill=-1)
        tma.load(p_s, pages, (0, 0, page, 0))
        acc = acc + warpgroup.load(rt(bf16, 16, 64), p_s).to(f32)
    warpgroup.store(out, acc, (b, 0, 0, 0))


# Both halves of one 128-row ring slot: the producer reads the two page
# indices once per work item (hoisted out of its K loop), views the slot as
# the author's two subtiles and expects both halves' and W's bytes.
# GATHER-LABEL: func.func @gather_gemm
# GATHER: %[[P0:[0-9]+]] = "tk.load"(%arg1, {{.*}} -> i32
# GATHER: %[[P1:[0-9]+]] = "tk.load"(%arg1, {{.*}} -> i32
# GATHER: scf.for
# GATHER: "tk.expect_bytes"(%[[FULL:[0-9]+]]) {bytes = 24576 : i64}
# GATHER: %[[SLOT:[0-9]+]] = "tk.stage"(%0, %{{[0-9]+}}) : (!tk.st<bf16, 128 : i64, 64 : i64, "128b">, index)
# GATHER: %[[TOP:[0-9]+]] = "tk.subtile"(%[[SLOT]], %c0{{.*}}, %c0{{.*}}) : {{.*}} -> !tk.st<bf16, 64 : i64, 64 : i64, "128b">
# GATHER: "tk.tma_load"(%[[TOP]], %arg0,
# GATHER: %[[BOTTOM:[0-9]+]] = "tk.subtile"(%[[SLOT]], %c1{{.*}}, %c0{{.*}}) : {{.*}} -> !tk.st<bf16, 64 : i64, 64 : i64, "128b">
# GATHER: "tk.tma_load"(%[[BOTTOM]], %arg0,
# GATHER: "tk.tma_load"(%{{[0-9]+}}, %arg2,
# GATHER: } {tk.staged = {role = "producer", stages = {{[0-9]+}} : i64}}
# GATHER: } {tk.staged = {role = "consumer", stages = {{[0-9]+}} : i64}}


@tkc.kernel(warps=8, grid=lambda pages, table, w, out: (tkc.cdiv(table.c, 2),), persistent=True)
def gather_gemm(pages: gl(bf16, 1, 1, "P", "K"), table: gl(i32, 1, 1, 1, "T"),
                w: gl(bf16, 1, 1, "K", 64), out: gl(f32, 1, 1, "M", 64)):
    """out = A @ w, where 64-row block t of A is page table[t] of `pages` (a
    gathered, paged A): a block takes 128 rows, two pages in one ring slot."""
    m, wg = tkc.block_idx.x, tkc.warpgroupid()
    a_s, w_s = st(bf16, 128, 64), st(bf16, 64, 64)
    halves = [subtile(a_s, 64, 64, (h, 0)) for h in range(2)]
    page = [load(i32, table, at=(0, 0, 0, 2 * m + h), fill=-1) for h in range(2)]
    acc = zero(rt(f32, 16, 64))
    for k in tkc.range(pages.c // 64, stages="auto"):
        for h in range(2):
            tma.load(halves[h], pages, (0, 0, page[h], k))
        tma.load(w_s, w, (0, 0, k, 0))
        warpgroup.mma_AB(acc, subtile(a_s, 64, 64, (wg, 0)), w_s)
        warpgroup.mma_async_wait(acc)
    warpgroup.store(out, acc, (0, 0, 2 * m + wg, 0))


# A top-level load into a subtile chosen at run time (block t's half of a
# two-page buffer): the producer remakes the view at its coordinates.
# PICK-LABEL: func.func @pick_page
# PICK: %[[HALF:[0-9]+]] = arith.remsi %{{[0-9]+}}, %c2{{.*}} : index
# PICK: %[[VIEW:[0-9]+]] = "tk.subtile"(%0, %[[HALF]], %c0{{.*}}) : (!tk.st<bf16, 128 : i64, 64 : i64, "128b">, index, index) -> !tk.st<bf16, 64 : i64, 64 : i64, "128b">
# PICK: "tk.expect_bytes"(%[[FULL:[0-9]+]]) {bytes = 8192 : i64}
# PICK: "tk.tma_load"(%[[VIEW]], %arg0, {{.*}}, %[[FULL]])


@tkc.kernel(warps=4, grid=lambda pages, table, out: (table.c,))
def pick_page(pages: gl(bf16, 1, 1, "P", 64), table: gl(i32, 1, 1, 1, "T"),
              out: gl(bf16, 1, 1, "M", 64)):
    """64-row block t of out = page table[t], through half t % 2 of a
    128-row buffer (TMA in, TMA out)."""
    t = tkc.block_idx.x
    buf = st(bf16, 128, 64)
    half = subtile(buf, 64, 64, (t % 2, 0))
    tma.load(half, pages, (0, 0, load(i32, table, at=(0, 0, 0, t), fill=-1), 0))
    tma.store(out, half, (0, 0, t, 0))


# A tile loaded once per work item of a persistent kernel keeps one slot where two do
# not fit (2 x 128 KB), with or without a pipelined loop beside it.
# WIDE-LABEL: func.func @copy_wide
# WIDE: %[[P:[0-9]+]] = "tk.alloc"() : () -> !tk.st<bf16, 256 : i64, 256 : i64, "128b">
# WIDE-NEXT: "tk.alloc"() : () -> !tk.barrier
# WIDE-NEXT: %[[E:[0-9]+]] = "tk.alloc"() : () -> !tk.barrier
# WIDE: "tk.tma_store"(%arg2, %[[P]],


@tkc.kernel(warps=4, grid=lambda pages, table, out: (table.c,), persistent=True)
def copy_wide(pages: gl(bf16, 1, 1, "P", 256), table: gl(i32, 1, 1, 1, "T"),
              out: gl(bf16, 1, 1, "M", 256)):
    """256-row block t of out = 256-row page table[t] (a 128 KB tile: one slot)."""
    t = tkc.block_idx.x
    page_s = st(bf16, 256, 256)
    tma.load(page_s, pages, (0, 0, load(i32, table, at=(0, 0, 0, t), fill=-1), 0))
    tma.store(out, page_s, (0, 0, t, 0))
