"""The Hopper attention kernels on the CPU: forward (attention_hopper),
backward (attention_prep + attention_bwd) through the interpreter after the
block and grid passes (the staged producer/consumer form, its races and
deadlocks checked), against numpy's float64 reference; every layout, causal
and not, GQA and MQA, ragged lengths, Lq != Lk, variable-length batches; and
what the compiled kernels are made of (HGMMA, TMA, the ring)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tkc.diagnostics import TkcError
from tkc.kernels import reference
from tkc.kernels.attention_bwd_kernel import attention_bwd
from tkc.kernels.attention_bwd_prep import attention_prep, stats_columns
from tkc.kernels.attention_picks import BWD_QUERIES, dq_order, dq_result
from tkc.kernels.attention_hopper import attention_hopper
from tkc.kernels.reference import round_bf16

pytest.importorskip("mlir")

SCALE = 0.125


def rel_err(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def _inputs(B, Hq, Hkv, Lq, Lk, D, seed):
    rng = np.random.default_rng(seed)
    q, do = (round_bf16(rng.standard_normal((B, Hq, Lq, D))) for _ in range(2))
    k, v = (round_bf16(rng.standard_normal((B, Hkv, Lk, D))) for _ in range(2))
    return q, k, v, do


def _blhd(x):
    """[B, H, L, D] -> FlashAttention's [B, L, H * D] (contiguous)."""
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(x.shape[0], x.shape[2], -1)


def _from_blhd(x, H):
    B, L, _ = x.shape
    return x.reshape(B, L, H, -1).transpose(0, 2, 1, 3)


