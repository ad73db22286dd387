# tk-pipeline-staging with coordinates read from memory (a block table of page
# indices) and loads into subtiles: the producer re-reads each index itself
# (a pure read: the kernel never writes the table), hoisted out of its loop
# when it does not change there; a tile filled by subtile loads is one ring
# whose slot the producer views as the author's subtiles, expecting the
# pieces' bytes; a top-level load into a subtile chosen at run time stays one
# slot; a tile stored by TMA as loaded (once per work item, or a ring slot)
# goes back to the producer only after the store's read. The kernels run in
# test/python/test_gather.py (interpreter) and test/gpu/test_gather_gpu.py (GPU),
# which load them through test/python/gather_kernels.py.
# RUN: tkc %s --kernel paged_sum | FileCheck %s --check-prefix=PAGED
# RUN: tkc %s --kernel gather_gemm | FileCheck %s --check-prefix=GATHER
# RUN: tkc %s --kernel pick_page | FileCheck %s --check-prefix=PICK
# RUN: tkc %s --kernel paged_sum --emit=ptx | FileCheck %s --check-prefix=PTX
# RUN: tkc %s --kernel copy_pages | FileCheck %s --check-prefix=COPY
# RUN: tkc %s --kernel copy_square | FileCheck %s --check-prefix=SQUARE
# RUN: tkc %s --kernel copy_wide | FileCheck %s --check-prefix=WIDE
# RUN: tkc %s --kernel gather_copy | FileCheck %s --check-prefix=RING
# RUN: tkc %s --kernel gather_gemm_copy | FileCheck %s --check-prefix=MMA
import tkc
from tkc import bf16, f32, gl, i32, rt, st, tma, warpgroup
from tkc.ops import load, subtile, zero

# The producer's loop reads table[b, j] and loads that page into the slot.
# PAGED-LABEL: func.func @paged_sum
# PAGED: scf.for %[[J:arg[0-9]+]] =
# PAGED: "tk.expect_bytes"(%[[FULL:[0-9]+]]) {bytes = 8192 : i64}
# PAGED: %[[PAGE:[0-9]+]] = "tk.load"(%arg1, %{{.*}}, %{{.*}}, %{{[0-9]+}}, %[[J]]) {elements, fill = -1 : i64} {{.*}} -> i32
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
# not fit (2 x 128 KB), with or without a pipelined loop beside it; stored as loaded,
# the next item's load into it waits for its release, after the store has read it.
# WIDE-LABEL: func.func @copy_wide
# WIDE: %[[P:[0-9]+]] = "tk.alloc"() : () -> !tk.st<bf16, 256 : i64, 256 : i64, "128b">
# WIDE-NEXT: "tk.alloc"() : () -> !tk.barrier
# WIDE-NEXT: %[[E:[0-9]+]] = "tk.alloc"() : () -> !tk.barrier
# WIDE: "tk.tma_store"(%arg2, %[[P]],
# WIDE: "tk.tma_store_wait"() {pending = 0 : i64}
# WIDE-NEXT: }
# WIDE-NEXT: "tk.arrive"(%[[E]])


@tkc.kernel(warps=4, grid=lambda pages, table, out: (table.c,), persistent=True)
def copy_wide(pages: gl(bf16, 1, 1, "P", 256), table: gl(i32, 1, 1, 1, "T"),
              out: gl(bf16, 1, 1, "M", 256)):
    """256-row block t of out = 256-row page table[t] (a 128 KB tile: one slot)."""
    t = tkc.block_idx.x
    page_s = st(bf16, 256, 256)
    tma.load(page_s, pages, (0, 0, load(i32, table, at=(0, 0, 0, t), fill=-1), 0))
    tma.store(out, page_s, (0, 0, t, 0))


