"""docs/attention.md's "Which kernel runs when" agrees with the code.

Part 1 of the doc has two tables, the forward and the backward (D, causal,
layout, key range -> kernel name and its schedule's fields), and the prep
kernel's name pattern. Checked here, with no MLIR and no GPU (kernel names
come from the schedules, which spell every field out):
- for every head dim, mask and layout, at key counts around every key
  bucket's edge, exactly one doc row applies, and its kernel is the one the
  H100's shipped table picks (forward_kernel / backward_kernels; at D 96,
  which it lacks, the H200's);
- each row's schedule is one of its space's and gives the row's name; every
  schedule of every space has a row;
- the docs/bench logs the doc cites exist.
A pick changed in the H100's table, or a space changed, without the doc (or
the other way round) fails one of these.
"""
from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from tkc.kernels import attention_tuned as tuned
from tkc.kernels.attention_hopper import HEAD_DIMS, LAYOUTS
from tkc.kernels.attention_schedule import (BUCKETS, BackwardSchedule, ForwardSchedule, backward_space,
                                            forward_space, key_bucket)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "attention.md"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(autouse=True)
def h100_tables(monkeypatch, tmp_path):
    """The picks of the H100's shipped table (no table of this machine's)."""
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TKC_DEVICE_NAME", H100)
    forget()
    yield
    monkeypatch.undo()
    forget()


def forget():
    for space in (*tuned.FORWARD.values(), *tuned.BACKWARD.values()):
        space.forget()


def part1(text: str | None = None) -> str:
    text = DOC.read_text() if text is None else text
    start = text.index("# Part 1. Which kernel runs when")
    return text[start:text.index("# Part 2.", start)]


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table_rows(text: str, prefix: str, length: str = "Lk") -> list[dict]:
    """The rows (D, causal, layout, Lk, kernel, options) whose kernel starts with prefix
    (length: the fourth column's, Lk, or the short queries' table's Lq: its range in "keys")."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        c = cells(line)
        if len(c) != 6 or not c[4].startswith(f"`{prefix}"):
            continue
        D, causal, layouts, keys, kernel, options = c
        rows.append(dict(D=int(D), causal={"no": (False,), "yes": (True,), "either": (False, True)}[causal],
                         layouts=tuple(x.strip() for x in layouts.split(",")),
                         keys=key_range(keys.replace(length, "Lk")),
                         kernel=kernel.strip("`"), options=eval(f"dict({options.strip('`')})", {"dict": dict}),
                         line=line))
    return rows


def key_range(cell: str) -> tuple[int, float]:
    """[lo, hi) of an Lk cell: "< 8192", "≥ 8192", "2048 ≤ Lk < 8192", "any"."""
    if cell == "any":
        return 1, float("inf")
    lo = re.search(r"(\d+)\s*≤|≥\s*(\d+)", cell)
    hi = re.search(r"<\s*(\d+)", cell)
    assert lo or hi, f"an Lk cell the test cannot read: {cell!r}"
    return (int(next(g for g in lo.groups() if g)) if lo else 1), (int(hi.group(1)) if hi else float("inf"))


def name_of(pattern: str, D: int, causal: bool, layout: str) -> str:
    return (pattern.replace("<layout>", layout).replace("<D>", str(D))
            .replace("[_causal]", "_causal" if causal else ""))


def probe_keys() -> list[int]:
    """Key counts at and next to every key bucket's edge, and far past the last."""
    return sorted({1, 10 ** 6} | {b + d for b in BUCKETS for d in (-1, 0, 1)})