def run_fixed(D, causal, layout, q, k, v, do, dq_mode="tma", BQ=None, **options):
    """(o, lse, dq, dk, dv) through the three kernels, in [B, H, L, D]; the
    backward steps BQ query rows (default: the library's, BWD_QUERIES), with
    attention_bwd's other options (persistent, overlap, dq_first, early_stats) as given."""
    B, Hq, Lq, _ = q.shape
    Hkv = k.shape[1]
    view = (lambda x: x) if layout == "bhld" else _blhd
    back = (lambda x, H: x) if layout == "bhld" else _from_blhd
    o = np.full(view(q).shape, np.nan, np.float32)
    lse = np.full((B, Hq, 1, Lq), np.nan, np.float32)
    attention_hopper(D, causal, layout).interpret(view(q), view(k), view(v), o, lse, SCALE)
    stats = np.full((B, Hq, 2, stats_columns(Lq)), np.nan, np.float32)
    dq = np.full(view(q).shape, np.nan, np.float32)   # the accumulator: prep zeroes it
    attention_prep(D, layout).interpret(o, view(do), lse, stats, dq)
    dk, dv = (np.full(view(k).shape, np.nan, np.float32) for _ in range(2))
    kern = attention_bwd(D, causal, layout, dq=dq_mode, BQ=BQ or BWD_QUERIES[D], **options)
    if options.get("dq_convert"):   # the last block of each KV head converts dQ into dq16
        dq16, count = np.full(dq.shape, np.nan, np.float32), np.zeros((B, Hkv), np.int32)
        kern.interpret(view(q), view(k), view(v), view(do), stats, dq, dk, dv, dq16, count, 1, SCALE)
        assert (count == -(-k.shape[2] // 128)).all()   # every block of the head counted itself
        assert np.array_equal(dq16, round_bf16(dq))
        dq = dq16
    else:
        kern.interpret(view(q), view(k), view(v), view(do), stats, dq, dk, dv, SCALE)
    if dq_order(options):   # the accumulator's columns in the kernel's order
        dq = dq_result(torch.from_numpy(dq), torch.float32, dq_order(options)).numpy()
    return back(o, Hq), lse[:, :, 0], back(dq, Hq), back(dk, Hkv), back(dv, Hkv)


def check(got, q, k, v, do, causal):
    o, lse, dq, dk, dv = got
    ro, rlse = reference.attention_lse(q, k, v, SCALE, causal)
    rdq, rdk, rdv = reference.attention_bwd(q, k, v, do, SCALE, causal)
    for x in (o, lse, dq, dk, dv):
        assert not np.isnan(x).any()  # every element written
    assert rel_err(o, ro) < 1e-2
    fin = np.isfinite(rlse)
    assert (np.isinf(lse) == ~fin).all() and np.abs(lse[fin] - rlse[fin]).max() < 1e-4
    for x, r in ((dq, rdq), (dk, rdk), (dv, rdv)):
        assert rel_err(x, r) < 1e-2


CASES = {  # name: (D, causal, layout, B, Hq, Hkv, Lq, Lk)
    "d64": (64, False, "bhld", 1, 2, 2, 256, 256),
    "d128-causal": (128, True, "bhld", 1, 2, 2, 256, 256),
    "ragged-gqa": (64, False, "bhld", 2, 4, 2, 200, 130),
    "mqa-causal-lq<lk": (64, True, "bhld", 1, 4, 1, 77, 300),
    "causal-lq>lk": (128, True, "bhld", 1, 2, 1, 300, 77),   # queries with no key: o 0, lse inf
    "blhd-causal-gqa": (64, True, "blhd", 1, 4, 2, 150, 200),
    "blhd-d128": (128, False, "blhd", 2, 2, 1, 64, 1000),
}


@pytest.mark.parametrize("case", list(CASES))
def test_forward_and_backward_interpreted(case):
    D, causal, layout, B, Hq, Hkv, Lq, Lk = CASES[case]
    q, k, v, do = _inputs(B, Hq, Hkv, Lq, Lk, D, seed=len(case))
    check(run_fixed(D, causal, layout, q, k, v, do), q, k, v, do, causal)


VARIANTS = [  # (kwargs, D, causal, Lq, Lk)
    (dict(overlap=True), 64, False, 200, 130),
    (dict(overlap=True), 128, True, 77, 300),
    (dict(overlap=True), 64, True, 300, 77),
    (dict(consumers=3), 64, False, 200, 130),   # BQ 192: a block past Lq's last row tile
    (dict(consumers=3), 64, True, 77, 450),
    (dict(consumers=1), 128, True, 130, 70),
    (dict(pingpong=True), 128, True, 200, 333),
    (dict(pingpong=True, overlap=True), 64, False, 130, 200),
    (dict(pingpong=True, overlap=True, consumers=3), 64, True, 250, 130),
    # persistent: 4 blocks (the interpreter's SMs) over 8-12 work items, the K/V ring
    # and the turns carried from one item to the next
    (dict(persistent=True), 128, True, 200, 333),
    (dict(persistent=True, consumers=3), 64, False, 300, 77),
    (dict(persistent=True, pingpong=True, overlap=True), 128, False, 130, 200),
    # zigzag: the rounds of items dealt forwards and backwards (3 rounds here)
    (dict(persistent="zigzag", consumers=3), 64, True, 450, 450),
    (dict(persistent="zigzag", pingpong=True, overlap=True), 128, True, 200, 333),
    # the diagonal's mask alone: keys past Lk (333, 77, 450: not whole tiles) past it too
    (dict(persistent="zigzag", diagonal_mask=True, ex2_fma=0.375), 64, True, 200, 333),
    (dict(diagonal_mask=True), 64, True, 300, 77),
    (dict(diagonal_mask=True, consumers=1, overlap=True), 128, True, 77, 450),
    (dict(persistent="zigzag", pingpong=True, overlap=True, diagonal_mask=True), 128, True, 333, 200),
    # O through Q's tile: rows past Lq (130, 200, 77) clipped by the TMA store
    (dict(o_via_q=True, KV=64, stages=2), 256, False, 130, 200),
    (dict(o_via_q=True, KV=64, stages=2, pingpong=True, overlap=True), 256, True, 200, 77),
    (dict(o_via_q=True, stages=3), 128, True, 77, 200),
]


@pytest.mark.parametrize("kw,D,causal,Lq,Lk", VARIANTS)
def test_forward_variants(kw, D, causal, Lq, Lk):
    """The forward's options, the same values: overlap=True (FlashAttention-3's
    intra-warpgroup overlap: V one tile behind, P carried, the S wait leaving
    PV in flight; the interpreter checks the in-flight wgmma operands for
    races), 1 or 3 consumer warpgroups (64 or 192 query rows a block) and
    pingpong=True (the warpgroups issue their wgmmas in turns: named barriers
    the interpreter runs, deadlocks and races included), persistent=True,
    diagonal_mask=True, o_via_q=True (O written into Q's tile after the
    last S wgmma: the interpreter checks that write against the wgmma
    reads)."""
    q, k, v, _ = _inputs(1, 4, 2, Lq, Lk, D, seed=D + Lq)
    o = np.full_like(q, np.nan)
    lse = np.full((1, 4, 1, Lq), np.nan, np.float32)
    attention_hopper(D, causal, **kw).interpret(q, k, v, o, lse, SCALE)
    ro, rlse = reference.attention_lse(q, k, v, SCALE, causal)
    assert rel_err(o, ro) < 1e-2
    fin = np.isfinite(rlse)
    assert (np.isinf(lse[:, :, 0]) == ~fin).all()
    assert np.abs(lse[:, :, 0][fin] - rlse[fin]).max() < 1e-4


@pytest.mark.parametrize("layout", ["bhld", "blhd"])
@pytest.mark.parametrize("causal,Lq,Lk", [(False, 130, 200), (True, 200, 77)])
def test_head_dim_256(layout, causal, Lq, Lk):
    """tkc.attention's D = 256 kernels on ragged GQA shapes: the short and the
    long forward (64-key tiles, O by TMA through Q's tile), and the backward that
    splits its work by halves of D (P^T handed between the warpgroups in
    shared memory, dQ by atomic adds, packed as tkc.attention has them: the
    interpreter checks the hand-over for races), and dQ by the pairs."""
    from tkc.kernels.attention_picks import BWD_SCHEDULE, attention_kernels
    q, k, v, do = _inputs(1, 4, 2, Lq, Lk, 256, seed=Lq)
    for packed in (True, False):
        check(run_fixed(256, causal, layout, q, k, v, do, dq_mode="atomic", **dict(BWD_SCHEDULE[256], dq_packed=packed)),
              q, k, v, do, causal)
    view = (lambda x: x) if layout == "bhld" else _blhd
    ro, rlse = reference.attention_lse(q, k, v, SCALE, causal)
    ks = attention_kernels(256, causal, layout)
    short, long = ks.short, ks.long
    for kern in (short, long):
        o = np.full(view(q).shape, np.nan, np.float32)
        lse = np.full((1, 4, 1, Lq), np.nan, np.float32)
        kern.interpret(view(q), view(k), view(v), o, lse, SCALE)
        o = o if layout == "bhld" else _from_blhd(o, 4)
        assert rel_err(o, ro) < 1e-2
        fin = np.isfinite(rlse)
        assert (np.isinf(lse[:, :, 0]) == ~fin).all()
        assert np.abs(lse[:, :, 0][fin] - rlse[fin]).max() < 1e-4


@pytest.mark.parametrize("D,layout,persistent", [(64, "bhld", "zigzag"), (128, "blhd", True)])
def test_persistent_backward_interpreted(D, layout, persistent):
    """The causal backward with 4 blocks (the interpreter's SMs) over 10 work
    items (5 key blocks, 2 KV heads): three rounds, the last partial; K and
    V reloaded, the Q/dO ring and dQ's store tiles carried across items."""
    q, k, v, do = _inputs(1, 4, 2, 450, 600, D, seed=11)
    check(run_fixed(D, True, layout, q, k, v, do, persistent=persistent), q, k, v, do, True)


BWD_VARIANTS = [  # (options, D, causal, layout, Lq, Lk)
    (dict(overlap=True), 128, True, "bhld", 200, 330),
    (dict(overlap=True), 64, False, "blhd", 300, 77),
    (dict(overlap=True, dq_mode="atomic"), 128, True, "bhld", 77, 300),
    (dict(overlap=True, persistent="zigzag"), 64, True, "bhld", 450, 600),
    (dict(overlap=True, dq_first=True), 128, False, "bhld", 200, 330),
    (dict(overlap=True, dq_first=True, persistent="zigzag"), 128, True, "blhd", 450, 600),
    (dict(overlap=True, dq_first=True, early_stats=True), 128, True, "blhd", 330, 200),
    (dict(early_stats=True), 64, False, "bhld", 200, 330),
    (dict(overlap=True, dq_first=True, early_stats=True, ds_slots=2), 128, False, "bhld", 330, 200),
    (dict(overlap=True, ds_slots=2), 64, True, "blhd", 200, 330),
    (dict(overlap=True, ds_slots=2, dq_mode="atomic"), 64, False, "bhld", 300, 77),
    (dict(overlap=True, ds_slots=2, persistent="zigzag"), 64, True, "bhld", 450, 600),
    (dict(overlap=True, ds_slots=2, dkv_tma=False), 128, True, "blhd", 200, 330),
    (dict(overlap=True, ds_slots=2, dkv_tma=False), 64, False, "bhld", 300, 77),
    (dict(overlap=True, ds_slots=2, stats_acc=True), 128, True, "bhld", 200, 330),
    (dict(overlap=True, ds_slots=2, stats_acc=True), 64, False, "blhd", 77, 300),
    (dict(overlap=True, ds_slots=2, stats_acc=True, dq_convert=True), 128, True, "bhld", 200, 330),
    (dict(overlap=True, ds_slots=2, stats_acc=True, dq_slots=1, stages=3), 128, False, "bhld", 330, 200),
    (dict(overlap=True, stats_acc=True, dq_slots=1, stages=3), 64, True, "blhd", 300, 77),
    (dict(overlap=True, ds_slots=2, stats_acc=True, dq_convert=True, dkv_tma=False), 64, False,
     "blhd", 77, 300),
    (dict(overlap=True, ds_slots=2, stats_acc=True, dq_deinterleave=True), 128, False, "bhld", 330, 200),
    (dict(overlap=True, ds_slots=2, stats_acc=True, dq_deinterleave=True), 64, True, "blhd", 200, 330),
    (dict(overlap=True, dq_mode="atomic", dq_packed=True), 128, True, "bhld", 77, 300),
    (dict(overlap=True, ds_slots=2, dq_mode="atomic", dq_packed=True), 64, False, "blhd", 300, 77),
]


@pytest.mark.parametrize("options,D,causal,layout,Lq,Lk", BWD_VARIANTS)
def test_backward_variants(options, D, causal, layout, Lq, Lk):
    """The backward's schedule options, the same gradients: overlap=True
    (the S^T wait leaves dP^T's wgmma in flight, the dP^T wait dV's) and
    dq_first=True (dK's wgmma issued after dQ's, in flight through dQ's
    store into the next tile, its Q/dO slot held until that tile's first
    wait), early_stats=True (the statistics read before the waits, under
    the wgmmas), ds_slots=2 (dS^T's tiles alternate, no barrier before its
    store; a persistent block's items still meet at their first tile); the
    interpreter checks the in-flight operands and the held
    slot's release for races, also across a persistent block's work items;
    dkv_tma=False (dK and dV stored from registers, clipped, not through K's
    and V's tiles by TMA); dq_slots=1 (one dQ tile: the consumers wait for
    the store warp's read of the last one before writing it)."""
    q, k, v, do = _inputs(1, 4, 2, Lq, Lk, D, seed=Lq + Lk)
    check(run_fixed(D, causal, layout, q, k, v, do, **options), q, k, v, do, causal)


def test_dq_by_atomic_adds():
    q, k, v, do = _inputs(1, 4, 2, 130, 200, 128, seed=7)
    check(run_fixed(128, True, "bhld", q, k, v, do, dq_mode="atomic"), q, k, v, do, True)


@pytest.mark.parametrize("causal,dq_mode", [(False, "tma"), (True, "atomic")])
def test_backward_64_query_rows_at_d64(causal, dq_mode):
    """D = 64 with BQ = 64 (dQ split by columns; the library steps 128 rows)."""
    q, k, v, do = _inputs(1, 2, 1, 200, 77, 64, seed=5)
    check(run_fixed(64, causal, "bhld", q, k, v, do, dq_mode=dq_mode, BQ=64), q, k, v, do, causal)


def _packed(lengths, H, D, rng):
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return cu, round_bf16(rng.standard_normal((cu[-1], H, D)))


@pytest.mark.parametrize("D,causal,dq_mode,persistent", [(64, True, "atomic", False),
                                                         (128, False, "tma", True),
                                                         (256, True, "atomic", False)])
def test_varlen_interpreted(D, causal, dq_mode, persistent):
    """One launch over sequences of 77, 200, 1 and 130 queries (keys 100,
    200, 30, 129): each sequence's rows as its own attention; offsets that
    are not multiples of anything (odd slices of lse and of the gl rows);
    persistent: the forward's and the backward's blocks loop over the work items."""
    rng = np.random.default_rng(D)
    cu_q, q = _packed([77, 200, 1, 130], 4, D, rng)
    cu_k, k = _packed([100, 200, 30, 129], 2, D, rng)
    v, do = round_bf16(rng.standard_normal(k.shape)), round_bf16(rng.standard_normal(q.shape))
    flat = lambda x: x.reshape(len(x), -1)  # noqa: E731
    o = np.full_like(q, np.nan)
    lse = np.full((4, 1, len(q)), np.nan, np.float32)
    fwd = attention_hopper(D, causal, "varlen", persistent=persistent)
    fwd.interpret(flat(q), flat(k), flat(v), flat(o), lse, cu_q, cu_k, 200, SCALE)
    stats = np.full((4, 2, stats_columns(len(q), 4)), np.nan, np.float32)
    dq = np.full_like(q, np.nan)                     # the accumulator: prep zeroes it
    attention_prep(D, "varlen").interpret(flat(o), flat(do), lse, stats, flat(dq), cu_q, 200)
    dk, dv = np.full_like(k, np.nan), np.full_like(v, np.nan)
    packed = {"dq_packed": True} if D == 256 else {}   # tkc.attention's dQ adds at D = 256
    attention_bwd(D, causal, "varlen", dq=dq_mode, BQ=BWD_QUERIES[D], persistent=persistent, **packed).interpret(
        flat(q), flat(k), flat(v), flat(do), stats, flat(dq), flat(dk), flat(dv), cu_q, cu_k,
        200, SCALE)
    if packed:
        dq = dq_result(torch.from_numpy(dq), torch.float32, "packed").numpy()
    for b in range(4):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        t = lambda x, s: x[s].transpose(1, 0, 2)[None]  # noqa: E731
        check((t(o, sq), lse[:, 0, sq][None], t(dq, sq), t(dk, sk), t(dv, sk)),
              t(q, sq), t(k, sk), t(v, sk), t(do, sq), causal)


def test_refusals():
    with pytest.raises(TkcError, match="head dim 96 is not supported"):
        attention_hopper(96)
    with pytest.raises(TkcError, match="ds_slots must be 1 or 2"):
        attention_bwd(64, ds_slots=3)
    with pytest.raises(TkcError, match="layout must be one of"):
        attention_bwd(64, layout="bshd")
    with pytest.raises(TkcError, match="dq must be 'atomic' or 'tma'"):
        attention_bwd(64, dq="shared")
    with pytest.raises(TkcError, match="BQ must be 64, or 128 at D = 64"):
        attention_bwd(128, BQ=128)
    with pytest.raises(TkcError, match=r"at D = 256 dQ goes by atomic adds"):
        attention_bwd(256, dq="tma")
    for bad in (dict(layout="varlen"), dict(persistent=True)):
        with pytest.raises(TkcError, match=r"dkv_tma needs a layout other than varlen"):
            attention_bwd(128, dkv_tma=True, **bad)
    for option in ("overlap", "dq_first", "early_stats"):
        with pytest.raises(TkcError, match=r"overlap, dq_first, early_stats and ds_slots schedule the D <= 128 body"):
            attention_bwd(256, **{option: True})
    for bad in (dict(layout="varlen"), dict(persistent=True)):
        with pytest.raises(TkcError, match=r"o_via_q needs a layout other than varlen"):
            attention_hopper(128, o_via_q=True, **bad)
    kern = attention_hopper(64)
    q = np.zeros((1, 3, 64, 64), np.float32)
    k = np.zeros((1, 2, 64, 64), np.float32)
    with pytest.raises(TkcError, match=r"\(Hq = 3\) must be a multiple of .* \(Hkv = 2\)"):
        kern.interpret(q, k, k, q.copy(), np.zeros((1, 3, 1, 64), np.float32), SCALE)


@pytest.fixture(scope="module")
def sass():
    """Opcodes and manifest of a kernel built through the machine's artifact
    cache (conftest.py's artifact_cache: the library test builds most of these
    kernels too, so each compiles once), the environment restored after the module."""
    from helpers import MACHINE_CACHE
    from tkc.sass import cuobjdump, disassemble, opcodes
    if cuobjdump() is None:
        pytest.skip("cuobjdump not available (pip install nvidia-cuda-cuobjdump)")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TKC_CACHE_DIR", MACHINE_CACHE)
        yield lambda kern: (opcodes(disassemble(kern.build().cubin)), kern.build().manifest)


def test_forward_sass(sass):
    """wgmma (HGMMA 64x128 for S, 64x128 for O at D = 128), TMA loads of Q, K
    and V, a TMA store of O, setmaxnreg, no local memory."""
    ops, manifest = sass(attention_hopper(128, causal=True))
    assert ops.get("HGMMA", 0) >= 16 and "HMMA" not in ops, ops
    assert ops.get("UTMALDG", 0) >= 3 and ops.get("UTMASTG", 0) >= 1, ops
    assert "LDL" not in ops and "STL" not in ops
    assert manifest["resources"]["spill_stores"] == 0
    assert "wgmma_serialized" not in manifest["resources"] or not manifest["resources"]["wgmma_serialized"]


def test_backward_sass(sass):
    """Five wgmma per query tile, dQ by TMA reduce-add (UTMAREDG), or by
    atomic adds (REDG), no wgmma serialisation."""
    ops, manifest = sass(attention_bwd(64, causal=True))
    assert ops.get("HGMMA", 0) >= 5 and "HMMA" not in ops, ops
    assert ops.get("UTMAREDG", 0) >= 1 and "REDG" not in ops, ops
    ops, _ = sass(attention_bwd(64, causal=True, dq="atomic"))
    assert ops.get("REDG", 0) + ops.get("RED", 0) >= 1, ops
    assert manifest["resources"]["spill_stores"] == 0
    assert not manifest["resources"].get("wgmma_serialized")
