"""The library GEMM's options for linear layers (tkc.kernels.gemm_hopper):
transposed A, a batch grid axis, the bias / activation / pre-activation
epilogue. Numbers through the interpreter (staged, persistent, 4 SMs) against
float64 numpy, on shapes that are not multiples of the 128 x 256 x 64 tile;
the defaults trace to the kernel as it was; every new kind compiles without
spills."""
import math

import numpy as np
import pytest
from helpers import ref_bf16, staged

import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.kernels import gemm_hopper
from tkc.ops import subtile, zero

_erf = np.vectorize(math.erf, otypes=[np.float64])
ACT = {None: lambda x: x,
       "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),       # F.gelu (erf form)
       "silu": lambda x: x / (1 + np.exp(-x))}


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def rel_err(x, ref):
    return float(np.linalg.norm(x.astype(np.float64) - ref) / np.linalg.norm(ref))


def tol(out):
    return 1e-5 if out == "f32" else 1e-2


def operands(rng, m, n, k, transpose_a=False, transpose_b=False, batch=(), b_batch=()):
    """bf16 A and B as the kernel reads them, and op(A) @ op(B) in float64
    (B scaled by 1/sqrt(K): products near 1, where activations bend)."""
    a = ref_bf16(rng.standard_normal((*batch, *((k, m) if transpose_a else (m, k)))))
    b = ref_bf16(rng.standard_normal((*b_batch, *((n, k) if transpose_b else (k, n)))) / math.sqrt(k))
    op_a = np.swapaxes(a, -1, -2) if transpose_a else a
    op_b = np.swapaxes(b, -1, -2) if transpose_b else b
    return a, b, np.matmul(op_a.astype(np.float64), op_b.astype(np.float64))


def empty(shape):
    return np.full(shape, np.nan, np.float32)


def run_linear(rng, out, m, n, k, batch=(), b_batch=(), **options):
    """Run gemm_hopper(out, **options) on random operands; (c, z, the f32 pre-activation, the expected c)."""
    a, b, ref = operands(rng, m, n, k, options.get("transpose_a", False),
                         options.get("transpose_b", False), batch, b_batch)
    args = [a, b]
    if options.get("bias"):
        vec = ref_bf16(rng.standard_normal(n))
        args.append(vec)
        ref = ref + vec
    c = empty(ref.shape)
    z = empty(ref.shape) if options.get("preact") else None
    args += [c] + ([z] if z is not None else [])
    gemm_hopper(out, **options).interpret(*args)
    assert not np.isnan(c).any(), "elements of C were not written"
    return c, z, ref, ACT[options.get("activation")](ref)


# ---------------------------------------------------------------- transposed A

@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("out,m,n,k", [
    ("f32", 200, 392, 320),   # 2 x 2 items on 4 SMs, 5 K steps: the ring wraps; ragged M, N
    ("bf16", 72, 136, 200),   # one ragged item: M, N, K all short of the tile
])
def test_transposed_a(out, m, n, k, transpose_b, rng):
    """C = A^T B (dW = X^T dY) and A^T B^T from A stored K x M: wgmma's transpose of A."""
    c, _, _, ref = run_linear(rng, out, m, n, k, transpose_a=True, transpose_b=transpose_b)
    assert rel_err(c, ref) < tol(out)


def test_transposed_a_is_not_a(rng):
    """The test above can tell A^T B from A B: with M = K, reading A untransposed fails."""
    a, b, ref = operands(rng, 128, 256, 128, transpose_a=True)
    c = empty(ref.shape)
    gemm_hopper("f32").interpret(a, b, c)
    assert rel_err(c, ref) > 0.5


# ---------------------------------------------------------------- batches

@pytest.mark.parametrize("b_batch", [3, 1])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_batched(b_batch, transpose_b, rng):
    """[3, M, K] x [3, K, N] (or one B for every batch: b's batch 1) in one
    launch, the batch the grid's z: 6 work items on 4 persistent blocks, so
    blocks move between batches."""
    c, _, _, ref = run_linear(rng, "f32", 200, 136, 200, batch=(3,), b_batch=(b_batch,),
                              batched=True, transpose_b=transpose_b)
    assert rel_err(c, ref) < 1e-5
    for i in range(3):  # each batch its own product
        assert rel_err(c[i], ref[i]) < 1e-5


def test_batched_transposed_a(rng):
    c, _, _, ref = run_linear(rng, "bf16", 72, 264, 136, batch=(2,), b_batch=(2,),
                              batched=True, transpose_a=True)
    assert rel_err(c, ref) < 1e-2


