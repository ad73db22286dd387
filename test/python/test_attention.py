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
from tkc.kernels.attention_bwd_kernel import attention_bwd, dq_result
from tkc.kernels.attention_bwd_prep import attention_prep, stats_columns
from tkc.kernels.attention_hopper import attention_hopper
from tkc.kernels.attention_schedule import BackwardSchedule, ForwardSchedule, backward_space, forward_space
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
    """[B, H, L, D] values in FlashAttention's [B, L, H, D] memory, seen as
    [B, H, L, D]: the strided view the kernels take as they take SDPA's."""
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)


def _empty(shape, memory: str):
    """NaNs of [B, H, L, D] `shape`, laid out in `memory` order ("bhld" or "blhd")."""
    x = np.full(shape, np.nan, np.float32)
    return _blhd(x) if memory == "blhd" else x


def run_fixed(D, causal, memory, q, k, v, do, bwd: BackwardSchedule | None = None):
    """(o, lse, dq, dk, dv) through the three kernels (bhld: strided gls), every
    [B, H, L, D] tensor laid out in `memory` order (SDPA's "bhld" or
    FlashAttention's "blhd"); the backward as `bwd` schedules it (default:
    the library's first, the space's default)."""
    B, Hq, Lq, _ = q.shape
    view = (lambda x: x) if memory == "bhld" else _blhd
    o = _empty(q.shape, memory)
    lse = np.full((B, Hq, 1, Lq), np.nan, np.float32)
    attention_hopper(D, causal, "bhld").interpret(view(q), view(k), view(v), o, lse, SCALE)
    stats = np.full((B, Hq, 2, stats_columns(Lq)), np.nan, np.float32)
    dq = _empty(q.shape, memory)   # the accumulator: prep zeroes it
    attention_prep(D, "bhld").interpret(o, view(do), lse, stats, dq)
    dk, dv = _empty(k.shape, memory), _empty(k.shape, memory)
    bwd = bwd or backward_space(D, causal, "bhld")[0]
    attention_bwd(D, causal, "bhld", bwd).interpret(view(q), view(k), view(v), view(do), stats, dq, dk, dv,
                                                    SCALE)
    if bwd.dq_packed:   # the accumulator's columns in the kernel's order
        dq = dq_result(torch.from_numpy(dq), torch.float32, packed=True).numpy()
    return o, lse[:, :, 0], dq, dk, dv


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


