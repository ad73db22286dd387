"""tkc.attention's picks as autotuned spaces and shipped tables
(tkc/kernels/attention_tuned.py, attention_schedule.py, tkc/tune/tables), on
the CPU: the kernels picked through the shipped tables are those the hand
tables picked before they became data (pinned below, by name: the names spell
every schedule field out); each space holds exactly what its tables pick;
keys from a call's arguments; tuning a space with the interpreter and a fake
timer; the library's attention kernels."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from tkc.kernels import attention_tuned as tuned
from tkc.kernels.attention_schedule import BUCKETS, backward_space, forward_space, key_bucket
from tkc.tune import tables

H100 = "NVIDIA H100 80GB HBM3"   # the name the lent H100 reported (tables.py: its slug names the file)

# What the old code (tkc/kernels/attention_picks.py at 7f6b471, hand tables
# measured on the H100) picked at these key counts, per (D, causal, layout):
# (keys from which, forward, backward), each row holding up to the next.
# Computed once with that code (its "blhd" kernels, picked as the bhld ones, are the
# strided bhld kernels since); the prep kernel was attn_prep_d<D>_<layout>. The
# changes since, measured on the H200 with the H100's rows following
# (attention_schedule.forward_space): D 128 without the mask below 2048 keys
# (bhld) ping-ponged, then ran the plain loop with an eighth of the
# exponentials on the FMA pipe; D 256's long forward takes 80-key tiles.
KEYS = (1, 64, 511, 512, 513, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8193,
        16384, 65535, 65536, 65537, 100000)
OLD_PICKS = {
    (64, False, "bhld"): [
        (1, "attn_fwd_d64_bhld_kv128_s2_c3_persistent",
         "attn_bwd_d64_bhld_q128_overlap_ds2_sacc"),
        (2048, "attn_fwd_d64_bhld_kv128_s2_c3_persistent",
         "attn_bwd_d64_bhld_q128_overlap_ds2_dkvreg_sacc"),
        (8192, "attn_fwd_d64_bhld_kv128_s2_overlap_pingpong_c3",
         "attn_bwd_d64_bhld_q128_overlap_ds2_dkvreg_sacc"),
    ],
    (64, False, "varlen"): [
        (1, "attn_fwd_d64_varlen_kv128_s2_c3",
         "attn_bwd_d64_varlen_q128_overlap_sacc"),
        (8192, "attn_fwd_d64_varlen_kv128_s2_overlap_pingpong_c3",
         "attn_bwd_d64_varlen_q128_overlap_sacc"),
    ],
    (64, True, "bhld"): [
        (1, "attn_fwd_d64_causal_bhld_kv128_s2_zigzag_fma38_diag",
         "attn_bwd_d64_causal_bhld_q128_overlap_ds2_sacc"),
        (8192, "attn_fwd_d64_causal_bhld_kv128_s2_overlap_pingpong_c3",
         "attn_bwd_d64_causal_bhld_q128_overlap_ds2_sacc"),
    ],
    (64, True, "varlen"): [
        (1, "attn_fwd_d64_causal_varlen_kv128_s2_c1_b2",
         "attn_bwd_d64_causal_varlen_q128_overlap_sacc"),
        (8192, "attn_fwd_d64_causal_varlen_kv128_s2_overlap_pingpong_c3",
         "attn_bwd_d64_causal_varlen_q128_overlap_sacc"),
    ],
    (128, False, "bhld"): [
        (1, "attn_fwd_d128_bhld_kv128_persistent_fma12",
         "attn_bwd_d128_bhld_overlap_ds2_sacc"),
        (2048, "attn_fwd_d128_bhld_kv128_overlap_pingpong_persistent",
         "attn_bwd_d128_bhld_overlap_ds2_sacc"),
    ],
    (128, False, "varlen"): [
        (1, "attn_fwd_d128_varlen_kv128",
         "attn_bwd_d128_varlen_overlap_sacc"),
        (2048, "attn_fwd_d128_varlen_kv128_overlap_pingpong",
         "attn_bwd_d128_varlen_overlap_sacc"),
    ],
    (128, True, "bhld"): [
        (1, "attn_fwd_d128_causal_bhld_kv128_zigzag",
         "attn_bwd_d128_causal_bhld_overlap_ds2_sacc"),
        (2048, "attn_fwd_d128_causal_bhld_kv128_overlap_pingpong_zigzag_diag",
         "attn_bwd_d128_causal_bhld_overlap_ds2_sacc"),
        (8192, "attn_fwd_d128_causal_bhld_kv128_overlap_pingpong",
         "attn_bwd_d128_causal_bhld_overlap_ds2_sacc"),
    ],
    (128, True, "varlen"): [
        (1, "attn_fwd_d128_causal_varlen_kv64_s2_c1_b2",
         "attn_bwd_d128_causal_varlen_overlap_sacc"),
        (2048, "attn_fwd_d128_causal_varlen_kv128_overlap_pingpong",
         "attn_bwd_d128_causal_varlen_overlap_sacc"),
    ],
    (256, False, "bhld"): [
        (1, "attn_fwd_d256_bhld_kv64_s2_oq",
         "attn_bwd_d256_bhld_dqatomic_dqpk"),
        (1024, "attn_fwd_d256_bhld_kv80_s2_overlap_pingpong_oq",
         "attn_bwd_d256_bhld_dqatomic_dqpk"),
    ],
    (256, False, "varlen"): [
        (1, "attn_fwd_d256_varlen_kv64_s2",
         "attn_bwd_d256_varlen_dqatomic_dqpk"),
        (1024, "attn_fwd_d256_varlen_kv80_s2_overlap_pingpong",
         "attn_bwd_d256_varlen_dqatomic_dqpk"),
    ],
    (256, True, "bhld"): [
        (1, "attn_fwd_d256_causal_bhld_kv64_s2_oq",
         "attn_bwd_d256_causal_bhld_dqatomic_dqpk"),
        (2048, "attn_fwd_d256_causal_bhld_kv80_s2_overlap_pingpong_oq",
         "attn_bwd_d256_causal_bhld_dqatomic_dqpk"),
    ],
    (256, True, "varlen"): [
        (1, "attn_fwd_d256_causal_varlen_kv64_s2",
         "attn_bwd_d256_causal_varlen_dqatomic_dqpk"),
        (2048, "attn_fwd_d256_causal_varlen_kv80_s2_overlap_pingpong",
         "attn_bwd_d256_causal_varlen_dqatomic_dqpk"),
    ],
}


@pytest.fixture
def shipped(monkeypatch, tmp_path):
    """The package's tables alone (an empty cache: no table of this machine's),
    the picks read again; returns a function setting the GPU's name."""
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))

    def gpu(name):
        monkeypatch.setenv("TKC_DEVICE_NAME", name)
        for space in (*tuned.FORWARD.values(), *tuned.BACKWARD.values()):
            space.forget()
    yield gpu
    monkeypatch.undo()
    for space in (*tuned.FORWARD.values(), *tuned.BACKWARD.values()):
        space.forget()