def test_batched_grouped_order(rng):
    """A grouped block order over a 3-D grid: z outermost, super-rows of 2 in each batch."""
    a, b, ref = operands(rng, 392, 264, 64, batch=(2,), b_batch=(2,))
    c = empty(ref.shape)
    kern = gemm_hopper("f32", batched=True, order="grouped(y, 2)")
    assert 'tk.order = "grouped(y, 2)"' in str(staged(kern))
    kern.interpret(a, b, c)
    assert rel_err(c, ref) < 1e-5


# ---------------------------------------------------------------- epilogue

@pytest.mark.parametrize("out,transpose_b,m,n,k", [
    ("f32", True, 77, 136, 200), ("bf16", True, 77, 136, 200), ("f32", False, 200, 392, 136)])
def test_bias(out, transpose_b, m, n, k, rng):
    """nn.Linear: C = X W^T + bias, bias[n] on every row of column n (N ragged:
    the bias' columns past N are never read into C)."""
    c, _, ref, _ = run_linear(rng, out, m, n, k, transpose_b=transpose_b, bias=True)
    assert rel_err(c, ref) < tol(out)


@pytest.mark.parametrize("activation", ["gelu", "silu"])
@pytest.mark.parametrize("bias", [False, True])
def test_activation(activation, bias, rng):
    c, _, pre, ref = run_linear(rng, "f32", 77, 136, 200, transpose_b=True, bias=bias,
                                activation=activation)
    assert rel_err(c, ref) < 1e-5
    assert rel_err(c, pre) > 1e-2  # the activation was applied


def test_gelu_is_the_erf_form(rng):
    """F.gelu's default (erf), not the tanh approximation: the two differ by
    more than the tolerance on these values, and C is the erf one."""
    c, _, pre, ref = run_linear(rng, "f32", 128, 256, 64, activation="gelu")
    assert rel_err(c, ref) < 1e-5
    assert rel_err(c, gelu_tanh(pre)) > 1e-4


@pytest.mark.parametrize("activation", ["gelu", "silu"])
@pytest.mark.parametrize("out", ["f32", "bf16"])
def test_preact(activation, out, rng):
    """preact=True also stores z = X W^T + bias, for the backward's act'(z)."""
    c, z, pre, ref = run_linear(rng, out, 200, 392, 136, transpose_b=True, bias=True,
                                activation=activation, preact=True)
    assert not np.isnan(z).any(), "elements of z were not written"
    assert rel_err(z, pre) < tol(out)
    assert rel_err(c, ref) < tol(out)


def test_batched_linear_with_everything(rng):
    """One launch for a batched linear layer's forward: shared weights, bias, gelu, z."""
    c, z, pre, ref = run_linear(rng, "bf16", 77, 136, 200, batch=(3,), b_batch=(1,), batched=True,
                                transpose_b=True, bias=True, activation="gelu", preact=True)
    assert rel_err(z, pre) < 1e-2 and rel_err(c, ref) < 1e-2


# ---------------------------------------------------------------- the kernels

def test_arguments_in_order():
    """Inputs, then outputs: a, b, bias, c, z."""
    assert list(gemm_hopper("bf16").params) == ["a", "b", "c"]
    assert list(gemm_hopper("bf16", bias=True).params) == ["a", "b", "bias", "c"]
    assert list(gemm_hopper("bf16", activation="silu", preact=True).params) == ["a", "b", "c", "z"]
    k = gemm_hopper("bf16", batched=True, transpose_a=True, bias=True, activation="gelu", preact=True)
    assert list(k.params) == ["a", "b", "bias", "c", "z"]
    assert k.grid() == ["cdiv(c.c, 256)", "cdiv(c.r, 128)", "c.d"]


def test_bad_options():
    with pytest.raises(ValueError, match="needs an activation"):
        gemm_hopper("bf16", preact=True)
    with pytest.raises(ValueError, match="activation must be one of"):
        gemm_hopper("bf16", activation="relu")


def test_names_are_unique_and_the_defaults_keep_theirs():
    kinds = [dict(transpose_a=ta, transpose_b=tb, batched=bt, bias=bi, activation=act, preact=pre)
             for ta in (False, True) for tb in (False, True) for bt in (False, True)
             for bi in (False, True) for act in (None, "gelu", "silu")
             for pre in ((False, True) if act else (False,))]
    names = [gemm_hopper(out, **kw).name for out in ("bf16", "f32") for kw in kinds]
    assert len(set(names)) == len(names) == 2 * 2 * 2 * 2 * 2 * 5
    assert [gemm_hopper(out, transpose_b=tb).name for out in ("bf16", "f32") for tb in (False, True)] == [
        "gemm_hopper_bf16_ab_128x256x64", "gemm_hopper_bf16_abt_128x256x64",
        "gemm_hopper_f32_ab_128x256x64", "gemm_hopper_f32_abt_128x256x64"]