CASES = {  # name: (D, causal, memory order, B, Hq, Hkv, Lq, Lk)
    "d64": (64, False, "bhld", 1, 2, 2, 256, 256),
    "d128-causal": (128, True, "bhld", 1, 2, 2, 256, 256),
    "ragged-gqa": (64, False, "bhld", 2, 4, 2, 200, 130),
    "mqa-causal-lq<lk": (64, True, "bhld", 1, 4, 1, 77, 300),
    "causal-lq>lk": (128, True, "bhld", 1, 2, 1, 300, 77),   # queries with no key: o 0, lse inf
    "blhd-causal-gqa": (64, True, "blhd", 1, 4, 2, 150, 200),
    "blhd-d128": (128, False, "blhd", 2, 2, 1, 64, 1000),
    # D 96 (Phi-3's): 192-byte rows, the backward's dQ split in 48-column halves
    "d96-ragged-gqa": (96, False, "bhld", 1, 4, 2, 200, 130),
    "d96-blhd-causal": (96, True, "blhd", 1, 2, 1, 150, 200),
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
    (dict(persistent=True, ex2_fma=0.125), 96, False, 200, 333),   # D 96's and 128's default
    # zigzag: the rounds of items dealt forwards and backwards (3 rounds here)
    (dict(persistent="zigzag", consumers=3), 64, True, 450, 450),
    (dict(persistent="zigzag", pingpong=True, overlap=True), 128, True, 200, 333),
    # the diagonal's mask alone: keys past Lk (333, 77, 450: not whole tiles) past it too
    (dict(persistent="zigzag", diagonal_mask=True, ex2_fma=0.375), 64, True, 200, 333),
    (dict(diagonal_mask=True), 64, True, 300, 77),
    (dict(diagonal_mask=True, consumers=1, overlap=True), 128, True, 77, 450),
    (dict(persistent="zigzag", pingpong=True, overlap=True, diagonal_mask=True), 128, True, 333, 200),
    (dict(persistent="zigzag", ex2_fma=0.25), 96, True, 450, 333),   # D 96's (an FMA share: D 128's is 0)
    (dict(persistent="zigzag", pingpong=True, overlap=True, diagonal_mask=True, ex2_fma=0.125), 96, True, 333, 200),
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
    attention_hopper(D, causal, "bhld", ForwardSchedule(**kw)).interpret(q, k, v, o, lse, SCALE)
    ro, rlse = reference.attention_lse(q, k, v, SCALE, causal)
    assert rel_err(o, ro) < 1e-2
    fin = np.isfinite(rlse)
    assert (np.isinf(lse[:, :, 0]) == ~fin).all()
    assert np.abs(lse[:, :, 0][fin] - rlse[fin]).max() < 1e-4


@pytest.mark.parametrize("memory", ["bhld", "blhd"])
@pytest.mark.parametrize("causal,Lq,Lk", [(False, 130, 200), (True, 200, 77)])
def test_head_dim_256(memory, causal, Lq, Lk):
    """tkc.attention's D = 256 kernels on ragged GQA shapes, in SDPA's and
    FlashAttention's memory: the short and the long forward (64-key tiles,
    O by TMA through Q's tile), and the backward that splits its work by
    halves of D (P^T handed between the warpgroups in shared memory, dQ by
    atomic adds, packed as tkc.attention has them: the interpreter checks
    the hand-over for races), and dQ by the pairs."""
    q, k, v, do = _inputs(1, 4, 2, Lq, Lk, 256, seed=Lq)
    for packed in (True, False):
        check(run_fixed(256, causal, memory, q, k, v, do, BackwardSchedule(dq_packed=packed, dkv_tma=True)),
              q, k, v, do, causal)
    view = (lambda x: x) if memory == "bhld" else _blhd
    ro, rlse = reference.attention_lse(q, k, v, SCALE, causal)
    for schedule in forward_space(256, causal, "bhld"):
        o = _empty(q.shape, memory)
        lse = np.full((1, 4, 1, Lq), np.nan, np.float32)
        attention_hopper(256, causal, "bhld", schedule).interpret(view(q), view(k), view(v), o, lse, SCALE)
        assert rel_err(o, ro) < 1e-2
        fin = np.isfinite(rlse)
        assert (np.isinf(lse[:, :, 0]) == ~fin).all()
        assert np.abs(lse[:, :, 0][fin] - rlse[fin]).max() < 1e-4


S = BackwardSchedule
BWD_VARIANTS = [  # (schedule, D, causal, memory order, Lq, Lk)
    (S(overlap=True, dkv_tma=True), 128, True, "bhld", 200, 330),
    (S(BQ=128, overlap=True, dkv_tma=True), 64, False, "blhd", 300, 77),
    (S(BQ=128, stats_acc=True), 64, False, "bhld", 200, 330),
    (S(BQ=128, overlap=True, ds_slots=2, dkv_tma=True), 64, True, "blhd", 200, 330),
    (S(overlap=True, ds_slots=2, dkv_tma=False), 128, True, "blhd", 200, 330),
    (S(BQ=128, overlap=True, ds_slots=2, dkv_tma=False), 64, False, "bhld", 300, 77),
    (S(overlap=True, ds_slots=2, stats_acc=True, dkv_tma=True), 128, True, "bhld", 200, 330),
    (S(BQ=128, overlap=True, ds_slots=2, stats_acc=True, dkv_tma=True), 64, False, "blhd", 77, 300),
    (S(overlap=True, ds_slots=2, stats_acc=True), 128, False, "bhld", 330, 200),
    (S(overlap=True, stats_acc=True, dkv_tma=True), 64, True, "blhd", 300, 77),    # BQ 64 at D 64
]


@pytest.mark.parametrize("schedule,D,causal,layout,Lq,Lk", BWD_VARIANTS)
def test_backward_variants(schedule, D, causal, layout, Lq, Lk):
    """The backward's schedules, the same gradients: overlap (the S^T wait
    leaves dP^T's wgmma in flight, the dP^T wait dV's), ds_slots=2 (dS^T's
    tiles alternate, no barrier before its store), stats_acc (the wgmmas'
    accumulators start at the statistics), BQ 128 or 64 at D = 64 (dQ split
    between the warpgroups by rows or by columns); the interpreter checks
    the in-flight operands for races; dkv_tma (dK and dV through K's and
    V's tiles by TMA, or from registers, clipped)."""
    q, k, v, do = _inputs(1, 4, 2, Lq, Lk, D, seed=Lq + Lk)
    check(run_fixed(D, causal, layout, q, k, v, do, schedule), q, k, v, do, causal)


def _packed(lengths, H, D, rng):
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return cu, round_bf16(rng.standard_normal((cu[-1], H, D)))


@pytest.mark.parametrize("D,causal,schedule", [(64, True, ForwardSchedule()),
                                               (128, False, ForwardSchedule(persistent=True)),
                                               (256, True, ForwardSchedule()),
                                               (96, True, forward_space(96, True, "varlen")[0]),
                                               (96, False, forward_space(96, False, "varlen")[-1]),
                                               (256, False, forward_space(256, False, "varlen")[-1])])
def test_varlen_interpreted(D, causal, schedule):
    """One launch over sequences of 77, 200, 1 and 130 queries (keys 100,
    200, 30, 129): each sequence's rows as its own attention; offsets that
    are not multiples of anything (odd slices of lse and of the gl rows);
    persistent: the forward's blocks loop over the work items; D 256's long
    forward (80-key tiles, overlap and ping-pong). The backward as
    tkc.attention's (dQ's adds packed at D = 256)."""
    rng = np.random.default_rng(D)
    cu_q, q = _packed([77, 200, 1, 130], 4, D, rng)
    cu_k, k = _packed([100, 200, 30, 129], 2, D, rng)
    v, do = round_bf16(rng.standard_normal(k.shape)), round_bf16(rng.standard_normal(q.shape))
    flat = lambda x: x.reshape(len(x), -1)  # noqa: E731
    o = np.full_like(q, np.nan)
    lse = np.full((4, 1, len(q)), np.nan, np.float32)
    fwd = attention_hopper(D, causal, "varlen", schedule)
    fwd.interpret(flat(q), flat(k), flat(v), flat(o), lse, cu_q, cu_k, 200, SCALE)
    stats = np.full((4, 2, stats_columns(len(q), 4)), np.nan, np.float32)
    dq = np.full_like(q, np.nan)                     # the accumulator: prep zeroes it
    attention_prep(D, "varlen").interpret(flat(o), flat(do), lse, stats, flat(dq), cu_q, 200)
    dk, dv = np.full_like(k, np.nan), np.full_like(v, np.nan)
    bwd = backward_space(D, causal, "varlen")[0]
    attention_bwd(D, causal, "varlen", bwd).interpret(
        flat(q), flat(k), flat(v), flat(do), stats, flat(dq), flat(dk), flat(dv), cu_q, cu_k,
        200, SCALE)
    if bwd.dq_packed:
        dq = dq_result(torch.from_numpy(dq), torch.float32, packed=True).numpy()
    for b in range(4):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        t = lambda x, s: x[s].transpose(1, 0, 2)[None]  # noqa: E731
        check((t(o, sq), lse[:, 0, sq][None], t(dq, sq), t(dk, sk), t(dv, sk)),
              t(q, sq), t(k, sk), t(v, sk), t(do, sq), causal)


@pytest.mark.parametrize("D", [64, 256])
def test_varlen_on_strided_views_interpreted(D):
    """The varlen kernels' gls are strided: q from a wider [T, H + 3, D]
    array and k, v split from one [T, 2 Hkv, D] (rows (H + 3) D and 2 Hkv D
    apart) give what contiguous copies give, forward and backward."""
    rng = np.random.default_rng(D + 1)
    cu_q, wide = _packed([77, 200, 1, 130], 7, D, rng)
    cu_k, kv = _packed([100, 200, 30, 129], 4, D, rng)
    q, k = wide[:, :4], kv[:, :2]
    do = round_bf16(rng.standard_normal(q.shape))
    views = [wide.reshape(len(wide), -1)[:, :4 * D], kv.reshape(len(kv), -1)[:, :2 * D],
             kv.reshape(len(kv), -1)[:, 2 * D:]]
    fwd = attention_hopper(D, False, "varlen", forward_space(D, False, "varlen")[-1])
    bwd = attention_bwd(D, False, "varlen", backward_space(D, False, "varlen")[0])
    outs = []
    for args in (views, [np.ascontiguousarray(x) for x in views]):
        o = np.full((len(q), 4 * D), np.nan, np.float32)
        lse = np.full((4, 1, len(q)), np.nan, np.float32)
        fwd.interpret(*args, o, lse, cu_q, cu_k, 200, SCALE)
        stats = np.full((4, 2, stats_columns(len(q), 4)), np.nan, np.float32)
        dq = np.full_like(o, np.nan)
        attention_prep(D, "varlen").interpret(o, do.reshape(len(q), -1), lse, stats, dq, cu_q, 200)
        dk, dv = (np.full((len(k), 2 * D), np.nan, np.float32) for _ in range(2))
        bwd.interpret(*args, do.reshape(len(q), -1), stats, dq, dk, dv, cu_q, cu_k, 200, SCALE)
        outs.append((o, lse, dq, dk, dv))
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


def test_refusals():
    with pytest.raises(TkcError, match="head dim 80 is not supported"):
        attention_hopper(80)
    with pytest.raises(TkcError, match="layout must be one of"):
        attention_bwd(64, layout="bshd")
    with pytest.raises(TkcError, match="BQ must be 64, or 128 at D = 64"):
        attention_bwd(128, schedule=BackwardSchedule(BQ=128))
    for option in ("overlap", "stats_acc"):
        with pytest.raises(TkcError, match=r"overlap, ds_slots and stats_acc schedule the D <= 128 body"):
            attention_bwd(256, schedule=BackwardSchedule(**{option: True}))
    with pytest.raises(TkcError, match=r"dq_packed orders dQ's atomic adds, which only D = 256"):
        attention_bwd(128, schedule=BackwardSchedule(dq_packed=True))
    with pytest.raises(TkcError, match=r"dkv_tma needs a layout other than varlen"):
        attention_bwd(128, layout="varlen", schedule=BackwardSchedule(dkv_tma=True))
    with pytest.raises(TkcError, match=r"o_via_q needs a layout other than varlen"):
        attention_hopper(128, layout="varlen", schedule=ForwardSchedule(o_via_q=True))
    with pytest.raises(TkcError, match=r"diagonal_mask is the causal mask's"):
        attention_hopper(128, schedule=ForwardSchedule(diagonal_mask=True))
    with pytest.raises(TkcError, match=r"schedule must be a BackwardSchedule"):
        attention_bwd(64, schedule=ForwardSchedule())
    kern = attention_hopper(64)
    q = np.zeros((1, 3, 64, 64), np.float32)
    k = np.zeros((1, 2, 64, 64), np.float32)
    with pytest.raises(TkcError, match=r"\(Hq = 3\) must be a multiple of .* \(Hkv = 2\)"):
        kern.interpret(q, k, k, q.copy(), np.zeros((1, 3, 1, 64), np.float32), SCALE)


@pytest.mark.parametrize("schedule, match", [
    (dict(KV=96), r"KV must be 64, 80 \(D 256\), 128 or 192"), (dict(stages=0), "stages must be 'auto' or a count"),
    (dict(stages="deep"), "stages must be 'auto'"), (dict(consumers=4), "consumers must be 1, 2 or 3"),
    (dict(persistent="spiral"), "persistent must be False, True or 'zigzag'"),
    (dict(blocks_per_sm=3), "blocks_per_sm must be 1 or 2"), (dict(ex2_fma=1.5), "ex2_fma is a share"),
    (dict(overlap=1), "overlap must be True or False"),
    (dict(o_via_q=True, persistent=True), "o_via_q needs a kernel that is not persistent")])
def test_forward_schedule_refusals(schedule, match):
    with pytest.raises(ValueError, match=match):
        ForwardSchedule(**schedule)


@pytest.mark.parametrize("schedule, match", [
    (dict(BQ=32), "BQ must be 64 or 128"), (dict(ds_slots=3), "ds_slots must be 1 or 2"),
    (dict(stats_acc="yes"), "stats_acc must be True or False"),
    (dict(dq_packed=True, overlap=True), "dq_packed orders the D = 256 body's"),
    (dict(dq_packed=True, BQ=128), "BQ = 128, overlap, ds_slots and stats_acc schedule the D <= 128 body")])
def test_backward_schedule_refusals(schedule, match):
    with pytest.raises(ValueError, match=match):
        BackwardSchedule(**schedule)


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
    """Five wgmma per query tile, dQ by TMA reduce-add (UTMAREDG) at D = 64,
    by atomic adds (REDG) at D = 256, no wgmma serialisation (tkc.attention's
    kernels)."""
    kern = attention_bwd(64, True, "bhld", backward_space(64, True, "bhld")[0])
    ops, manifest = sass(kern)
    assert ops.get("HGMMA", 0) >= 5 and "HMMA" not in ops, ops
    assert ops.get("UTMAREDG", 0) >= 1 and "REDG" not in ops, ops
    ops, _ = sass(attention_bwd(256, True, "bhld", backward_space(256, True, "bhld")[0]))
    assert ops.get("REDG", 0) + ops.get("RED", 0) >= 1, ops
    assert manifest["resources"]["spill_stores"] <= kern.spills   # its declared allowance
    assert not manifest["resources"].get("wgmma_serialized")
