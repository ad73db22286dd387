"""tkc.attention's decode path (tkc/torchops/attn_decode.py) on the CPU, the
interpreter standing in for the GPU: a KV head's query rows packed into one
tile, the keys split, the splits merged. Values, lse and gradients against
float64; when it applies and when the usual forward runs; the kernels alone
against numpy (splits past the keys' end, one split, ragged tails)."""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")

from helpers import attention_qkv, grads_match, interpreted, rng_of  # noqa: E402
from tkc.diagnostics import TkcError  # noqa: E402
from tkc.kernels import reference  # noqa: E402
from tkc.kernels.attention_hopper import attention_hopper  # noqa: E402
from tkc.kernels.attention_merge import attention_merge_splits  # noqa: E402
from tkc.kernels.attention_schedule import ForwardSchedule  # noqa: E402
from tkc.kernels.attention_tuned import backward_kernels, forward_kernel  # noqa: E402
from tkc.kernels.reference import round_bf16 as bf  # noqa: E402
from tkc.torchops import attn as ops  # noqa: E402
from tkc.torchops import attn_decode as decode  # noqa: E402
from tkc.torchops import plans  # noqa: E402


@pytest.fixture
def launched(monkeypatch):
    """The kernels each forward launched, by path ("decode" or "forward")."""
    plans.forget()
    seen, kernels = [], decode.decode_kernels

    def decode_kernels(D):
        seen.append("decode")
        return tuple(interpreted(k) for k in kernels(D))

    def usual(*key):
        seen.append("forward")
        return interpreted(forward_kernel(*key))
    lengths_kernel = decode.decode_lengths_kernel

    def decode_lengths_kernel(D, merged=False):
        seen.append("lengths")
        return interpreted(lengths_kernel(D, merged))
    monkeypatch.setattr(decode, "decode_kernels", decode_kernels)
    monkeypatch.setattr(decode, "decode_lengths_kernel", decode_lengths_kernel)
    monkeypatch.setattr(decode, "sms", lambda device: 6)
    monkeypatch.setattr(decode, "resident", lambda kernel, device: 1)
    monkeypatch.setattr(ops, "forward_kernel", usual)
    monkeypatch.setattr(ops, "backward_kernels", lambda *key: tuple(interpreted(k) for k in backward_kernels(*key)))
    yield seen
    plans.forget()