def _original(out_dtype, transpose_b, BN=256):
    """gemm_hopper as it was before its options for linear layers (default schedule)."""
    BM, BK = 128, 64
    epi, buffers = 16384 // (BM * (2 if out_dtype == bf16 else 4)), 2
    b_dims = ("N", "K") if transpose_b else ("K", "N")
    name = f"gemm_hopper_{out_dtype}_{'abt' if transpose_b else 'ab'}_{BM}x{BN}x{BK}"

    @tkc.kernel(name=name, warps=8, persistent=True, order="auto",
                grid=lambda a, b, c: (tkc.cdiv(c.c, BN), tkc.cdiv(c.r, BM)))
    def gemm(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, *b_dims),
             c: gl(out_dtype, 1, 1, "M", "N")):
        bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
        a_s = st(bf16, BM, BK)
        b_s = st(bf16, BN, BK) if transpose_b else st(bf16, BK, BN)
        c_s = [st(out_dtype, BM, epi) for _ in range(buffers)]
        acc = zero(rt(f32, 16, BN))
        for k in tkc.range(tkc.cdiv(a.c, BK), stages="auto"):
            tma.load(a_s, a, (0, 0, bm, k))
            if transpose_b:
                tma.load(b_s, b, (0, 0, bn, k))
                warpgroup.mma_ABt(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
            else:
                tma.load(b_s, b, (0, 0, k, bn))
                warpgroup.mma_AB(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
            warpgroup.mma_async_wait(acc)
        for j in range(BN // epi):
            out = c_s[j % buffers]
            warpgroup.store(out, subtile(acc, 16, epi, (0, j)).to(out_dtype), (wg, 0))
            tma.store(c, out, (0, 0, bm, bn * (BN // epi) + j))

    return gemm


@pytest.mark.parametrize("out", ["bf16", "f32"])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_defaults_trace_as_before(out, transpose_b):
    """Without the new options the kernel is the one it was: the same tile IR, grid and name."""
    new, old = gemm_hopper(out, transpose_b=transpose_b), _original(out, transpose_b)
    assert new.name == old.name and new.grid() == old.grid()
    assert new.tile_ir() == old.tile_ir()


def _tma_stores(kern) -> int:
    return str(staged(kern)).count('"tk.tma_store"(')


def test_bias_keeps_the_finish_overlapped():
    """The bias starts the accumulator, so the finish stays register work plus
    stores, which tk-pipeline-staging moves into the next item's loop (the
    stores then appear three times: in the loop, after a short loop, after the
    last item); so does silu's and swiglu's (register work too: two chunks of
    128 columns); gelu's erf is left in place (overlap.py: it spilled), as are
    finishes whose carried tiles do not fit (the 256-wide preact ones: 128
    and 96 words)."""
    plain = _tma_stores(gemm_hopper("bf16", transpose_b=True))
    assert plain == 3 * 4
    assert _tma_stores(gemm_hopper("bf16", transpose_b=True, bias=True)) == plain
    assert _tma_stores(gemm_hopper("bf16", transpose_b=True, activation="silu")) == plain
    assert _tma_stores(gemm_hopper("bf16", transpose_b=True, activation="swiglu")) == 3 * 2
    assert _tma_stores(gemm_hopper("bf16", transpose_b=True, BN=192, activation="swiglu", preact=True)) == 3 * 9
    assert _tma_stores(gemm_hopper("bf16", transpose_b=True, activation="gelu")) == 4
    assert _tma_stores(gemm_hopper("bf16", transpose_b=True, activation="silu", preact=True)) == 8
    assert _tma_stores(gemm_hopper("bf16", transpose_b=True, activation="swiglu", preact=True)) == 6


@pytest.mark.parametrize("options", [
    dict(transpose_a=True), dict(transpose_a=True, transpose_b=True),
    dict(batched=True, transpose_b=True), dict(bias=True, transpose_b=True),
    dict(bias=True, activation="gelu", preact=True, transpose_b=True, batched=True),
], ids=lambda o: "-".join(k if v is True else str(v) for k, v in o.items()))
def test_compiles_without_spills(options, artifact_cache):
    art = gemm_hopper("bf16", **options).build()
    res = art.manifest["resources"]
    assert art.cubin[:4] == b"\x7fELF"
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0 and res["stack"] == 0, res
    assert not res["wgmma_serialized"], res


# ---------------------------------------------------------------- 64-row tiles

@pytest.mark.parametrize("options,m,n,k", [
    (dict(BN=32, persistent=False), 40, 200, 296),   # one consumer warpgroup, 7 column tiles
    (dict(BN=64, persistent=False, split=2), 16, 136, 456),   # split-K, 64 x 64 partials
    (dict(BN=128, persistent=False, split=2, transpose_b=True), 64, 264, 200),
    (dict(BN=64, transpose_a=True), 200, 136, 72),   # persistent, A^T: 64-column panels of A
    (dict(BN=32, persistent=False, bias=True, activation="silu", batched=True), 20, 72, 128),
    (dict(BN=16, persistent=False, split=2, transpose_b=True), 9, 72, 200),   # BM 16's narrowest
], ids=["bn32", "split-bn64", "split-bn128-bt", "at", "batched-linear", "split-bn16-bt"])
@pytest.mark.parametrize("bm", [64, 16])
def test_64_and_16_row_tiles(options, m, n, k, bm, rng):
    """BM = 64 and 16 (C of few rows; 16: A's rows in registers, four copies
    multiplied, warp 0's stored): products of ragged shapes (M past one
    tile), in each mode the schedules may pick them with (BM 16 with A
    transposed is refused: tile_rows gives such products BM 64)."""
    if bm == 16 and options.get("transpose_a"):
        with pytest.raises(ValueError, match="not with transpose_a"):
            gemm_hopper("f32", BM=16, **options)
        return
    batch = (2,) if options.get("batched") else ()
    c, _, _, ref = run_linear(rng, "f32", m, n, k, batch=batch, b_batch=batch, BM=bm, **options)
    assert rel_err(c, ref) < 1e-5


def test_64_row_tiles_grid_and_finish():
    """A 64-row tile: one consumer warpgroup (4 warps, the producer added), a
    grid of cdiv(M, 64) rows, and finish tiles as wide as the 16 KiB allow
    within BN (BN 32 builds: 64 x 32 ones, where 64 x 128 would not divide it)."""
    k = gemm_hopper("bf16", BM=64, BN=32, persistent=False)
    assert k.name == "gemm_hopper_bf16_ab_64x32x64_np" and k.warps == 4
    assert k.grid_fn(type("C", (), {"r": 130, "c": 100})()) == (4, 3)
    with pytest.raises(ValueError, match="BM is 128, 64"):
        gemm_hopper("bf16", BM=32)


def test_16_row_tiles_keep_each_wgmma_waited_on():
    """BM 16 multiplies A from registers: tk-pipeline-staging keeps the loop's
    full wait (a wgmma in flight would read registers the next step writes)."""
    text = str(staged(gemm_hopper("bf16", BM=16, BN=64, persistent=False, split=2)))
    assert '"tk.warpgroup_mma_wait"' in text and "pending = 1" not in text
    assert "pending = 1" in str(staged(gemm_hopper("bf16", BM=64, BN=64, persistent=False, split=2)))


# ---------------------------------------------------------------- sliced-K (two warpgroups a tile's K)

@pytest.mark.parametrize("options,m,n,k", [
    (dict(BN=128), 100, 264, 456),   # ragged M, N; K 3.6 steps of 128: a half step past K
    (dict(BN=64, transpose_b=True, bias=True), 40, 136, 200),   # the bias once, after the sum
    (dict(BN=128, transpose_a=True, activation="gelu", preact=True), 72, 136, 328),
    (dict(BN=64, batched=True, cluster_m=2), 130, 72, 520),   # pairs of row blocks share B
    (dict(BN=64, transpose_b=True), 16, 72, 64),   # one half step: warpgroup 1's half is zeros
], ids=["bn128", "bt-bias", "at-gelu-preact", "batched-cm2", "k64"])
def test_sliced_k(options, m, n, k, rng):
    """sliced=True: both consumer warpgroups multiply the tile's 64 rows by
    their half of each 128-deep K step, warpgroup 0 adds warpgroup 1's
    partial and finishes alone (bias and activation after the sum)."""
    batch = (2,) if options.get("batched") else ()
    c, z, pre, ref = run_linear(rng, "f32", m, n, k, batch=batch, b_batch=batch, BM=64, persistent=False,
                                sliced=True, **options)
    assert rel_err(c, ref) < 1e-5
    if z is not None:
        assert rel_err(z, pre) < 1e-5


def test_sliced_k_shape_and_refusals():
    """Eight consumer warps, K steps of 128 in A's and B's stages (each half
    one 64-column panel of A), one partial tile; refused where a tile is not
    64 rows or its blocks loop or pair up along x."""
    k = gemm_hopper("bf16", BM=64, BN=128, persistent=False, sliced=True)
    assert k.name == "gemm_hopper_bf16_ab_64x128x128_np_sliced" and k.warps == 8
    assert k.grid_fn(type("C", (), {"r": 130, "c": 300})()) == (3, 3)
    text = str(staged(k))
    for tile in ("bf16, 64 : i64, 128 : i64", "bf16, 128 : i64, 128 : i64", "f32, 64 : i64, 128 : i64"):
        assert f"!tk.st<{tile}" in text, tile
    for bad in (dict(BM=128), dict(BM=64, persistent=True), dict(BM=64, swap=True, BN=64),
                dict(BM=64, split=2, BN=64), dict(BM=64, transpose_b=True, activation="swiglu", BN=64)):
        with pytest.raises(ValueError, match="sliced=True"):
            gemm_hopper("bf16", **{"persistent": False, **bad}, sliced=True)


# ---------------------------------------------------------------- clusters along C's rows

@pytest.mark.parametrize("options,m,n,k", [
    (dict(BM=64, BN=128, persistent=False, cluster_m=4), 200, 264, 200),   # 4 row blocks share B
    (dict(BM=64, BN=64, persistent=False, split=2, cluster_m=2), 100, 136, 456),   # (2, 2) clusters
    (dict(BM=64, BN=64, persistent=False, split=4, cluster_m=2, transpose_b=True), 72, 136, 520),
    (dict(BN=128, persistent=False, cluster=2, cluster_m=2, bias=True), 300, 520, 136),   # A along x
    (dict(BM=48, BN=64, persistent=False, swap=True, split=2, cluster_m=2), 100, 136, 200),
], ids=["bm64-cm4", "split2-cm2", "split4-cm2-bt", "c2-cm2-bias", "swap-split2-cm2"])
def test_clusters_along_rows_share_b(options, m, n, k, rng):
    """cluster_m: row blocks of C in clusters along y share B's tile
    (tk-pipeline-staging multicasts it along y), alone, with split-K's CTAs
    along x (the peers' ranks y * split ..), with A shared along x, and
    swapped; ragged shapes, so some clusters hold row blocks past M."""
    c, _, _, ref = run_linear(rng, "f32", m, n, k, **options)
    assert rel_err(c, ref) < 1e-5


def test_clusters_along_rows_grid_and_refusals():
    """The grid's y rounds up to whole clusters; the B load is multicast
    along y; persistent blocks (whose items tk-grid-ordering deals along x)
    are refused."""
    k = gemm_hopper("bf16", BM=64, BN=128, persistent=False, cluster_m=4)
    assert k.name == "gemm_hopper_bf16_ab_64x128x64_np_cm4" and k.cluster == (1, 4, 1)
    assert k.grid_fn(type("C", (), {"r": 320, "c": 1536})()) == (12, 8)
    assert str(staged(k)).count('"tk.tma_load_multicast"') == 1
    with pytest.raises(ValueError, match="cluster_m is 1, 2 or 4"):
        gemm_hopper("bf16", BM=64, BN=128, cluster_m=2)   # persistent


# ---------------------------------------------------------------- swapped tiles (C's rows on wgmma's N)

@pytest.mark.parametrize("options,m,n,k", [
    (dict(BM=48, BN=128), 100, 392, 136),                    # 3 x 4 items on 4 SMs, ragged M, N, K
    (dict(BM=32, BN=64, transpose_b=True, bias=True), 70, 136, 72),
    (dict(BM=48, BN=128, transpose_a=True, cluster=2), 104, 392, 72),   # A shared by the cluster
    (dict(BM=32, BN=64, transpose_a=True, transpose_b=True, activation="silu", preact=True), 40, 72, 200),
    (dict(BM=32, BN=64, batched=True, persistent=False), 40, 72, 200),
    (dict(BM=48, BN=64, persistent=False, split=2), 100, 136, 200),   # split-K: C^T's partials swapped
    (dict(BM=32, BN=64, persistent=False, split=2, transpose_b=True, bias=True), 40, 72, 456),  # bias once
    (dict(BM=32, BN=64, persistent=False, split=2, transpose_a=True, activation="silu", preact=True), 72, 72, 136),
    (dict(BM=48, BN=128, persistent=False, split=2, batched=True), 40, 136, 200),
], ids=["ab", "abt-bias", "atb-cluster", "atbt-silu-preact", "batched", "split", "split-abt-bias",
        "split-atb-silu-preact", "split-bn128-batched"])
@pytest.mark.parametrize("out", ["f32", "bf16"])
def test_swapped_tiles(options, m, n, k, out, rng):
    """swap=True: the block computes C^T's tile (B's tile is wgmma's a, A's
    its b, both as TMA put them) and the finish stores each accumulator's
    transpose; every product, the bias (added per row of C^T), activations
    and their pre-activation, a cluster, batches, split-K (the two CTAs'
    partial tiles of C^T swapped; the bias added once, after)."""
    batch = (2,) if options.get("batched") else ()
    c, z, pre, ref = run_linear(rng, out, m, n, k, batch=batch, b_batch=batch, swap=True, **options)
    assert rel_err(c, ref) < tol(out)
    if z is not None:
        assert rel_err(z, pre) < tol(out)


def test_swapped_tiles_grid_finish_and_refusals():
    """A swapped tile: BN / 64 consumer warpgroups, a grid of cdiv(M, BM)
    rows, one finish tile of the whole tile (transposed in registers by
    renaming, stored by stmatrix.trans: no movmatrix), overlapped with the
    next item's loop; widths and heights wgmma cannot take refused (and
    split-K's own rules: not persistent, no cluster of its own)."""
    k = gemm_hopper("bf16", BM=208, BN=128, swap=True)
    assert k.name == "gemm_hopper_bf16_ab_208x128x64_swap" and k.warps == 8
    assert k.grid_fn(type("C", (), {"r": 777, "c": 4096})()) == (32, 4)
    assert _tma_stores(k) == 3
    module = staged(k)
    assert '"tk.transpose"' in str(module) and "-> !tk.rt<bf16, 208 : i64, 16 : i64, \"col\">" in str(module)
    for bad in (dict(BM=208, BN=192), dict(BM=200, BN=128), dict(BM=272, BN=64)):
        with pytest.raises(ValueError, match="swap=True"):
            gemm_hopper("bf16", swap=True, **bad)
    with pytest.raises(ValueError, match="split is 1, 2 or 4"):
        gemm_hopper("bf16", swap=True, BM=64, BN=64, split=2)   # persistent
    assert gemm_hopper("bf16", swap=True, BM=160, BN=64, split=2, persistent=False).cluster == (2, 1, 1)


@pytest.mark.parametrize("options", [dict(BM=256, BN=128), dict(BM=208, BN=64, persistent=False),
                                     dict(BM=80, BN=128, transpose_a=True, bias=True, activation="gelu",
                                          preact=True, transpose_b=True),
                                     dict(BM=160, BN=64, persistent=False, split=2, bias=True, activation="gelu")],
                         ids=["256x128", "208x64", "80x128-linear", "160x64-split-linear"])
def test_swapped_tiles_compile_without_spills(options, artifact_cache):
    art = gemm_hopper("bf16", swap=True, **options).build()
    res = art.manifest["resources"]
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0 and res["stack"] == 0, res
    assert not res["wgmma_serialized"], res
    assert "movmatrix" not in art.ptx


# ---------------------------------------------------------------- split-K 4 (a reduce-scatter over 4 CTAs)

@pytest.mark.parametrize("options,m,n,k", [
    (dict(BM=64, BN=64), 100, 136, 456),   # 2 x 3 tiles; 8 K steps, two a CTA
    (dict(BM=64, BN=128, transpose_b=True, bias=True, activation="gelu", preact=True), 70, 136, 200),
    (dict(BM=64, BN=32, transpose_a=True, batched=True), 40, 72, 72),   # 2 K steps: CTAs 2 and 3 sum none
    (dict(BM=48, BN=64, swap=True), 100, 136, 456),
    (dict(BM=32, BN=64, swap=True, transpose_b=True, bias=True), 40, 72, 456),   # the bias added once
    (dict(BM=80, BN=64, swap=True, transpose_a=True, activation="silu", preact=True), 72, 72, 136),
    (dict(BM=48, BN=64, swap=True, transpose_a=True, transpose_b=True, batched=True), 40, 136, 200),
], ids=["ab", "abt-gelu-preact", "atb-batched-short-k", "swap", "swap-abt-bias", "swap-atb-silu-preact",
        "swap-atbt-batched"])
@pytest.mark.parametrize("out", ["f32", "bf16"])
def test_split_k_4(options, m, n, k, out, rng):
    """split=4: each CTA of a (4, 1, 1) cluster sums a quarter of K's steps
    (none, where K has fewer than four), sends each peer its partial of the
    peer's warp's rows and finishes warp r's own 16 rows of C (swapped: 16
    columns): every product, ragged edges, the bias once, activations and
    their pre-activation, batches."""
    batch = (2,) if options.get("batched") else ()
    c, z, pre, ref = run_linear(rng, out, m, n, k, batch=batch, b_batch=batch, persistent=False, split=4,
                                **options)
    assert rel_err(c, ref) < tol(out)
    if z is not None:
        assert rel_err(z, pre) < tol(out)


def test_split_k_4_grid_and_refusals():
    """Four CTAs a cluster along x, four times the column tiles; one consumer
    warpgroup only (its four warps' rows are the four CTAs' to finish), not
    persistent, no cluster of its own."""
    k = gemm_hopper("bf16", BM=64, BN=64, persistent=False, split=4)
    assert k.name == "gemm_hopper_bf16_ab_64x64x64_np_k4" and k.cluster == (4, 1, 1) and k.warps == 4
    assert k.grid_fn(type("C", (), {"r": 130, "c": 100})()) == (8, 3)
    for bad in (dict(BM=128, BN=64), dict(BM=16, BN=64), dict(BM=160, BN=128, swap=True)):
        with pytest.raises(ValueError, match="split=4 gives each of the four CTAs"):
            gemm_hopper("bf16", persistent=False, split=4, **bad)
    with pytest.raises(ValueError, match="split is 1, 2 or 4"):
        gemm_hopper("bf16", BM=64, BN=64, split=4)   # persistent
    with pytest.raises(ValueError, match="split is 1, 2 or 4"):
        gemm_hopper("bf16", BM=64, BN=64, persistent=False, split=3)


@pytest.mark.parametrize("options", [dict(BM=240, BN=64, swap=True, transpose_b=True, bias=True,
                                          activation="gelu", preact=True),
                                     dict(BM=64, BN=128, bias=True, activation="silu", preact=True)],
                         ids=["swap240-linear", "64x128-linear"])
def test_split_k_4_compiles_without_spills(options, artifact_cache):
    """The tallest swapped tile's epilogue with its pre-activation (through
    one finish tile, the activation's registers were held across the
    pre-activation's store: 1 KB of spills; two finish tiles take none)."""
    art = gemm_hopper("bf16", persistent=False, split=4, **options).build()
    res = art.manifest["resources"]
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0 and res["stack"] == 0, res
    assert not res["wgmma_serialized"], res


@pytest.mark.parametrize("options,stages,marked", [
    (dict(BM=128, BN=128, split=2), 5, 3),   # 2 finish tiles + the partial staged for the peer; 2 without
    (dict(BM=208, BN=64, split=4, swap=True), 5, 5),   # 2 finish tiles + 3 staged partials; 3 without
    (dict(BM=128, BN=128, split=1), 6, 0),   # plain tiles keep theirs (a deeper ring measured slower)
])
def test_split_k_tiles_after_the_loop_lie_over_the_ring(options, stages, marked):
    """Split-K's finish tiles and the partials a CTA sends its peers are
    st(after_loop=True) (not the tiles peers copy into): the ring takes the
    shared memory they free."""
    text = str(staged(gemm_hopper("bf16", persistent=False, **options)))
    assert text.count("{after_ring}") == marked
    assert f'"tk.alloc"() {{stages = {stages} : i64}} : () -> !tk.st<bf16' in text


def test_after_loop_tiles_are_checked():
    """st(after_loop=True) is a claim tk-pipeline-staging checks, at the
    tile's line: a tile used in the loop, one a peer copies into, one in a
    persistent kernel are refused."""
    def kernel(where, persistent=False):
        @tkc.kernel(warps=4, persistent=persistent, cluster=(1, 1, 1) if persistent else (2, 1, 1),
                    grid=lambda a, o: (2, 1, 1))
        def k(a: gl(bf16, 1, 1, 64, "K"), o: gl(f32, 1, 2, 64, 64)):
            a_s = st(bf16, 64, 64)
            t = st(f32, 64, 64, after_loop=True)   # the tile under test
            got = tkc.barrier()
            acc = zero(rt(f32, 16, 64))
            for k in tkc.range(a.c // 64, stages="auto"):
                tma.load(a_s, a, (0, 0, 0, k))
                warpgroup.mma_ABt(acc, a_s, a_s)
                if where == "loop":
                    warpgroup.store(t, acc, (0, 0))
                warpgroup.mma_async_wait(acc)
            if where == "peer":
                tma.expect(got, t)
                tma.store_cta(t, t, 0, got)
                tkc.wait(got, 0)
            warpgroup.store(t, acc, (0, 0))
            tma.store(o, t, (0, 0, 0, 0))
        return k
    assert "{after_ring}" in str(staged(kernel("after")))

    @tkc.kernel(warps=4, grid=lambda o: (1, 1, 1))
    def plain(o: gl(f32, 1, 1, 64, 64)):
        t = st(f32, 64, 64, after_loop=True)
        warpgroup.store(t, zero(rt(f32, 16, 64)), (0, 0))
        tma.store(o, t, (0, 0, 0, 0))
    with pytest.raises(TkcError, match="no pipelined loop"):
        staged(plain)
    for where, persistent, why in (("loop", False, "uses it before or in the loop"),
                                   ("peer", False, "writes it from elsewhere"),
                                   ("after", True, "the kernel is persistent")):
        with pytest.raises(TkcError, match=why) as e:
            staged(kernel(where, persistent))
        assert "test_gemm_hopper.py" in e.value.where


# ---------------------------------------------------------------- gated (swiglu)

def run_gated(rng, out, m, n, k, preact=False, **options):
    """gemm_hopper(activation="swiglu") on random x and two [N, K] weights:
    (c, z, z_up, the expected c, gate, up) in float64."""
    a = ref_bf16(rng.standard_normal((m, k)))
    wg, wu = (ref_bf16(rng.standard_normal((n, k)) / math.sqrt(k)) for _ in "gu")
    gate, up = (a.astype(np.float64) @ w.T.astype(np.float64) for w in (wg, wu))
    c, z, z_up = empty((m, n)), empty((m, n)), empty((m, n))
    gemm_hopper(out, transpose_b=True, activation="swiglu", preact=preact, **options).interpret(
        a, wg, wu, c, *((z, z_up) if preact else ()))
    assert not np.isnan(c).any(), "elements of C were not written"
    return c, z, z_up, ACT["silu"](gate) * up, gate, up


@pytest.mark.parametrize("out,m,n,k,options", [
    ("f32", 200, 392, 136, {}),   # 2 x 4 items of 128 gated columns on 4 SMs; ragged M, N, K
    ("bf16", 77, 136, 200, dict(BN=192, cluster=2)),   # 96-column tiles, a CTA pair sharing A
    ("f32", 40, 200, 296, dict(BN=64, persistent=False, BM=64)),
    ("f32", 9, 72, 200, dict(BN=32, persistent=False, BM=16, split=2)),   # 16-column tiles, split-K
    ("f32", 30, 100, 456, dict(BN=64, persistent=False, BM=64, split=4)),
], ids=["bn256", "bn192-cluster", "bm64", "bm16-split2", "split4"])
def test_gated(out, m, n, k, options, rng):
    """C = silu(A W_gate^T) * (A W_up^T): the halves of one accumulator, gated
    in registers, at each kind of tile a schedule picks."""
    c, _, _, ref, gate, up = run_gated(rng, out, m, n, k, **options)
    assert rel_err(c, ref) < tol(out)
    assert rel_err(c, ACT["silu"](gate)) > 0.5 and rel_err(c, gate * up) > 1e-2   # both halves, gated


def test_gated_preact(rng):
    """preact=True also stores the gate and up values (the backward's)."""
    c, z, z_up, ref, gate, up = run_gated(rng, "bf16", 77, 136, 200, preact=True)
    assert rel_err(z, gate) < 1e-2 and rel_err(z_up, up) < 1e-2 and rel_err(c, ref) < 1e-2


def test_gated_kernels_arguments_grid_and_refusals():
    """Arguments a, b, b_up, c (z, z_up); a tile of BN accumulator columns
    covers BN / 2 of C's; gating takes nn.Linear's weights, unswapped, unbiased."""
    k = gemm_hopper("bf16", transpose_b=True, activation="swiglu", preact=True)
    assert list(k.params) == ["a", "b", "b_up", "c", "z", "z_up"] and k.name.endswith("_swiglu_preact")
    assert k.grid()[:2] == ["cdiv(c.c, 128)", "cdiv(c.r, 128)"]
    assert gemm_hopper("bf16", True, BN=192, cluster=2, activation="swiglu").grid()[0] == "cdiv(c.c, 192) * 2"
    for bad in (dict(transpose_b=False), dict(bias=True), dict(swap=True, BN=128, BM=208), dict(BN=48)):
        with pytest.raises(ValueError, match="reads two"):
            gemm_hopper("bf16", **{"transpose_b": True, **bad}, activation="swiglu")
    # three stores an output column chunk with preact (gate, up, C), one without (three places
    # each: overlapped, test_bias_keeps_the_finish_overlapped)
    assert _tma_stores(k) == 3 * 2 and _tma_stores(gemm_hopper("bf16", transpose_b=True, activation="swiglu")) == 3 * 2


@pytest.mark.parametrize("options", [dict(preact=True), dict(BN=192, preact=True, cluster=2), dict(),
                                     dict(BM=64, BN=256, persistent=False),
                                     dict(BM=16, BN=128, persistent=False, split=2)],
                         ids=["preact", "bn192-preact-overlapped", "overlapped", "bm64", "bm16-split2"])
def test_gated_compiles_without_spills(options, artifact_cache):
    art = gemm_hopper("bf16", transpose_b=True, activation="swiglu", **options).build()
    res = art.manifest["resources"]
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0 and res["stack"] == 0, res
    assert not res["wgmma_serialized"], res