def old_pick(D, causal, layout, keys):
    return [row for row in OLD_PICKS[D, causal, layout] if row[0] <= keys][-1][1:]


def test_the_shipped_tables_pick_what_the_hand_tables_did(shipped):
    """Through the H100's table (where the hand tables were measured), every
    (D, causal, layout) at keys around every old threshold launches the
    kernels the old code did."""
    shipped(H100)
    bad = []
    for (D, causal, layout) in OLD_PICKS:
        for n in KEYS:
            if n < tuned.SMALLEST_HELD:   # buckets the H100's table lacks: the H200's rows (below)
                continue
            prep, bwd = tuned.backward_kernels(D, causal, layout, n)
            got = (tuned.forward_kernel(D, causal, layout, n).name, bwd.name)
            if got != old_pick(D, causal, layout, n) or prep.name != f"attn_prep_d{D}_{layout}":
                bad.append((D, causal, layout, n, got))
            assert tuned.backward_schedule(D, causal, layout, n).name(D, causal, layout) == bwd.name
    assert bad == []


def test_the_picks_come_from_the_tables(shipped):
    """Not from the spaces' defaults: without the tables (another package
    folder), the defaults run, and they differ from the tables' picks."""
    shipped("NVIDIA H200")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tables, "PACKAGE_DIR", tables.PACKAGE_DIR / "none")
        shipped("NVIDIA H200")
        defaults = {t: tuned.forward_kernel(*t, 16384).name for t in OLD_PICKS}
    shipped("NVIDIA H200")
    assert any(tuned.forward_kernel(*t, 16384).name != name for t, name in defaults.items())
    assert all(name == tuned.FORWARD[t].kernel(tuned.FORWARD[t].default).name for t, name in defaults.items())