def mismatches(text: str | None = None) -> list[str]:
    """What in the doc's Part 1 does not match the code (empty: they agree)."""
    doc = part1(text)
    start = doc.find("### Short queries")
    end = doc.find("\n#", start + 1)
    short_text = doc[start:end] if start >= 0 else ""
    rest = doc.replace(short_text, "") if short_text else doc
    fwd, bwd = table_rows(rest, "attn_fwd_"), table_rows(rest, "attn_bwd_")
    bad = []
    if not fwd or not bwd:
        return ["the forward or backward table is missing"]

    def row_for(rows, D, causal, layout, keys):
        found = [r for r in rows if r["D"] == D and causal in r["causal"] and layout in r["layouts"]
                 and r["keys"][0] <= keys < r["keys"][1]]
        if len(found) != 1:
            bad.append(f"{len(found)} rows for D {D} causal {causal} {layout} Lk {keys}")
            return None
        return found[0]

    for D, causal, layout in itertools.product(HEAD_DIMS, (False, True), LAYOUTS):
        for keys in probe_keys():
            code = tuned.forward_kernel(D, causal, layout, keys).name
            row = row_for(fwd, D, causal, layout, keys)
            if row and name_of(row["kernel"], D, causal, layout) != code:
                bad.append(f"forward D {D} causal {causal} {layout} Lk {keys}: doc "
                           f"{name_of(row['kernel'], D, causal, layout)}, code {code}")
            prep, kern = tuned.backward_kernels(D, causal, layout, keys)
            row = row_for(bwd, D, causal, layout, keys)
            if row and name_of(row["kernel"], D, causal, layout) != kern.name:
                bad.append(f"backward D {D} causal {causal} {layout} Lk {keys}: doc "
                           f"{name_of(row['kernel'], D, causal, layout)}, code {kern.name}")
            pattern = re.search(r"`(attn_prep_d<D>_<layout>)`", doc)
            if not pattern or name_of(pattern.group(1), D, causal, layout) != prep.name:
                bad.append(f"prep D {D} {layout}: code {prep.name}, doc "
                           f"{pattern.group(1) if pattern else 'no attn_prep_d<D>_<layout>'}")

    # the short queries' rows (the forwards): at every query count below each key count's bucket,
    # the row of its D, mask, layout and query count where one applies, else the key count's row
    short = table_rows(short_text, "attn_fwd_", "Lq")
    if not short:
        bad.append("the short queries' table is missing")
    for D, causal, layout in itertools.product(HEAD_DIMS, (False, True), LAYOUTS):
        for queries in sorted({b + d for b in BUCKETS[:6] for d in (-1, 0, 1)}):
            for keys in (k for k in probe_keys() if key_bucket(queries) < key_bucket(k)):
                code = tuned.forward_kernel(D, causal, layout, keys, queries).name
                rows = [r for r in short if r["D"] == D and causal in r["causal"] and layout in r["layouts"]
                        and r["keys"][0] <= queries < r["keys"][1]]
                want = name_of(rows[0]["kernel"], D, causal, layout) if len(rows) == 1 else \
                    tuned.forward_kernel(D, causal, layout, keys).name
                if len(rows) > 1 or want != code:
                    bad.append(f"forward D {D} causal {causal} {layout} Lq {queries} Lk {keys}: "
                               f"doc {want}, code {code}")

    # each row's schedule is its space's and names the row's kernel; each schedule has a row
    for rows, schedule, space in ((fwd + short, ForwardSchedule, forward_space),
                                  (bwd, BackwardSchedule, backward_space)):
        for D, causal, layout in itertools.product(HEAD_DIMS, (False, True), LAYOUTS):
            mine = [schedule(**r["options"]) for r in rows
                    if r["D"] == D and causal in r["causal"] and layout in r["layouts"]]
            missing = [s.name(D, causal, layout) for s in space(D, causal, layout) if s not in mine]
            bad += [f"no row has {name}" for name in missing]
            bad += [f"{s.name(D, causal, layout)} is not in its space" for s in mine
                    if s not in space(D, causal, layout)]
        for row in rows:
            for causal, layout in itertools.product(row["causal"], row["layouts"]):
                built = schedule(**row["options"]).name(row["D"], causal, layout)
                if built != name_of(row["kernel"], row["D"], causal, layout):
                    bad.append(f"the schedule of {row['line']!r} names {built}")
    return bad


def test_which_kernel_tables_match_the_picks():
    bad = mismatches()
    assert not bad, ("docs/attention.md and the H100's table or the spaces disagree:\n"
                     + "\n".join(bad[:20]) + f"\n({len(bad)} in all)")


def test_cited_bench_logs_exist():
    text = DOC.read_text()
    cited = set()
    for path in re.findall(r"docs/bench/[A-Za-z0-9_.{},-]+\.txt", text):
        brace = re.search(r"\{([^}]*)\}", path)
        cited |= ({path[:brace.start()] + x + path[brace.end():] for x in brace.group(1).split(",")}
                  if brace else {path})
    assert cited, "the doc cites no docs/bench log"
    assert sorted(p for p in cited if not (ROOT / p).is_file()) == []


def test_the_check_sees_a_pick_drift(monkeypatch):
    """The check is not vacuous: a pick changed in the table alone is caught."""
    space = tuned.FORWARD[128, False, "bhld"]
    long = next(c for c in space.configs if c["overlap"])
    monkeypatch.setattr(space, "choose", lambda key, args=None: long)
    bad = mismatches()
    assert any(b.startswith("forward D 128 causal False bhld Lk 1023") for b in bad)


def test_the_check_sees_a_doc_drift():
    """... and so is a kernel name changed in the doc alone."""
    text = DOC.read_text().replace("attn_fwd_d128_causal_<layout>_kv128_zigzag`",
                                   "attn_fwd_d128_causal_<layout>_kv128_overlap_pingpong`", 1)
    assert any(b.startswith("forward D 128 causal True") for b in mismatches(text))
    assert any("is not in its space" in b for b in mismatches(DOC.read_text().replace(
        "`stages=2, consumers=3, persistent=True`", "`stages=2, consumers=3, persistent=True, KV=64`", 1)))


@pytest.mark.parametrize("cell, expected", [("< 8192", (1, 8192)), ("≥ 2048", (2048, float("inf"))),
                                            ("2048 ≤ Lk < 8192", (2048, 8192)), ("any", (1, float("inf")))])
def test_key_ranges_read(cell, expected):
    assert key_range(cell) == expected
