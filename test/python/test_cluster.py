"""Thread-block clusters in the interpreter (docs/dsl.md, "Clusters"): the
CTAs of a cluster run together; multicast TMA loads land in every CTA of the
mask, remote arrivals reach the peer's barrier, cluster_sync meets every
warp of the cluster; refusals and deadlocks are located errors."""
import inspect

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, st, tma
from tkc.diagnostics import TkcError
from tkc.interpreter.values import ROUND
from tkc.ops import store

from cluster_kernels import (_staged_gemm as _staged, cluster_gemm, exchange_sum, make_cluster_gemm,
                             multicast_copy, persistent_cluster_gemm, staged_cluster_gemm,
                             column_cluster_gemm, grid_cluster_gemm, row_cluster_gemm, sliced_grid_gemm)


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _bf16(rng, *shape):
    return ROUND["bf16"](rng.standard_normal(shape).astype(np.float32))


def test_multicast_halves_fill_both_ctas():
    a = _bf16(np.random.default_rng(1), 1, 1, 128, 64)
    o = np.full((1, 2, 128, 64), np.nan, np.float32)
    multicast_copy.interpret(a, o)
    np.testing.assert_array_equal(o[0, 0], a[0, 0])
    np.testing.assert_array_equal(o[0, 1], a[0, 0])


def test_store_cta_exchanges_tiles_between_ctas():
    """tma.store_cta: each CTA's tile lands in the peer's shared memory and
    completes the peer's barrier; both CTAs hold the sum."""
    a = np.random.default_rng(4).standard_normal((1, 2, 64, 64)).astype(np.float32)
    o = np.full_like(a, np.nan)
    exchange_sum.interpret(a, o)
    np.testing.assert_allclose(o[0, 0], a[0, 0] + a[0, 1], rtol=1e-6)
    np.testing.assert_allclose(o[0, 1], a[0, 0] + a[0, 1], rtol=1e-6)


def _store_cta_kernel(body):
    @tkc.kernel(warps=1, grid=lambda o: (2, 1, 1), cluster=(2, 1, 1))
    def k(o: gl(f32, 1, 1, 64, 64)):
        s, t = st(f32, 64, 64), st(f32, 64, 32)
        bar = tkc.barrier()
        body(s, t, bar)
    return k


@pytest.mark.parametrize("body, message", [
    (lambda s, t, bar: tma.store_cta(t, s, 1, bar), "store_cta: dst and src must be tiles of one type"),
    (lambda s, t, bar: tma.store_cta(s, s, 2, bar), "store_cta: cta must be in 0..1 for a cluster of 2 CTAs"),
    (lambda s, t, bar: tma.store_cta(s, s, 1, s), "store_cta: expected a barrier"),
])
def test_store_cta_refusals_name_the_line(body, message):
    with pytest.raises(TkcError) as info:
        _store_cta_kernel(body).trace()
    assert message in info.value.message
    assert info.value.where and "test_cluster.py" in info.value.where


def test_store_cta_of_a_subtile_is_refused_by_the_verifier():
    @tkc.kernel(warps=1, grid=lambda o: (2, 1, 1), cluster=(2, 1, 1))
    def k(o: gl(f32, 1, 1, 64, 64)):
        s, t = st(f32, 128, 64), st(f32, 64, 64)
        bar = tkc.barrier()
        tma.store_cta(t, tkc.ops.subtile(s, 64, 64, (1, 0)), 1, bar)
    from tkc.compiler import TILE_PIPELINE
    from tkc.pass_pipeline import run_pipeline
    m = k.trace()
    with pytest.raises(TkcError) as info:
        run_pipeline(m, TILE_PIPELINE)
    assert "src must be a whole tile (a tk.alloc without stages), not a subtile" in info.value.message
    assert "test_cluster.py" in (info.value.where or "")


def test_store_cta_needs_a_cluster():
    @tkc.kernel(warps=1, grid=lambda o: (2, 1, 1))
    def k(o: gl(f32, 1, 1, 64, 64)):
        s = st(f32, 64, 64)
        tma.store_cta(s, s, 0, tkc.barrier())
    with pytest.raises(TkcError) as info:
        k.trace()
    assert "store_cta: the kernel has no cluster" in info.value.message