def test_the_h200_table_holds_its_tuning_and_serves_gpus_without_one(shipped):
    """The H200's rows tuned there pick the fastest schedule they timed, or
    keep what the key ran untuned (the space's default, or a short query's
    fallback: its row named `untuned`) where the fastest beat it only within
    the noise (tune/measure.py's margin: the rows tuned after it came, which
    name their run in `source`); a GPU
    without a table of its own (an A100 here) launches the H200's picks."""
    from tkc.torchops.attn_decode import SPLITS
    default = {t.name: t.default for t in (*tuned.FORWARD.values(), *tuned.BACKWARD.values(), *SPLITS.values())}
    entries = json.loads((tables.PACKAGE_DIR / "nvidia-h200.json").read_text())["entries"]
    tuned_rows = [(name, r) for name, rows in entries.items() if name.startswith("tkc.attention.")
                  for r in rows.values() if "candidates" in r]
    assert tuned_rows
    for name, r in tuned_rows:
        best = min(r["candidates"], key=r["candidates"].get)
        untuned = json.loads(r["untuned"]) if "untuned" in r else default[name]
        assert json.loads(best) == r["config"] or "source" in r and r["config"] == untuned
    picks = {}
    for gpu in ("NVIDIA H200", "NVIDIA A100-SXM4-80GB"):
        shipped(gpu)
        picks[gpu] = [(tuned.forward_kernel(*t, n).name, tuned.backward_kernels(*t, n)[1].name)
                      for t in OLD_PICKS for n in KEYS]
    assert picks["NVIDIA H200"] == picks["NVIDIA A100-SXM4-80GB"]


def test_each_space_holds_what_its_tables_pick():
    """In each shipped table every key bucket of every space has a row (the
    H200's forwards: every short-query example's key too) and its pick is
    one of the space's schedules (the H100's table: D 64, 128, 256,
    measured before D 96 was served); every schedule is picked in some table
    (a space holds nothing speculative: an option no table picks, on any GPU
    measured, goes with its code)."""
    assert tables.package_path(H100).name == "nvidia-h100-80gb-hbm3.json"
    tables_ = [json.loads((tables.PACKAGE_DIR / path).read_text())["entries"]
               for path in ("nvidia-h200.json", "nvidia-h100-80gb-hbm3.json")]
    for direction, spaces, space_of in (("forward", tuned.FORWARD, forward_space),
                                        ("backward", tuned.BACKWARD, backward_space)):
        for (D, causal, layout), space in spaces.items():
            picked = []
            for i, entries in enumerate(tables_[:1] if D == 96 else tables_):
                rows = entries[tuned.space_name(direction, D, causal, layout)]
                held = [b for b in BUCKETS if i == 0 or b >= tuned.SMALLEST_HELD]   # the H100's: from 512
                diagonal = {repr((D, causal, layout, b)) for b in held}
                # the H200's forwards: also the short queries' examples (forward_key)
                short = {repr(tuned.forward_key(D, causal, layout, k, q)) for q, k in tuned.QUERY_EXAMPLES} \
                    if (direction, i) == ("forward", 0) else set()
                assert set(rows) == diagonal | short
                picked += [r["config"] for r in rows.values()]
            assert all(c in space.configs for c in picked)
            assert all(c in picked for c in space.configs)
            assert space.configs == [dataclasses.asdict(s) for s in space_of(D, causal, layout)]