def _reference(q, k, v, causal, scale):
    q, k, v = (t.double() for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        lq, lk = s.shape[-2:]
        s = s.masked_fill(torch.arange(lk)[None, :] > torch.arange(lq)[:, None] + (lk - lq), -math.inf)
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def _rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("B,Hq,Hkv,Lq,Lk,D,causal,blhd", [
    (2, 8, 2, 1, 300, 64, True, False),      # a decode step, GQA 4:1, causal (one query: every key)
    (1, 4, 4, 1, 200, 128, False, True),     # MHA, FlashAttention's memory layout
    (1, 6, 2, 5, 333, 64, False, False),     # a few queries a head (15 rows a KV head), ragged Lk
    (3, 2, 1, 1, 37, 64, False, False),      # MQA, fewer keys than one split's minimum
    (1, 8, 2, 4, 1000, 64, True, False),     # causal, 4 queries a head (speculative decoding): split
    (2, 4, 2, 3, 130, 128, True, False),     # causal, three queries, one split: two heads packed
    (1, 4, 2, 3, 700, 64, False, True),      # FlashAttention's layout, several queries: q packed from a copy
    (2, 8, 2, 4, 300, 64, True, True),       # ... causal draft tokens
])
def test_decode_path_values_lse_and_gradients(launched, B, Hq, Hkv, Lq, Lk, D, causal, blhd):
    q, k, v = attention_qkv(B, Hq, Hkv, Lq, Lk, D, blhd)
    o, lse = ops._fwd(q, k, v, causal, 0.125)
    assert launched == ["decode"]
    want, want_lse = _reference(q, k, v, causal, 0.125)
    assert o.shape == q.shape   # in q's memory order (at Lq = 1 SDPA's and FlashAttention's alike)
    assert o.transpose(1, 2).is_contiguous() if blhd and Lq > 1 else o.is_contiguous()
    assert _rel(o, want) < 1e-2
    torch.testing.assert_close(lse.double(), want_lse, rtol=1e-5, atol=1e-5)
    assert grads_match(o, want, torch.randn_like(o), (q, k, v), 2e-2)


def test_causal_queries_before_the_first_key(launched):
    """Causal with more queries than keys: queries i < Lq - Lk see no key,
    o = 0 and lse = +inf (the usual forward's convention)."""
    q, k, v = (t.detach() for t in attention_qkv(1, 4, 2, 5, 3, 64))
    o, lse = ops._fwd(q, k, v, True, 0.125)
    assert launched == ["decode"]
    assert (o[:, :, :2] == 0).all() and torch.isposinf(lse[:, :, :2]).all()
    want, want_lse = _reference(q, k, v, True, 0.125)
    assert _rel(o[:, :, 2:], want[:, :, 2:]) < 1e-2
    torch.testing.assert_close(lse[:, :, 2:].double(), want_lse[:, :, 2:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("Hq,Hkv,Lq,causal,blhd", [
    (4, 1, 17, False, False),    # 68 rows a KV head: more than one tile
    (4, 1, 17, True, False),     # causal likewise
    (2, 2, 3, True, False),      # causal, one head a tile, one split: nothing to pack or split
])
def test_the_usual_forward_where_packing_does_not_apply(launched, Hq, Hkv, Lq, causal, blhd):
    q, k, v = attention_qkv(1, Hq, Hkv, Lq, 70, 64, blhd)
    with torch.no_grad():
        o = ops._fwd(q, k, v, causal, 0.125)[0]
    assert launched[-1:] == ["forward"]   # (the decode path may look its kernels up to count splits first)
    assert _rel(o, _reference(q, k, v, causal, 0.125)[0]) < 1e-2


def test_splits_make_the_fewest_rounds_times_tiles(monkeypatch):
    monkeypatch.setattr(decode, "sms", lambda device: 132)
    monkeypatch.setattr(decode, "resident", lambda kernel, device: 1)
    assert decode.splits(8, 32768, 128, None, None) == 16      # 8 KV heads: 128 blocks, one round
    assert decode.splits(64, 8192, 128, None, None) == 2       # 128 blocks (3 would take two rounds)
    assert decode.splits(32, 16384, 128, None, None) == 4      # not 5: 160 blocks are two rounds
    assert decode.splits(8, 512, 128, None, None) == 2         # no split under two KV tiles
    assert decode.splits(8, 100, 128, None, None) == 1
    assert decode.splits(256, 32768, 128, None, None) == 1     # two rounds either way: no split
    monkeypatch.setattr(decode, "resident", lambda kernel, device: 2)
    assert decode.splits(64, 8192, 128, None, None) == 4       # two blocks an SM: 264 a round


def _masked_lse(q, k, v, scale, seen):
    """numpy (o, lse) with seen[i, j]: whether row i sees key j (none: o = 0, lse = +inf)."""
    s = np.where(seen, q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) * scale, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    l = p.sum(-1, keepdims=True)
    return p @ v / np.where(l == 0, 1.0, l), np.where(l[..., 0] == 0, np.inf, np.log(np.where(l == 0, 1.0, l))[..., 0] + m[..., 0])


@pytest.fixture
def six_sms(monkeypatch, tmp_path):
    """Six SMs holding a block each, an empty artifact cache and no table but this test's."""
    from tkc.tune import tables
    monkeypatch.setattr(decode, "sms", lambda device: 6)
    monkeypatch.setattr(decode, "resident", lambda kernel, device: 1)
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TKC_DEVICE_NAME", "Test GPU")
    monkeypatch.setattr(tables, "PACKAGE_DIR", tmp_path / "package-tables")
    for t in decode.SPLITS.values():
        t.forget()
    yield
    for t in decode.SPLITS.values():
        t.forget()


def test_split_count_spaces_keys_and_the_models_fallback(six_sms):
    """One space per head dim over the split count (0: the model's), keyed by
    D, the packed row tiles and the KV tiles (powers of two) and the SMs; a
    key's candidates split no finer than its KV tiles, into at most four
    rounds of blocks; a key no table holds takes the model's count."""
    t = decode.SPLITS[64]
    assert t.name == "tkc.attention.decode.splits.d64" and t.default == {"splits": 0}
    qp, k = np.zeros((3, 2, 5, 64), np.float32), np.zeros((3, 2, 1000, 64), np.float32)
    key = t.key([qp, k])
    assert key == (64, 8, 8, 6)                    # 6 row tiles, 8 KV tiles of 128, 6 SMs
    assert [c["splits"] for c in t.candidates(key)] == [0, 1, 2, 3]   # 8 x 3 blocks: four rounds
    assert decode._count(64, 6, 1000, None, None) == decode.splits(6, 1000, 128, None, None) == 1
    assert decode._count(64, 2, 1000, None, None) == decode.splits(2, 1000, 128, None, None) == 3


def test_split_count_tuned_end_to_end(six_sms):
    """Tuning runs each count's split and merge (the interpreter here), checks
    its output against the model's count, keeps the fastest and records it;
    calls of that key then split as tuned (no finer than their KV tiles)."""
    rng = np.random.default_rng(5)
    qp = bf(rng.standard_normal((1, 2, 4, 64))).astype(np.float32)
    k, v = (bf(rng.standard_normal((1, 2, 300, 64))).astype(np.float32) for _ in "kv")
    args = [qp, k, v, np.zeros_like(qp), np.zeros((1, 2, 1, 4), np.float32), 0, 0.125]
    us = {0: 5.0, 1: 4.0, 2: 3.0, 3: 2.0, 4: 1.0}

    def run(kernel, args):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        kernel.interpret(*copies)
        return copies[3:5]

    def close(ref, out):
        return None if all(np.allclose(r, o, atol=2e-2) for r, o in zip(ref, out)) else "differs"
    result = decode.SPLITS[64].tune(*args, timer=lambda kernel, a: us[kernel.count], run=run, compare=close,
                                    rounds=1)
    assert result.best == {"splits": 4}
    assert all(r["status"] in ("ok", "best") for r in result.rows)   # every count agreed with the model's
    want_o, want_l = reference.attention_lse(qp, k, v, 0.125)
    got = run(decode.SPLITS[64].kernel(result.best), args)
    np.testing.assert_allclose(got[0], want_o, atol=2e-2)
    np.testing.assert_allclose(got[1][:, :, 0], want_l, rtol=1e-5, atol=1e-5)
    decode.SPLITS[64].forget()   # read back from the table it was recorded in
    assert decode._count(64, 2, 500, None, None) == 4
    assert decode._count(64, 2, 300, None, None) == 3   # the same key, three KV tiles: no finer


def test_split_counts_are_the_h200s_tuned_data(monkeypatch, tmp_path):
    """The package's H200 table: a decode step of 8 KV heads over 1024 keys
    (8 KV tiles) splits 8 ways (tuned: 6.4 µs, the model's 4 splits 7.4), over
    8192 keys 16 (the model's count, tuned too); a GPU of other SMs misses
    the table and takes the model's count."""
    from tkc.tune import tables
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TKC_DEVICE_NAME", raising=False)
    monkeypatch.setattr(tables, "device_name", lambda: tables.REFERENCE_GPU)
    monkeypatch.setattr(decode, "resident", lambda kernel, device: 1)
    for t in decode.SPLITS.values():
        t.forget()
    monkeypatch.setattr(decode, "sms", lambda device: 132)
    assert decode.splits(8, 1024, 128, None, None) == 4
    assert decode._count(128, 8, 1024, None, None) == 8
    assert decode._count(128, 8, 8192, None, None) == 16
    for t in decode.SPLITS.values():
        t.forget()
    monkeypatch.setattr(decode, "sms", lambda device: 114)
    assert decode._count(128, 8, 1024, None, None) == decode.splits(8, 1024, 128, None, None) == 4
    for t in decode.SPLITS.values():
        t.forget()


@pytest.mark.parametrize("S,Lk,R,D,persistent,P", [
    (3, 300, 3, 64, False, 0), (8, 300, 4, 64, True, 0), (1, 130, 16, 128, False, 0), (5, 64, 1, 64, True, 0),
    (4, 200, 40, 64, False, 40),   # causal over 40 queries: the last split (8 keys) unseen by rows < 32
    (2, 150, 12, 128, True, 3),    # 4 heads of 3 queries packed (row r is query r mod 3), causal
    (3, 200, 80, 64, False, 0),    # two query tiles (80 rows): a counter and a merge each
])
@pytest.mark.parametrize("merged", [False, True])
def test_split_kernel_and_merge_against_numpy(request, S, Lk, R, D, persistent, P, merged):
    """Split s reads keys s * chunk .. (chunk = Lk / S in whole 64-key tiles);
    splits past the end see no key (lse +inf) and weigh nothing. causal_q =
    P > 0: row r is query r mod P, seeing key j iff j <= r mod P + Lk - P.
    The merge kernel merges the splits; merged, the tile's last split merges
    them into out and lout itself and zeroes its counter again."""
    rng = rng_of(request)
    B, H = 2, 2
    q = bf(rng.standard_normal((B, H, R, D))).astype(np.float32)
    k, v = (bf(rng.standard_normal((B, H, Lk, D))).astype(np.float32) for _ in "kv")
    op = np.full((B, H, S * R, D), np.nan, np.float32)
    lp = np.full((B, H, 1, S * R), np.nan, np.float32)
    o = np.full((B, H, R, D), np.nan, np.float32)
    lo = np.full((B, H, 1, R), np.nan, np.float32)
    count = np.zeros((1, B, H, -(-R // 64)), np.int32)
    schedule = ForwardSchedule(KV=64, consumers=1, persistent=persistent)
    kernel = attention_hopper(D, False, "split", schedule, merged=merged)
    if merged:
        kernel.interpret(q, k, v, op, lp, o, lo, count, S, P, 0.2)
    else:
        kernel.interpret(q, k, v, op, lp, S, P, 0.2)
        attention_merge_splits(D).interpret(op, lp, o, lo)
    seen = np.arange(Lk)[None, :] <= (np.arange(R) % P + Lk - P if P else np.full(R, Lk))[:, None]
    chunk = -(-(-(-Lk // S)) // 64) * 64
    for s in range(S):
        rows = slice(s * R, s * R + R)
        keys = slice(min(s * chunk, Lk), min(s * chunk + chunk, Lk))
        if keys.start == keys.stop:
            assert (op[:, :, rows] == 0).all() and np.isposinf(lp[:, :, 0, rows]).all()
            continue
        want_o, want_l = _masked_lse(q, k[:, :, keys], v[:, :, keys], 0.2, seen[:, keys])
        np.testing.assert_allclose(op[:, :, rows], want_o, atol=2e-2)
        np.testing.assert_allclose(lp[:, :, 0, rows], want_l, rtol=1e-5, atol=1e-5)
    if P == 40:
        assert np.isposinf(lp[:, :, 0, 3 * R:3 * R + 32]).all()   # (the case the comment above names)
    want_o, want_l = _masked_lse(q, k, v, 0.2, seen)
    np.testing.assert_allclose(o, want_o, atol=2e-2)
    np.testing.assert_allclose(lo[:, :, 0], want_l, rtol=1e-5, atol=1e-5)
    assert (count == 0).all()


def test_split_kernel_counts_on_its_tiles_counters():
    """A counter that is not zero before the launch (another launch using it
    at once: the reason each stream has its own) makes no block the last, so
    nothing is merged and the count is left raised; the torch op's buffers
    and counters (zeros) are kept per device (and stream)."""
    rng = np.random.default_rng(3)
    q = bf(rng.standard_normal((1, 1, 4, 64))).astype(np.float32)
    k = bf(rng.standard_normal((1, 1, 300, 64))).astype(np.float32)
    op, lp = np.zeros((1, 1, 3 * 4, 64), np.float32), np.zeros((1, 1, 1, 3 * 4), np.float32)
    o, lo = np.full((1, 1, 4, 64), np.nan, np.float32), np.full((1, 1, 1, 4), np.nan, np.float32)
    count = np.full((1, 1, 1, 1), 5, np.int32)
    attention_hopper(64, False, "split", ForwardSchedule(KV=64, consumers=1), merged=True).interpret(
        q, k, k, op, lp, o, lo, count, 3, 0, 0.2)
    assert np.isnan(o).all() and count[0, 0, 0, 0] == 8
    cpu = torch.device("cpu")
    part, small = plans.stream_buffers(cpu, 100, 10)
    assert part.dtype == torch.float32 and part.numel() >= 100 and small.numel() >= 10
    part2, big = plans.stream_buffers(cpu, 10, 5000)
    assert part2 is part and big.dtype == torch.int32 and big.numel() >= 5000 and not big.any()
    assert plans.stream_buffers(cpu, 5, 5)[1] is big


@pytest.mark.parametrize("D", [64, 128])
def test_merge_of_rows_with_no_key_anywhere(request, D):
    """Every split +inf: o = 0 and lse +inf (the op's convention), no NaN; a
    row with keys gets the splits' lse-weighted mean."""
    op = np.zeros((1, 1, 3 * 2, D), np.float32)
    lp = np.full((1, 1, 1, 3 * 2), np.inf, np.float32)
    lp[0, 0, 0, 1::2] = [0.5, -1.0, 2.0]          # row 1 has keys in every split
    op[0, 0, 1::2] = rng_of(request).standard_normal((3, D))
    o, lo = np.full((1, 1, 2, D), np.nan, np.float32), np.full((1, 1, 1, 2), np.nan, np.float32)
    attention_merge_splits(D).interpret(op, lp, o, lo)
    assert (o[0, 0, 0] == 0).all() and np.isposinf(lo[0, 0, 0, 0])
    w = np.exp(np.array([0.5, -1.0, 2.0]) - 2.0)
    np.testing.assert_allclose(o[0, 0, 1], bf(w @ op[0, 0, 1::2] / w.sum()), atol=1e-2)
    np.testing.assert_allclose(lo[0, 0, 0, 1], 2.0 + np.log(w.sum()), rtol=1e-6)


def test_the_split_layout_refuses_what_it_cannot_build():
    with pytest.raises(TkcError, match="split-KV forward is bf16, not causal"):
        attention_hopper(64, True, "split", ForwardSchedule(consumers=1))
    with pytest.raises(TkcError, match="split-KV forward"):
        attention_hopper(64, False, "split", ForwardSchedule(consumers=1, o_via_q=True))
    with pytest.raises(TkcError, match="merged splits are the split-KV forward's"):
        attention_hopper(64, False, "bhld", ForwardSchedule(consumers=1), merged=True)
    with pytest.raises(TkcError, match="multiple of 32"):
        attention_merge_splits(48)


def _masked_reference(q, k, v, lens, causal, scale):
    """Per batch: attention over its first lens[b] keys (clamped to 0 .. Lk;
    none: o = 0, lse = +inf)."""
    outs, lses = [], []
    for b in range(q.shape[0]):
        n = min(max(int(lens[b]), 0), k.shape[2])
        if n == 0:
            outs.append(torch.zeros_like(q[b:b + 1], dtype=torch.float64))
            lses.append(torch.full(q.shape[1:3], math.inf, dtype=torch.float64)[None])
            continue
        o, lse = _reference(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n], causal, scale)
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


@pytest.mark.parametrize("Hq,Hkv,Lq,D,causal,blhd", [
    (8, 2, 1, 64, True, False),     # a decode step, GQA 4:1 (causal at one query: every filled key)
    (6, 2, 3, 64, False, False),    # three queries a head
    (8, 2, 3, 64, True, False),     # three draft tokens a head, causal: query i at lens - 3 + i
    (4, 4, 1, 128, False, True),    # MHA in FlashAttention's layout
    (8, 2, 4, 64, True, True),      # draft tokens in FlashAttention's layout: q packed from a copy
])
def test_k_lengths_attend_to_each_batchs_filled_keys(launched, on_cuda, Hq, Hkv, Lq, D, causal, blhd):
    q, k, v = (t.detach() for t in attention_qkv(4, Hq, Hkv, Lq, 300, D, blhd))
    lens = torch.tensor([300, 0, 77, 1000], dtype=torch.int32)   # full, empty, part, past the end
    o, lse = ops._with_lengths(q, k, v, lens, causal, 0.125, True)
    assert launched == ["lengths", "decode", "lengths"]   # the split, the merge, the merging split
    want, want_lse = _masked_reference(q, k, v, lens, causal, 0.125)
    assert o.shape == q.shape and _rel(o, want) < 1e-2
    assert (o[1] == 0).all() and torch.isposinf(lse[1]).all()
    torch.testing.assert_close(lse.double(), want_lse, rtol=1e-5, atol=1e-5)


def test_k_lengths_causal_with_fewer_filled_keys_than_queries(launched, on_cuda):
    """lens[b] = 2 against 3 queries: query i sits at 2 - 3 + i, so query 0
    sees no key (o = 0, lse = +inf), query 1 key 0, query 2 keys 0 and 1."""
    q, k, v = (t.detach() for t in attention_qkv(1, 4, 2, 3, 300, 64))
    o, lse = ops._with_lengths(q, k, v, torch.tensor([2], dtype=torch.int32), True, 0.125, True)
    assert (o[:, :, 0] == 0).all() and torch.isposinf(lse[:, :, 0]).all()
    for i in (1, 2):
        want, want_lse = _reference(q[:, :, i:i + 1], k[:, :, :i], v[:, :, :i], False, 0.125)
        assert _rel(o[:, :, i:i + 1], want) < 1e-2
        torch.testing.assert_close(lse[:, :, i:i + 1].double(), want_lse, rtol=1e-5, atol=1e-5)


def test_k_lengths_opcheck(launched):
    """Schema, fake tensors and AOT dispatch of the inference op agree with its implementation."""
    q, k, v = (t.detach() for t in attention_qkv(2, 4, 2, 1, 70, 64))
    torch.library.opcheck(ops._len.custom_op, (q, k, v, torch.tensor([70, 5], dtype=torch.int32), False, 0.125))
    q, k, v = (t.detach() for t in attention_qkv(2, 4, 2, 3, 70, 64))
    torch.library.opcheck(ops._len.custom_op, (q, k, v, torch.tensor([70, 5], dtype=torch.int32), True, 0.125))


def _refused(match, q, k, v, **kw):
    with pytest.raises(TkcError, match=match) as e:
        ops._with_lengths(q, k, v, kw.pop("lens"), kw.pop("causal", False), None, False)
    return e


@pytest.fixture
def on_cuda(monkeypatch):
    """The device check passes for CPU tensors (the refusals below are about the rest)."""
    monkeypatch.setattr(ops, "check_device", lambda *a: None)


def test_k_lengths_refusals(on_cuda):
    q, k, v = (t.detach() for t in attention_qkv(2, 8, 2, 1, 64, 64))
    ok = torch.tensor([3, 4], dtype=torch.int32)
    e = _refused("int32 tensor \\[B\\] = \\[2\\]", q, k, v, lens=ok.long())
    assert "test_attention_decode.py" in e.value.where   # at the caller's line
    _refused("int32 tensor", q, k, v, lens=torch.tensor([3], dtype=torch.int32))
    _refused("int32 tensor", q, k, v, lens=[3, 4])
    _refused("no gradient", q.requires_grad_(), k, v, lens=ok)
    q = q.detach()
    _refused("up to 64 query rows a KV head", *(t.detach() for t in attention_qkv(2, 8, 1, 9, 64, 64)), lens=ok)


def test_build_call_with_k_lengths_builds_its_forward_alone(tmp_path, monkeypatch):
    """`tkc build --call` (the command an offline miss names) makes a
    k_lengths call without gradients only (it has no backward): the split
    kernel with lengths, the merge, and the split kernel with lengths that
    merges its splits (the captured and the eager call's)."""
    from tkc import cli
    from tkc.cli import build_all, main
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    built = []
    monkeypatch.setattr(cli, "build_all", lambda kernels, *a: built.extend(kernels) or build_all(kernels, *a))
    call = "attention(bf16[1, 8, 1, 64], bf16[1, 2, 256, 64], bf16[1, 2, 256, 64], k_lengths=i32([100]))"
    for _ in range(2):   # the second time, kernels this process loaded already: listed all the same
        built.clear()
        assert main(["build", "--call", call]) == 0
        assert sorted(k.name for k in built) == ["attn_fwd_d64_split_kv128_c1_lengths",
                                                 "attn_fwd_d64_split_kv128_c1_lengths_merged", "attn_split_merge_d64"]


def test_k_lengths_in_an_autocast_region(launched, on_cuda, monkeypatch):
    """float32 q, k, v in a bf16 autocast region are cast, as tkc.attention's other calls."""
    from tkc.torchops import checks
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")   # the region's device: the CPU here
    q, k, v = (t.detach() for t in attention_qkv(2, 8, 2, 1, 100, 64))
    lens = torch.tensor([100, 40], dtype=torch.int32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        o = ops._with_lengths(q.float(), k.float(), v.float(), lens, False, 0.125, False)
    assert o.dtype == torch.bfloat16
    assert _rel(o, _masked_reference(q, k, v, lens, False, 0.125)[0]) < 1e-2


@pytest.fixture
def cpu_ops(monkeypatch):
    """tkc.nn's drop-ins take CPU tensors as the GPU's (the interpreter runs the kernels)."""
    from tkc.torchops import checks
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")


def test_sdpa_drop_in_top_left_causal_over_more_keys(launched, cpu_ops):
    """SDPA's is_causal with fewer queries than keys is aligned top-left:
    query i sees keys 0..i. tkc.nn serves it as tkc.attention's bottom-right
    mask over the first Lq keys (it fell back to PyTorch before)."""
    import tkc.nn
    q, k, v = (t.detach() for t in attention_qkv(1, 4, 2, 20, 70, 64))
    o = tkc.nn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert launched   # tkc's kernels, not PyTorch's
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True,
                                                            enable_gqa=True)
    assert _rel(o, want) < 1e-2


def _prompt_then_step(ref, mine, n: int, launched):
    """A prompt of n tokens (the usual forward), then one token against its
    cache (the decode path): mine's logits are ref's; the prompt's ids."""
    ids, step = torch.randint(0, 64, (1, n)), torch.randint(0, 64, (1, 1))
    with torch.no_grad():
        a, b = ref(ids, use_cache=True), mine(ids, use_cache=True)
        assert launched == ["forward"] and _rel(b.logits, a.logits) < 2e-2
        a2, b2 = ref(step, past_key_values=a.past_key_values), mine(step, past_key_values=b.past_key_values)
        assert launched[-1] == "decode" and _rel(b2.logits, a2.logits) < 2e-2
    return ids


def test_transformers_attn_implementation(launched, cpu_ops):
    """attn_implementation="tkc" (tkc.nn.register_transformers) in a tiny
    Llama (GQA 2:1, D 64): the prompt's forward (no mask: causal) and a decode
    step against its cache run tkc.attention and match the same model on
    SDPA; a padded batch (transformers passes a mask) runs SDPA."""
    transformers = pytest.importorskip("transformers")
    import copy

    import tkc.nn
    assert tkc.nn.register_transformers() == "tkc"
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=256, intermediate_size=256, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                   max_position_embeddings=64, attn_implementation="sdpa")
    torch.manual_seed(0)
    ref = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    mine = copy.deepcopy(ref)
    mine.set_attn_implementation("tkc")
    ids = _prompt_then_step(ref, mine, 40, launched)   # 80 rows a KV head: the usual forward
    with torch.no_grad():
        launched.clear()
        pad = torch.ones(2, 40, dtype=torch.long)
        pad[0, :3] = 0   # left padding: a mask transformers must pass
        a3, b3 = ref(ids.repeat(2, 1), attention_mask=pad), mine(ids.repeat(2, 1), attention_mask=pad)
        assert launched == [] and torch.equal(a3.logits, b3.logits)


def test_a_phi3_model(launched, cpu_ops):
    """A tiny Phi-3 (head dim 96; gate and up in one weight): tkc.nn.convert
    takes its attention and its MLP (tkc.swiglu: test_swiglu.py); on tkc's
    attention a prompt, then a decode step, give the logits the model on SDPA
    gives."""
    transformers = pytest.importorskip("transformers")
    import copy

    import tkc.nn
    cfg = transformers.Phi3Config(vocab_size=64, hidden_size=192, intermediate_size=256, num_hidden_layers=1,
                                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
                                  pad_token_id=0, eos_token_id=1, bos_token_id=2, attn_implementation="sdpa")
    torch.manual_seed(1)
    ref = transformers.Phi3ForCausalLM(cfg).to(torch.bfloat16).eval()
    converted = tkc.nn.convert(copy.deepcopy(ref))
    assert {"attention", "model.layers.0.mlp"} <= set(converted.tkc_converted)
    mine = copy.deepcopy(ref)
    mine.set_attn_implementation(tkc.nn.register_transformers())
    _prompt_then_step(ref, mine, 70, launched)   # 70 rows a KV head: the usual forward


def test_convert_sets_a_transformers_models_attention():
    """tkc.nn.convert takes a transformers model on SDPA to attn_implementation
    "tkc" (converting again keeps it), and keeps another implementation with
    the reason."""
    transformers = pytest.importorskip("transformers")
    import tkc.nn
    cfg = dict(vocab_size=64, hidden_size=256, intermediate_size=256, num_hidden_layers=1, num_attention_heads=4,
               num_key_value_heads=2, head_dim=64)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg, attn_implementation="sdpa"))
    tkc.nn.convert(model)
    assert model.config._attn_implementation == "tkc" and "attention" in model.tkc_converted
    tkc.nn.convert(model)
    assert model.config._attn_implementation == "tkc" and "attention" in model.tkc_converted
    eager = tkc.nn.convert(transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg, attn_implementation="eager")))
    assert eager.config._attn_implementation == "eager" and "'eager' kept" in eager.tkc_skipped["attention"]



def test_a_growing_cache_prepares_its_launches_once(monkeypatch):
    """A decode step over a cache one key longer each call (transformers'
    DynamicCache) finds its launches prepared: the split kernels' once per
    split count (k and v free: their key count and strides read per launch),
    the merge's once; an eager step is one launch (the split kernel that
    merges its splits; fake driver: the host work, stub launches)."""
    from tkc.bench.fake_driver import fake_driver
    from tkc.kernels.attention_tuned import decode_kernels
    split, merge, _, fused = decode_kernels(128)
    prepared, real = [], type(split).prepare
    monkeypatch.setattr(type(split), "prepare",
                        lambda self, *a, **k: (prepared.append(self.name), real(self, *a, **k))[1])
    plans.forget()
    q = torch.randn(1, 32, 1, 128).bfloat16()
    kc = torch.randn(1, 8, 1024, 128).bfloat16()
    with fake_driver() as fake, torch.no_grad():
        for n in range(600, 640):
            ops.attention(q, kc[:, :, :n], kc[:, :, :n])
        k = kc[:, :, :600].contiguous()
        launches = fake.state.launches
        for n in range(601, 620):   # new memory each step, its strides too
            k = torch.cat([k, kc[:, :, n - 1:n]], 2)
            ops.attention(q, k, k)
        assert fake.state.launches - launches == 19   # one a step
    assert sorted(prepared) == sorted([split.name, merge.name, fused.name])
    plans.forget()


@pytest.mark.parametrize("Hq,Hkv,Lq,causal,blhd", [
    (8, 2, 1, False, False),    # a decode step, GQA 4:1
    (4, 2, 3, True, False),     # three causal draft tokens a step
    (4, 2, 3, False, True),     # FlashAttention's memory: q packed from a copy
])
def test_a_growing_cache_step_by_step(launched, monkeypatch, Hq, Hkv, Lq, causal, blhd):
    """Steps over a cache grown by concatenation (new memory and strides at
    every step), across split counts (the six SMs' model: 1 to 4): each
    step's values against float64, through one family of launches."""
    monkeypatch.setattr(ops.checks, "DEVICE_TYPE", "cpu")   # tkc.attention itself, on the interpreter
    q, k, v = (t.detach() for t in attention_qkv(1, Hq, Hkv, Lq, 420, 64, blhd))
    kc, vc = k[:, :, :100].contiguous(), v[:, :, :100].contiguous()
    with torch.no_grad():
        for n in range(100 + Lq, 421, 40 * Lq):
            kc, vc = torch.cat([kc, k[:, :, kc.shape[2]:n]], 2), torch.cat([vc, v[:, :, vc.shape[2]:n]], 2)
            o = ops.attention(q, kc, vc, causal=causal, scale=0.125)
            assert _rel(o, _reference(q, kc, vc, causal, 0.125)[0]) < 1e-2
    assert launched == ["decode"]   # one family: its kernels looked up once


def test_a_family_step_leaves_what_it_cannot_take_to_the_checks(launched, monkeypatch):
    """A growing cache's step skips the checks its family's key fixes; what
    it does not fix goes the full way: k and v of different lengths get the
    checks' error at the caller's line, a cache whose rows are not 16-byte
    steps apart (strided_takes) is copied and still right, and an empty one
    gives the full path's answer."""
    monkeypatch.setattr(ops.checks, "DEVICE_TYPE", "cpu")
    q, k, v = (t.detach() for t in attention_qkv(1, 8, 2, 1, 300, 64, False))
    with torch.no_grad():
        for n in (150, 151):   # the family's first step, then one at a new key count
            o = ops.attention(q, k[:, :, :n], v[:, :, :n], scale=0.125)
            assert _rel(o, _reference(q, k[:, :, :n], v[:, :, :n], False, 0.125)[0]) < 1e-2
        with pytest.raises(TkcError, match="k and v must have one shape") as info:
            line = sys._getframe().f_lineno + 1
            ops.attention(q, k[:, :, :152], v[:, :, :153], scale=0.125)
        assert info.value.where.endswith(f"{__file__}:{line}")
        wide = torch.zeros(1, 2, 300, 68, dtype=k.dtype)   # rows of 68 elements: 136 bytes apart
        wide[..., :64] = k
        ks = wide[:, :, :160, :64]
        assert not ops.checks.strided_takes(ks)
        o = ops.attention(q, ks, v[:, :, :160], scale=0.125)
        assert _rel(o, _reference(q, k[:, :, :160], v[:, :, :160], False, 0.125)[0]) < 1e-2
        o = ops.attention(q, k[:, :, :0], v[:, :, :0], scale=0.125)
        assert o.shape == q.shape and not o.abs().max()