def _check_gemm(kernel, m, n, k, seed):
    """kernel(a, b, c) interpreted: C = A B in f32 against float64 numpy."""
    rng = np.random.default_rng(seed)
    a, b = _bf16(rng, 1, 1, m, k), _bf16(rng, 1, 1, k, n)
    c = np.full((1, 1, m, n), np.nan, np.float32)
    kernel.interpret(a, b, c)
    ref = a[0, 0].astype(np.float64) @ b[0, 0].astype(np.float64)
    np.testing.assert_allclose(c[0, 0], ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("m, n, k", [(128, 128, 128), (256, 256, 384)])
def test_cluster_gemm_shares_a_by_multicast(m, n, k):
    _check_gemm(cluster_gemm, m, n, k, 2)


def test_consumer_that_never_releases_the_peer_is_a_located_deadlock():
    rng = np.random.default_rng(3)
    k = make_cluster_gemm(release_peer=False)
    with pytest.raises(TkcError) as info:
        k.interpret(_bf16(rng, 1, 1, 128, 256), _bf16(rng, 1, 1, 256, 128), np.zeros((1, 1, 128, 128), np.float32))
    e = info.value
    assert "deadlock" in e.message and "of a cluster of 2" in e.message
    # the producer waits on the empty barrier that the peer's consumers never arrive on
    empty = line_of(k.fn, "tkc.wait(empty[s]")
    assert f"warp 4 waits at tk.wait ({__import__('cluster_kernels').__file__}:{empty}:" in e.message
    assert e.where.startswith(f"{__import__('cluster_kernels').__file__}:")


def test_grid_not_a_multiple_of_the_cluster_is_refused():
    rng = np.random.default_rng(4)
    with pytest.raises(TkcError, match=r"grid \(3, 1, 1\) is not a multiple of the kernel's cluster \(2, 1, 1\)"):
        cluster_gemm.interpret(_bf16(rng, 1, 1, 128, 128), _bf16(rng, 1, 1, 128, 192),
                               np.zeros((1, 1, 128, 192), np.float32))


# ---- refusals where the author wrote them

def _where(fn, text):
    return f"{__file__}:{line_of(fn, text)}:"


@pytest.mark.parametrize("cluster, message", [
    ((4, 4), "a cluster holds at most 8 CTAs (the portable size), got 16"),
    ((0, 1, 1), "cluster must be 1 to 3 ints >= 1"),
    ((2, 1, 1, 1), "cluster must be 1 to 3 ints >= 1"),
])
def test_bad_cluster_shapes_are_refused_at_the_kernel(cluster, message):
    def k(x: gl(f32, 1, 1, 16, 16)):
        pass
    with pytest.raises(TkcError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        tkc.kernel(k, cluster=cluster)
    assert info.value.where.startswith(_where(k, "def k("))


def test_persistent_or_ordered_cluster_only_along_x():
    """tk-grid-ordering deals a cluster's CTAs one work item along x: other
    cluster shapes, and zigzag rounds, are refused with persistent or order."""
    def k(x: gl(f32, 1, 1, 16, 16)):
        pass
    assert tkc.kernel(k, cluster=(2, 1, 1), persistent=True).cluster == (2, 1, 1)
    assert tkc.kernel(k, cluster=(2, 1, 1), order="grouped(y, 8)").cluster == (2, 1, 1)
    with pytest.raises(TkcError, match="along x only"):
        tkc.kernel(k, cluster=(1, 2, 1), persistent=True)
    with pytest.raises(TkcError, match="along x only"):
        tkc.kernel(k, cluster=(2, 2, 1), order="grouped(y, 8)")
    with pytest.raises(TkcError, match="zigzag"):
        tkc.kernel(k, cluster=(2, 1, 1), persistent="zigzag")


def test_cluster_ops_need_a_cluster_kernel():
    @tkc.kernel(warps=1)
    def lonely(x: gl(f32, 1, 1, 16, 16)):
        tkc.cluster_sync()
    with pytest.raises(TkcError, match=r"cluster_sync: the kernel has no cluster; give it one") as info:
        lonely.trace()
    assert info.value.where.startswith(_where(lonely.fn, "tkc.cluster_sync()"))


def test_constant_cta_and_mask_outside_the_cluster_are_refused():
    @tkc.kernel(warps=1, grid=lambda a: (2,), cluster=(2,))
    def far(a: gl(bf16, 1, 1, 64, 64)):
        bar = tkc.barrier()
        tkc.arrive(bar, cta=2)
    with pytest.raises(TkcError, match=r"arrive: cta must be in 0..1 for a cluster of 2 CTAs, got 2") as info:
        far.trace()
    assert info.value.where.startswith(_where(far.fn, "cta=2"))

    @tkc.kernel(warps=1, grid=lambda a: (2,), cluster=(2,))
    def wide(a: gl(bf16, 1, 1, 64, 64)):
        s, bar = st(bf16, 64, 64), tkc.barrier()
        tma.load_async(s, a, (0, 0, 0, 0), bar, multicast=0b100)
    with pytest.raises(TkcError, match=r"load_async: multicast must be in 1..3 \(bits of CTAs 0..1\)"):
        wide.trace()


@tkc.kernel(warps=1, grid=lambda a, o: (2,), cluster=(2,))
def runtime_mask(a: gl(bf16, 1, 1, 64, 64), o: gl(bf16, 1, 1, 64, 64)):
    r = tkc.cluster_ctarank()
    s, bar = st(bf16, 64, 64), tkc.barrier()
    tkc.cluster_sync()
    tma.expect(bar, s)
    tma.load_async(s, a, (0, 0, 0, 0), bar, multicast=r * 2 + 2)   # CTA 1: bit 2, no such CTA
    tkc.wait(bar, 0)


def test_runtime_mask_outside_the_cluster_is_located():
    with pytest.raises(TkcError, match=r"mask 0x4 names CTAs outside the cluster's 0..1") as info:
        runtime_mask.interpret(np.zeros((1, 1, 64, 64), np.float32), np.zeros((1, 1, 64, 64), np.float32))
    assert info.value.where.startswith(_where(runtime_mask.fn, "multicast=r * 2 + 2"))


@tkc.kernel(warps=1, grid=lambda x: (2,), cluster=(2,))
def unsynced_arrive(x: gl(f32, 1, 1, 16, 16)):
    bar = tkc.barrier()
    tkc.arrive(bar, cta=1 - tkc.cluster_ctarank())   # no cluster_sync: the peer may not have its barrier yet
    tkc.cluster_sync()


def test_remote_arrive_before_a_cluster_sync_is_located():
    with pytest.raises(TkcError, match=r"barrier was initialised with no tkc.cluster_sync\(\) since") as info:
        unsynced_arrive.interpret(np.zeros((1, 1, 16, 16), np.float32))
    assert info.value.where.startswith(_where(unsynced_arrive.fn, "tkc.arrive(bar, cta="))


@tkc.kernel(warps=2, grid=lambda x: (2,), cluster=(2,))
def sync_in_one_warp(x: gl(f32, 1, 1, 16, 16)):
    with tkc.if_(tkc.warpid() == 0):
        tkc.cluster_sync()
    tkc.sync()          # warp 1 waits here for warp 0, which waits for warp 1 at the cluster barrier


def test_cluster_sync_missed_by_a_warp_is_a_located_deadlock():
    with pytest.raises(TkcError, match=r"deadlock: warp 0 waits for the cluster barrier \(tk.cluster_sync\): "
                                       r"2 of 4 warps") as info:
        sync_in_one_warp.interpret(np.zeros((1, 1, 16, 16), np.float32))
    assert info.value.where.startswith(_where(sync_in_one_warp.fn, "tkc.cluster_sync()"))


def test_cluster_ids_and_the_cache_key():
    @tkc.kernel(warps=1, grid=lambda o: (4, 2), cluster=(2, 2))
    def ids(o: gl(f32, 1, 1, 16, 64)):
        x, y = tkc.block_idx.x, tkc.block_idx.y
        v = tkc.cluster_ctarank() * 100 + tkc.cluster_idx.x * 10 + tkc.cluster_idx.y
        store(o, v.to(f32), at=(0, 0, y, x), clip=True)
    o = np.zeros((1, 1, 16, 64), np.float32)
    ids.interpret(o)
    for y in range(2):
        for x in range(4):
            assert o[0, 0, y, x] == ((x % 2) + 2 * (y % 2)) * 100 + (x // 2) * 10 + y // 2
    assert '"cluster": [2, 2, 1]' in ids.specialisation()
    assert "cluster" not in tkc.kernel(ids.fn, grid=ids.grid_fn).specialisation()   # old keys unchanged


@pytest.mark.parametrize("m, n, k", [(128, 256, 192), (200, 296, 320)])
def test_staging_multicasts_the_tile_a_cluster_shares(m, n, k):
    """A plain pipelined loop in (2, 1, 1) clusters: tk-pipeline-staging's
    multicast of A (each CTA loads half of its rows) and the cross-CTA
    release of the ring's slots give C = A B through the interpreter, on
    shapes past whole tiles (a cluster's second CTA past N: its stores clip)."""
    _check_gemm(staged_cluster_gemm, m, n, k, 3)


def test_staging_shares_only_what_every_cta_of_a_cluster_loads():
    """The staged IR: A's load is one multicast slice a CTA, B's a plain load
    (it follows block_idx.x); the empty barrier counts both CTAs' 8
    consumer warps, which release each slot on both; the cluster syncs
    after the inits and at the end."""
    from tkc.compiler import TILE_PIPELINE
    from tkc.dialect import walk
    from tkc.pass_pipeline import run_pipeline
    m = staged_cluster_gemm.trace()
    run_pipeline(m, TILE_PIPELINE)
    ops = [op for op in walk(m.operation)]
    names = [op.name for op in ops]
    assert names.count("tk.tma_load_multicast") == 1 and names.count("tk.tma_load") == 1
    multicast = next(op for op in ops if op.name == "tk.tma_load_multicast")
    assert "64 : i64, 64 : i64" in str(multicast.operands[0].type)   # half of A's 128 rows
    counts = sorted(op.attributes["count"].value for op in ops if op.name == "tk.init_barrier")
    assert counts == [1, 16]
    assert names.count("tk.cluster_sync") == 2 and names.count("tk.arrive") == 0
    assert names.count("tk.arrive_cta") >= 2


@pytest.mark.parametrize("m, n, k", [(512, 256, 192), (300, 200, 320)])
@pytest.mark.parametrize("kernel", ["column", "grid", "row"])
def test_staging_multicasts_along_y_and_both_axes(m, n, k, kernel):
    """(1, 4, 1) clusters share B's tile along y (a column of row blocks),
    (2, 2, 1) clusters A's along x and B's along y: C = A B through the
    interpreter, on shapes past whole tiles (CTAs past M load their slices
    of B for their column, and their stores clip); (2, 2, 1) with A shared
    along x only (a slot passed within the cluster's row)."""
    kernels = {"column": column_cluster_gemm, "grid": grid_cluster_gemm, "row": row_cluster_gemm}
    _check_gemm(kernels[kernel], m, n, k, 4)


def _staged_ops(kernel):
    from tkc.compiler import TILE_PIPELINE
    from tkc.dialect import walk
    from tkc.pass_pipeline import run_pipeline
    m = kernel.trace()
    run_pipeline(m, TILE_PIPELINE)
    return m, list(walk(m.operation))   # the module with its ops: they die with it


def test_staging_shares_along_y_what_a_cluster_column_loads():
    """(1, 4, 1): B's load is one multicast slice a CTA (16 of its 64 rows),
    A's a plain load (it follows block_idx.y); a slot's empty barrier counts
    the four CTAs' 8 consumer warps each, released on all four (the column
    is the whole cluster: constant ranks)."""
    m, ops = _staged_ops(column_cluster_gemm)
    names = [op.name for op in ops]
    assert names.count("tk.tma_load_multicast") == 1 and names.count("tk.tma_load") == 1
    multicast = next(op for op in ops if op.name == "tk.tma_load_multicast")
    assert "16 : i64, 128 : i64" in str(multicast.operands[0].type)   # a quarter of B's 64 rows
    counts = sorted(op.attributes["count"].value for op in ops if op.name == "tk.init_barrier")
    assert counts == [1, 32]
    assert names.count("tk.arrive_cta") >= 4 and names.count("tk.arrive") == 0


def test_staging_shares_each_tile_along_its_own_axis():
    """(2, 2, 1): A's load is shared along x (half its rows a CTA, the mask
    of the CTA's cluster row), B's along y (half its rows, the mask of its
    column); both are multicast, and a slot's empty barrier counts the
    whole cluster's consumers (its row and column together are all four)."""
    m, ops = _staged_ops(grid_cluster_gemm)
    names = [op.name for op in ops]
    assert names.count("tk.tma_load_multicast") == 2 and names.count("tk.tma_load") == 0
    tiles = sorted(str(op.operands[0].type) for op in ops if op.name == "tk.tma_load_multicast")
    assert any("64 : i64, 64 : i64" in t for t in tiles) and any("32 : i64, 128 : i64" in t for t in tiles)
    counts = sorted(op.attributes["count"].value for op in ops if op.name == "tk.init_barrier")
    assert counts == [1, 32]


@pytest.mark.parametrize("m, n, k", [(512, 256, 192), (512, 512, 320)])
def test_staging_shares_a_slice_only_along_the_axis_it_does_not_follow(m, n, k):
    """(2, 2, 1), A and B loaded through slices at the block's rows and
    columns, at coordinates 0: the slice's offset decides what a cluster
    shares (A's follows block_idx.y: shared along x only, half its rows a
    CTA; B's follows x: along y only), not the coordinates, which are the
    same in every CTA (taken alone, each tile would be multicast to all four
    CTAs: wrong rows down a column, wrong columns along a row; found by the
    fuzzer's (1, 2, 1) programs). C = A B through the interpreter."""
    m_, ops = _staged_ops(sliced_grid_gemm)
    tiles = sorted(str(op.operands[0].type) for op in ops if op.name == "tk.tma_load_multicast")
    assert len(tiles) == 2 and any("64 : i64, 64 : i64" in t for t in tiles) \
        and any("32 : i64, 128 : i64" in t for t in tiles)
    del m_, ops
    _check_gemm(sliced_grid_gemm, m, n, k, 5)


def test_staging_passes_a_slot_within_the_row_that_shares_it():
    """(2, 2, 1) with only A shared (along x): A's load multicast to the
    CTA's row (half its rows a CTA), B's plain; a slot's empty barrier counts
    the row's two CTAs' 8 consumer warps each, not the cluster's four."""
    m, ops = _staged_ops(row_cluster_gemm)
    names = [op.name for op in ops]
    assert names.count("tk.tma_load_multicast") == 1 and names.count("tk.tma_load") == 1
    counts = sorted(op.attributes["count"].value for op in ops if op.name == "tk.init_barrier")
    assert counts == [1, 16]


@pytest.mark.parametrize("m, n, k", [(128, 384, 192), (520, 1000, 256)])
def test_persistent_clusters_take_paired_items(m, n, k):
    """Persistent and in (2, 1, 1) clusters: each cluster's CTAs loop over the
    items of (X / 2, Y) together (x * 2 + rank), so A's multicast and the
    cross-CTA slot releases run on across items (4 simulated SMs: 2
    clusters; 2 and 4 x 5 column pairs: some CTAs past N, which clip, some
    clusters with one item more)."""
    _check_gemm(persistent_cluster_gemm, m, n, k, 4)


@pytest.mark.parametrize("which", ["persistent_cluster_gemm", "library"])
def test_persistent_clusters_multicast_a(which):
    """A persistent kernel's work items start at block_idx.x / 2, the
    cluster's index (tk-grid-ordering deals a cluster's CTAs the same items):
    the same in both CTAs, so A's rows are too and A is multicast, half of
    its tile a CTA. (A check that let only loop bounds free of block_idx.x
    through once turned the library's cluster GEMM into plain loads: 3000^3
    0.96 -> 0.80 of cuBLAS on the H200.)"""
    from tkc.compiler import TILE_PIPELINE
    from tkc.dialect import walk
    from tkc.kernels.gemm_hopper import gemm_hopper
    from tkc.pass_pipeline import run_pipeline
    kern = persistent_cluster_gemm if which != "library" else gemm_hopper("bf16", BN=192, cluster=2)
    m = kern.trace()
    run_pipeline(m, TILE_PIPELINE)
    names = [op.name for op in walk(m.operation)]
    assert names.count("tk.tma_load_multicast") == 1 and names.count("tk.tma_load") == 1


def test_persistent_clusters_launch_whole_clusters():
    from tkc.compiler import TILE_PIPELINE
    from tkc.pass_pipeline import run_pipeline
    m = persistent_cluster_gemm.trace()
    run_pipeline(m, TILE_PIPELINE)
    fn = next(op for op in m.body.operations if op.operation.name == "func.func").operation
    assert [g.value for g in fn.attributes["tk.grid"]] == [
        "min(sms // 2, (whole(cdiv(c.c, 256) * 2, 2)) * (cdiv(c.r, 128))) * 2", "1", "1"]


def test_a_grid_of_part_clusters_is_refused_at_the_launch():
    """A persistent cluster kernel's x must be whole clusters, as without the
    pass: padding it would run a block the kernel as written does not.
    Before the passes the interpreter refuses it; after them the launch's
    `whole` does, at the caller's line."""
    @tkc.kernel(warps=8, cluster=(2, 1, 1), persistent=True,
                grid=lambda a, b, c: (tkc.cdiv(c.c, 128), tkc.cdiv(c.r, 128)))
    def odd(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), c: gl(f32, 1, 1, "M", "N")):
        _staged(a, b, c)
    rng = np.random.default_rng(5)
    args = (_bf16(rng, 1, 1, 128, 64), _bf16(rng, 1, 1, 64, 384), np.zeros((1, 1, 128, 384), np.float32))
    with pytest.raises(TkcError, match="3 is not a multiple of 2: a kernel in clusters of 2"):
        odd.interpret(*args)



def test_a_tile_that_may_differ_in_a_cluster_is_not_multicast():
    """A's row read from memory per block (an index gl at block_idx.x) may
    differ between a cluster's CTAs: staging must load it in each, not
    multicast one CTA's slice (only arith over constants, dims, block_idx.y
    / .z and the pipeline's loop variables counts as the same)."""
    from tkc import i32, warpgroup
    from tkc.compiler import TILE_PIPELINE
    from tkc.dialect import walk
    from tkc.ops import load, subtile, zero
    from tkc.pass_pipeline import run_pipeline
    A, B, C = gl(bf16, 1, 1, "M", "K"), gl(bf16, 1, 1, "K", "N"), gl(f32, 1, 1, "M", "N")

    @tkc.kernel(warps=8, cluster=(2, 1, 1), grid=lambda a, b, c, r: (tkc.cdiv(c.c, 256) * 2, tkc.cdiv(c.r, 128)))
    def picked_rows(a: A, b: B, c: C, r: gl(i32, 1, 1, 1, "R")):
        bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
        row = load(i32, r, at=(0, 0, 0, bn), fill=0)
        a_s, b_s = st(bf16, 128, 64), st(bf16, 64, 128)
        acc = zero(rt(f32, 16, 128))
        for k in tkc.range(tkc.cdiv(a.c, 64), stages=3):
            tma.load(a_s, a, (0, 0, row, k))
            tma.load(b_s, b, (0, 0, k, bn))
            warpgroup.mma_AB(acc, subtile(a_s, 64, 64, (wg, 0)), b_s)
            warpgroup.mma_async_wait(acc)
        store(c, acc, (0, 0, bm * 8 + tkc.warpid(), bn), clip=True)

    m = picked_rows.trace()
    run_pipeline(m, TILE_PIPELINE)
    names = [op.name for op in walk(m.operation)]
    assert names.count("tk.tma_load_multicast") == 0 and names.count("tk.tma_load") == 2
    assert names.count("tk.cluster_sync") == 0 and names.count("tk.arrive_cta") == 0


def test_split_k_gemm_keeps_its_loads_and_its_cluster_syncs():
    """gemm_hopper(split=2): a (2, 1, 1) cluster whose CTAs sum halves of K.
    tk-pipeline-staging multicasts no load (the k loop's bounds follow the
    CTA, so its variable differs between them even where the coordinates
    name no block index), and keeps the author's opening and closing
    tkc.cluster_sync() whole-block syncs outside the producer / consumer
    split (inside the consumers' branch the producer would never arrive)."""
    from tkc.compiler import TILE_PIPELINE
    from tkc.dialect import walk
    from tkc.kernels.gemm_hopper import gemm_hopper
    from tkc.pass_pipeline import run_pipeline
    m = gemm_hopper("bf16", BN=64, persistent=False, split=2).trace()
    run_pipeline(m, TILE_PIPELINE)
    ops = list(walk(m.operation))
    names = [op.name for op in ops]
    assert "tk.tma_load_multicast" not in names and names.count("tk.tma_store_cta") == 1
    syncs = [op for op in ops if op.name == "tk.cluster_sync"]
    assert len(syncs) == 2
    for op in syncs:   # directly in the kernel's body, around the split's scf.if
        parent = op.parent
        assert getattr(parent, "operation", parent).name == "func.func"


@pytest.mark.parametrize("m, n, k, bn", [(128, 64, 256, 64), (200, 136, 72, 64), (130, 256, 640, 128)])
def test_split_k_gemm_sums_both_halves(m, n, k, bn):
    """Both CTAs' partial tiles meet through tma.store_cta: the product of
    the whole K (k 72: the second CTA's half is one step; ragged M and N)."""
    from tkc.kernels.gemm_hopper import gemm_hopper
    rng = np.random.default_rng(m)
    a, b = _bf16(rng, 1, 1, m, k), _bf16(rng, 1, 1, k, n)
    c = np.full((1, 1, m, n), np.nan, np.float32)
    gemm_hopper("f32", BN=bn, persistent=False, split=2).interpret(a, b, c)
    ref = a[0, 0].astype(np.float64) @ b[0, 0].astype(np.float64)
    np.testing.assert_allclose(c[0, 0], ref, rtol=1e-4, atol=1e-3)