def test_key_buckets():
    assert [key_bucket(n) for n in (0, 1, 127, 128, 255, 256, 511, 512, 1023, 1024, 2047, 2048, 8191, 8192,
                                    70000)] == \
        [128, 128, 128, 128, 128, 256, 256, 512, 512, 1024, 1024, 2048, 4096, 8192, 65536]
    assert BUCKETS == (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


def test_the_small_buckets(shipped):
    """The 128- and 256-key buckets came after the H100's table. The H200's
    table has rows for them, where D 64's two consumers (128-row query
    tiles, which 128 and 256 rows fill; three consumers' 192-row tiles
    compute 384 rows for 256; 3/8 of their exponentials on the FMA pipe)
    beat 512's three, and the H100 (whose table
    lacks them) runs those rows, as any GPU does a key its table lacks; a
    key no table holds below 512 runs 512's pick (what those lengths ran
    before), not the space's default."""
    two = "attn_fwd_d64_bhld_kv128_s2_persistent_fma38"
    for gpu in ("NVIDIA H200", H100):
        shipped(gpu)
        assert [tuned.forward_kernel(64, False, "bhld", n).name for n in (1, 128, 256, 511)] == [two] * 4
        assert tuned.forward_kernel(64, False, "bhld", 512).name == "attn_fwd_d64_bhld_kv128_s2_c3_persistent"
    # a table whose 512 row is not the default: its pick, not the default, below 512 keys
    space = tuned.FORWARD[128, False, "bhld"]
    other = space.configs[1]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tables, "lookup", lambda name, key: other if key[-1] == 512 else None)
        space.forget()
        assert [space.choose((128, False, "bhld", b)) for b in (128, 256, 512, 1024)] == \
            [other, other, other, space.default]
    space.forget()


def test_short_queries_over_long_keys():
    """A bhld forward of fewer queries than keys (a prefill's chunk over its
    cache) runs its (keys, queries) row; a key no table holds takes the row
    of its query bucket at the nearest key bucket (the longer of two as
    near), skipping a configuration the space no longer has, else the key
    count's pick, as before the key had queries."""
    space = tuned.FORWARD[64, False, "bhld"]
    base = (64, False, "bhld")
    a, b, c = space.configs[:3]
    rows = {(*base, 2048, 256): a, (*base, 8192, 256): b, (*base, 16384, 128): {**c, "KV": 48},
            (*base, 65536, 128): c, (*base, 16384): b}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tables, "lookup", lambda name, key: rows.get(key) if name == space.name else None)
        space.forget()
        assert space.choose((*base, 2048, 256)) == a
        assert space.choose((*base, 4096, 256)) == b       # 2048 and 8192 as near: the longer
        assert space.choose((*base, 1024, 256)) == a       # the nearer
        assert space.choose((*base, 16384, 128)) == c      # its own row names no schedule of the space
        assert space.choose((*base, 16384, 512)) == b      # no row of 512 queries: 16384 keys' pick
        assert space.choose((*base, 16384)) == b
        assert space.choose((*base, 4096)) == space.default
        names = {cfg["consumers"]: space.kernel(cfg).name for cfg in (a, c)}
        assert tuned.forward_kernel(64, False, "bhld", 4096, 300).name == space.kernel(b).name   # bucket 256
        assert tuned.forward_kernel(64, False, "bhld", 100000, 100).name == names[2]
        assert tuned.forward_kernel(64, False, "bhld", 16384).name == space.kernel(b).name
        assert tuned.forward_kernel(64, False, "bhld", 16384, 16384).name == space.kernel(b).name
    space.forget()
    assert tuned.forward_key(64, False, "varlen", 4096, 128) == (64, False, "varlen", 4096, 128)
    assert tuned.forward_key(64, False, "varlen", 4096) == (64, False, "varlen", 4096)
    assert tuned.forward_key(64, False, "bhld", 4096, 5000) == (64, False, "bhld", 4096)
    assert tuned.forward_key(64, False, "bhld", 4096, 2100) == (64, False, "bhld", 4096, 2048)