# A tile loaded once per work item and stored as loaded (persistent: two slots by the
# item's parity): warp 0 waits for the store's read before the consumers hand the slot
# back, or the producer's load for the item after next overwrites it under the store.
# COPY-LABEL: func.func @copy_pages
# COPY: } {tk.staged = {role = "producer", stages = 0 : i64}}
# COPY: "tk.stage"(%{{[0-9]+}}, %{{[0-9]+}}) : (!tk.barrier, index) -> !tk.barrier
# COPY-NEXT: %[[E:[0-9]+]] = "tk.stage"(%{{[0-9]+}}, %{{[0-9]+}}) : (!tk.barrier, index) -> !tk.barrier
# COPY: scf.if
# COPY-NEXT: "tk.tma_store"(%arg2,
# COPY-NEXT: }
# COPY-NEXT: %[[W:[0-9]+]] = "tk.warpid"()
# COPY-NEXT: %{{.*}} = arith.constant 0 : index
# COPY-NEXT: %[[W0:[0-9]+]] = arith.cmpi eq, %[[W]], %{{.*}} : index
# COPY-NEXT: scf.if %[[W0]] {
# COPY-NEXT: "tk.tma_store_wait"() {pending = 0 : i64}
# COPY-NEXT: }
# COPY-NEXT: "tk.arrive"(%[[E]])
# COPY-NEXT: scf.yield


@tkc.kernel(warps=4, grid=lambda pages, table, out: (table.c,), persistent=True)
def copy_pages(pages: gl(bf16, 1, 1, "P", 64), table: gl(i32, 1, 1, 1, "T"),
               out: gl(bf16, 1, 1, "M", 64)):
    """64-row block t of out = page table[t] (TMA in, TMA out)."""
    t = tkc.block_idx.x
    page_s = st(bf16, 64, 64)
    tma.load(page_s, pages, (0, 0, load(i32, table, at=(0, 0, 0, t), fill=-1), 0))
    tma.store(out, page_s, (0, 0, t, 0))


# The tile is read again after another tile's store: the release follows that read,
# its wait leaves the later store in flight (pending = 1) and needs no meeting of the
# consumers (the empty barrier completes only with warp 0's own arrival, after it).
# SQUARE-LABEL: func.func @copy_square
# SQUARE: } {tk.staged = {role = "producer", stages = 0 : i64}}
# SQUARE: "tk.tma_store"(%arg2,
# SQUARE: "tk.tma_store"(%arg3,
# SQUARE: "tk.load"(%{{[0-9]+}}, {{.*}} -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
# SQUARE-NEXT: %[[W:[0-9]+]] = "tk.warpid"()
# SQUARE-NEXT: %{{.*}} = arith.constant 0 : index
# SQUARE-NEXT: %[[W0:[0-9]+]] = arith.cmpi eq, %[[W]], %{{.*}} : index
# SQUARE-NEXT: scf.if %[[W0]] {
# SQUARE-NEXT: "tk.tma_store_wait"() {pending = 1 : i64}
# SQUARE-NEXT: }
# SQUARE-NEXT: "tk.arrive"
# SQUARE-NOT: "tk.sync"
# SQUARE: "tk.store"(%arg4,
# SQUARE-NEXT: scf.yield


@tkc.kernel(warps=4, grid=lambda pages, table, out, sq, twice: (table.c,), persistent=True)
def copy_square(pages: gl(bf16, 1, 1, "P", 64), table: gl(i32, 1, 1, 1, "T"),
                out: gl(bf16, 1, 1, "M", 64), sq: gl(bf16, 1, 1, "M", 64),
                twice: gl(f32, 1, 1, "M", 64)):
    """Block t of out = page table[t], of sq = its square (bf16), of twice = 2 x it."""
    t = tkc.block_idx.x
    page_s, sq_s = st(bf16, 64, 64), st(bf16, 64, 64)
    tma.load(page_s, pages, (0, 0, load(i32, table, at=(0, 0, 0, t), fill=-1), 0))
    x = warpgroup.load(rt(bf16, 16, 64), page_s).to(f32)
    warpgroup.store(sq_s, (x * x).to(bf16))
    tma.store(out, page_s, (0, 0, t, 0))
    tma.store(sq, sq_s, (0, 0, t, 0))
    warpgroup.store(twice, warpgroup.load(rt(bf16, 16, 64), page_s).to(f32) * 2.0, (0, 0, t, 0))