def test_the_key_of_a_kernel_call():
    """`tkc tune` keys a call by its arguments: k's rows (bhld, whatever its
    strides: a [B, L, H, D] tensor's transpose too) and, a forward's, q's
    where their bucket is the smaller; the backward's max_k or the forward's
    longest sequence (varlen), and its max_q."""
    z = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    bhld = [z(1, 4, 100, 64), z(1, 2, 3000, 64), z(1, 2, 3000, 64), z(1, 4, 100, 64), z(1, 4, 1, 100), 0.1]
    assert tuned.FORWARD[64, True, "bhld"].key(bhld) == (64, True, "bhld", 2048, 128)
    blhd = [z(1, 100, 4, 64).transpose(0, 2, 1, 3), z(1, 700, 2, 64).transpose(0, 2, 1, 3),
            z(1, 700, 2, 64).transpose(0, 2, 1, 3), z(1, 100, 4, 64).transpose(0, 2, 1, 3), z(1, 4, 1, 100), 0.1]
    assert tuned.FORWARD[64, False, "bhld"].key(blhd) == (64, False, "bhld", 512, 128)
    square = [z(1, 4, 600, 64), z(1, 2, 700, 64), z(1, 2, 700, 64), z(1, 4, 600, 64), z(1, 4, 1, 600), 0.1]
    assert tuned.FORWARD[64, False, "bhld"].key(square) == (64, False, "bhld", 512)   # one bucket
    more = [z(1, 4, 3000, 64), z(1, 2, 700, 64), z(1, 2, 700, 64), z(1, 4, 3000, 64), z(1, 4, 1, 3000), 0.1]
    assert tuned.FORWARD[64, False, "bhld"].key(more) == (64, False, "bhld", 512)   # more queries than keys
    cu_q, cu_k = np.array([0, 5, 10], np.int32), np.array([0, 1500, 1600], np.int32)
    varlen = [z(10, 256), z(1600, 128), z(1600, 128), z(10, 256), z(4, 1, 10), cu_q, cu_k, 5, 0.1]
    assert tuned.FORWARD[128, True, "varlen"].key(varlen) == (128, True, "varlen", 1024, 128)   # max_q 5
    varlen[7] = 2000   # (a max_q past the longest sequence: the op's grid, and its key)
    assert tuned.FORWARD[128, True, "varlen"].key(varlen) == (128, True, "varlen", 1024)
    bwd = [z(10, 256), z(1600, 128), z(1600, 128), z(10, 256), z(4, 2, 256), z(10, 256),
           z(1600, 128), z(1600, 128), cu_q, cu_k, 9000, 0.1]
    assert tuned.BACKWARD[128, True, "varlen"].key(bwd) == (128, True, "varlen", 8192)