# A ring slot the loop stores as loaded is no output tile of its own: its release at
# the iteration's end waits for the store's read.
# RING-LABEL: func.func @gather_copy
# RING: %[[P:[0-9]+]] = "tk.alloc"() {stages = 2 : i64} : () -> !tk.st<bf16, 64 : i64, 64 : i64, "128b">
# RING-NEXT: "tk.alloc"() {stages = 2 : i64} : () -> !tk.barrier
# RING-NEXT: %[[E:[0-9]+]] = "tk.alloc"() {stages = 2 : i64} : () -> !tk.barrier
# RING: } {tk.staged = {role = "producer", stages = 2 : i64}}
# RING: %[[SLOT:[0-9]+]] = "tk.stage"(%[[P]], %{{[0-9]+}})
# RING: "tk.tma_store"(%arg2, %[[SLOT]],
# RING: "tk.tma_store_wait"() {pending = 0 : i64}
# RING-NEXT: }
# RING-NEXT: %[[S:[0-9]+]] = "tk.stage"(%[[E]], %{{[0-9]+}})
# RING-NEXT: "tk.arrive"(%[[S]])
# RING: } {tk.staged = {role = "consumer", stages = 2 : i64}}


@tkc.kernel(warps=4, grid=lambda pages, table, out: (table.r,), persistent=True)
def gather_copy(pages: gl(bf16, 1, 1, "P", 64), table: gl(i32, 1, 1, "B", "J"),
                out: gl(bf16, "B", 1, "R", 64)):
    """Block j of out[b] = page table[b, j], through the ring (TMA in, TMA out)."""
    b = tkc.block_idx.x
    p_s = st(bf16, 64, 64)
    for j in tkc.range(table.c, stages=2):
        tma.load(p_s, pages, (0, 0, load(i32, table, at=(0, 0, b, j), fill=-1), 0))
        tma.store(out, p_s, (b, 0, j, 0))


# The same with the slot read by a wgmma kept in flight: the previous iteration's slot
# is released after the relaxed wait, once its two stores have read it (this
# iteration's first store may stay in flight: pending = 1); the last one after the loop.
# MMA-LABEL: func.func @gather_gemm_copy
# MMA: "tk.warpgroup_mma_wait"({{.*}}) {pending = 1 : i64}
# MMA: scf.if
# MMA: scf.if
# MMA-NEXT: "tk.tma_store_wait"() {pending = 1 : i64}
# MMA-NEXT: }
# MMA: "tk.arrive"
# MMA: } {tk.staged = {role = "consumer", stages = 2 : i64}}
# MMA-NEXT: "tk.warpgroup_mma_wait"({{.*}}) {pending = 0 : i64}
# MMA: "tk.tma_store_wait"() {pending = 0 : i64}
# MMA-NEXT: }
# MMA: "tk.arrive"


@tkc.kernel(warps=4, grid=lambda pages, table, w, a_out, out: (1,))
def gather_gemm_copy(pages: gl(bf16, 1, 1, "P", 64), table: gl(i32, 1, 1, 1, "T"),
                     w: gl(bf16, 1, 1, "K", 64), a_out: gl(bf16, 1, 1, "A", 64),
                     out: gl(f32, 1, 1, 64, 64)):
    """out = sum over t of page table[t] @ w's block t, each gathered page (and w's
    block) also stored to a_out (w's blocks at rows of a_out's second half)."""
    acc = zero(rt(f32, 16, 64))
    a_s, w_s = st(bf16, 64, 64), st(bf16, 64, 64)
    for t in tkc.range(table.c, stages=2):
        tma.load(a_s, pages, (0, 0, load(i32, table, at=(0, 0, 0, t), fill=-1), 0))
        tma.load(w_s, w, (0, 0, t, 0))
        tma.store(a_out, a_s, (0, 0, t, 0))
        warpgroup.mma_AB(acc, a_s, w_s)
        warpgroup.mma_async_wait(acc)
        tma.store(a_out, w_s, (0, 0, table.c + t, 0))
    warpgroup.store(out, acc, (0, 0, 0, 0))