def test_tkc_tune_finds_the_spaces():
    """`tkc tune --library` tunes them: registered under tkc.attention., each
    with examples at the eager benchmark's lengths."""
    from tkc.tune.cli import _builders
    every = {t.name: t for t in _builders([], True) if t.name.startswith("tkc.attention.")}
    found = {n: t for n, t in every.items() if ".decode." not in n}
    assert len(found) == 32   # 4 head dims x causal or not x (bhld, varlen) x (forward, backward)
    for t in found.values():   # the forwards' short queries over long keys besides
        short = ".forward." in t.name
        assert len(t.examples()) == len(tuned.EXAMPLE_KEYS) + short * len(tuned.QUERY_EXAMPLES)
    assert sorted(set(every) - set(found)) == [f"tkc.attention.decode.splits.d{D}" for D in (128, 256, 64, 96)]
    assert tuned.EXAMPLE_KEYS == (128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def test_the_library_builds_the_common_shapes_picks():
    """tkc build's library: every kernel the tables may pick for D 64, 96, 128
    and 256 (the strided bhld kernels: SDPA's and FlashAttention's layouts
    alike), causal and not (and their prep), and tkc.attention_fp8's spaces at
    D 64 and 128 (8 kernels, what the H200's tuning picked; its D 256 compiles
    at its first call), and the decode path's four (split, merge, unsplit,
    merging split): at most 57 attention kernels in all, every one a kernel
    the ops may launch (the paper's Figure 1 kernel,
    tkc.kernels.attention_fwd, is an example no op launches: it compiles at
    its first call)."""
    from tkc.kernels import ATTENTION_COMMON, library
    names = {k.name for k in library() if k.name.startswith("attn_")}
    fp8 = {n for n in names if n.startswith("attn_fwd_fp8_")}
    assert fp8 == {k.name for (D, _, _), t in tuned.FP8_FORWARD.items() if D < 256 for k in t.kernels()}
    assert len(fp8) == 8
    assert len(names) <= 57
    names -= fp8
    for D, causal, layout in ATTENTION_COMMON:
        if (D, causal, layout) not in OLD_PICKS:   # D 96: no hand table, its spaces whole
            assert {k.name for k in tuned.FORWARD[D, causal, layout].kernels()} <= names
            assert {k.name for k in tuned.BACKWARD[D, causal, layout].kernels()} <= names
        for n in BUCKETS if (D, causal, layout) in OLD_PICKS else ():
            assert set(old_pick(D, causal, layout, n)) <= names
        assert f"attn_prep_d{D}_{layout}" in names
    assert {k.name for k in tuned.all_kernels()} >= names


def test_tuning_a_space_on_the_cpu(artifact_cache, monkeypatch, tmp_path):
    """measure.tune over D 128's forward without the mask (bhld): both
    candidates built, run by the interpreter and found to agree, the faster
    by a fake timer recorded, and then launched for that key (200 queries
    over 300 keys: the query bucket's row)."""
    pytest.importorskip("mlir")
    monkeypatch.setattr(tables, "user_path", lambda device=None: tmp_path / "tuned.json")
    space = tuned.FORWARD[128, False, "bhld"]
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, L, 128)).astype(np.float32) for L in (200, 300, 300))
    args = [q, k, v, np.zeros_like(q), np.zeros((1, 2, 1, 200), np.float32), 0.125]

    def run(kernel, args):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        kernel.interpret(*copies)
        return copies

    def compare(ref, out):
        return None if all(np.allclose(r, o, rtol=1e-2, atol=1e-2) for r, o in zip(ref, out)) else "differs"

    long = "attn_fwd_d128_bhld_kv128_overlap_pingpong_persistent"
    us = {"attn_fwd_d128_bhld_kv128_persistent_fma12": 2.0, long: 1.0}
    result = space.tune(*args, timer=lambda kern, a: us[kern.name], run=run, compare=compare, rounds=1)
    assert result.key == (128, False, "bhld", 256, 128) and result.best["overlap"]   # 200 queries
    assert sorted(r["status"] for r in result.rows) == ["best", "ok"]
    space.forget()
    assert tuned.forward_kernel(128, False, "bhld", 300, 200).name == long
    square = space.kernel(space.choose((128, False, "bhld", 256))).name   # the key count's row, not the new one
    assert tuned.forward_kernel(128, False, "bhld", 300).name == square and square != long
    space.forget()
