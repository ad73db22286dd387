"""docs/attention.md's "Which kernel runs when" agrees with the code.

Part 1 of the doc has four tables: the forward and the backward (D, causal,
layout, key range -> kernel name and the builder's options), the prep
kernel's name pattern, and the pick tables of tkc/kernels/attention_picks.py
with their values. Checked here, with no MLIR and no GPU (kernel names come
from the builders without tracing):
- each table value quoted is the module's, and every table of the module is
  quoted;
- for every head dim, mask and layout, and key counts at and around every
  threshold of the module (and powers of two), exactly one doc row applies,
  its kernel name is the one forward_kernel / backward_kernels pick, and the
  builder called with the row's options gives that name (the names spell
  every option out);
- the backward rows' options are backward_options' (plus dkv_tma=True below
  DKV_REGISTERS' keys);
- the docs/bench logs the doc cites exist.
A threshold, option or kernel changed in attention_picks.py without the doc
(or the other way round) fails one of these.
"""
from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from tkc.kernels import attention_picks as picks
from tkc.kernels.attention_bwd_kernel import attention_bwd
from tkc.kernels.attention_hopper import HEAD_DIMS, LAYOUTS, attention_hopper

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "attention.md"


def part1(text: str | None = None) -> str:
    text = DOC.read_text() if text is None else text
    start = text.index("# Part 1. Which kernel runs when")
    return text[start:text.index("# Part 2.", start)]


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table_rows(text: str, prefix: str) -> list[dict]:
    """The rows (D, causal, layout, Lk, kernel, options) whose kernel starts with prefix."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        c = cells(line)
        if len(c) != 6 or not c[4].startswith(f"`{prefix}"):
            continue
        D, causal, layouts, keys, kernel, options = c
        rows.append(dict(D=int(D), causal={"no": (False,), "yes": (True,), "either": (False, True)}[causal],
                         layouts=tuple(x.strip() for x in layouts.split(",")), keys=key_range(keys),
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
    """Key counts at and next to every threshold in attention_picks, and powers of two."""
    values = set()
    for name in ("LONG_KEYS", "CAUSAL_LONG_KEYS", "PAIRED_CAUSAL_KEYS", "ZIGZAG_CAUSAL_KEYS", "DKV_REGISTERS"):
        values |= set(getattr(picks, name).values())
    keys = {2 ** i for i in range(18)} | {v + d for v in values for d in (-1, 0, 1)}
    return sorted(k for k in keys if k >= 1)


def mismatches(text: str | None = None) -> list[str]:
    """What in the doc's Part 1 does not match the code (empty: they agree)."""
    doc = part1(text)
    fwd, bwd = table_rows(doc, "attn_fwd_"), table_rows(doc, "attn_bwd_")
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
            code = picks.forward_kernel(D, causal, layout, keys).name
            row = row_for(fwd, D, causal, layout, keys)
            if row and name_of(row["kernel"], D, causal, layout) != code:
                bad.append(f"forward D {D} causal {causal} {layout} Lk {keys}: doc "
                           f"{name_of(row['kernel'], D, causal, layout)}, code {code}")
            prep, kern = picks.backward_kernels(D, causal, layout, keys)
            row = row_for(bwd, D, causal, layout, keys)
            if row and name_of(row["kernel"], D, causal, layout) != kern.name:
                bad.append(f"backward D {D} causal {causal} {layout} Lk {keys}: doc "
                           f"{name_of(row['kernel'], D, causal, layout)}, code {kern.name}")
            if row:
                options = picks.backward_options(D, causal, layout)
                if kern is picks.attention_kernels(D, causal, layout).bwd_short:
                    options = dict(options, dkv_tma=True)
                if row["options"] != options:
                    bad.append(f"backward D {D} causal {causal} {layout} Lk {keys}: doc options "
                               f"{row['options']}, backward_options {options}")
            pattern = re.search(r"`(attn_prep_d<D>_<layout>)`", doc)
            if not pattern or name_of(pattern.group(1), D, causal, layout) != prep.name:
                bad.append(f"prep D {D} {layout}: code {prep.name}, doc "
                           f"{pattern.group(1) if pattern else 'no attn_prep_d<D>_<layout>'}")

    # each row's options build the kernel the row names
    for rows, build in ((fwd, attention_hopper), (bwd, attention_bwd)):
        for row in rows:
            for causal, layout in itertools.product(row["causal"], row["layouts"]):
                built = build(row["D"], causal, layout, **row["options"]).name
                if built != name_of(row["kernel"], row["D"], causal, layout):
                    bad.append(f"options of {row['line']!r} build {built}")

    # the tables quoted, each with its value
    quoted = {}
    for line in doc.splitlines():
        c = cells(line) if line.startswith("|") else []
        if len(c) == 3 and re.fullmatch(r"`[A-Z][A-Z0-9_]+`", c[0]):
            quoted[c[0].strip("`")] = eval(c[1].strip("`"), {"dict": dict})
    for name in sorted(n for n in dir(picks) if n.isupper() and isinstance(getattr(picks, n), dict)):
        if name not in quoted:
            bad.append(f"{name} is not quoted in the doc's tables")
        elif quoted[name] != getattr(picks, name):
            bad.append(f"{name}: doc {quoted[name]}, code {getattr(picks, name)}")
    bad += [f"{name} is quoted but attention_picks has no such table"
            for name in quoted if not hasattr(picks, name)]
    return bad


def test_which_kernel_tables_match_the_picks():
    bad = mismatches()
    assert not bad, ("docs/attention.md and attention_picks.py disagree:\n" + "\n".join(bad[:20])
                     + f"\n({len(bad)} in all)")


def test_cited_bench_logs_exist():
    text = DOC.read_text()
    cited = set()
    for path in re.findall(r"docs/bench/[A-Za-z0-9_.{},-]+\.txt", text):
        brace = re.search(r"\{([^}]*)\}", path)
        cited |= ({path[:brace.start()] + x + path[brace.end():] for x in brace.group(1).split(",")}
                  if brace else {path})
    assert cited, "the doc cites no docs/bench log"
    assert sorted(p for p in cited if not (ROOT / p).is_file()) == []


def test_the_check_sees_a_threshold_drift(monkeypatch):
    """The check is not vacuous: a threshold moved in the code alone is caught."""
    monkeypatch.setattr(picks, "LONG_KEYS", {**picks.LONG_KEYS, 128: 4096})
    picks.attention_kernels.cache_clear()
    try:
        bad = mismatches()
    finally:
        monkeypatch.undo()
        picks.attention_kernels.cache_clear()
    assert any("LONG_KEYS" in b for b in bad) and any(b.startswith("forward D 128") for b in bad)


def test_the_check_sees_a_doc_drift():
    """... and so is a kernel name changed in the doc alone."""
    text = DOC.read_text().replace("attn_fwd_d128_causal_<layout>_kv128_zigzag`",
                                   "attn_fwd_d128_causal_<layout>_kv128_overlap_pingpong`", 1)
    assert any(b.startswith("forward D 128 causal True") for b in mismatches(text))


@pytest.mark.parametrize("cell, expected", [("< 8192", (1, 8192)), ("≥ 2048", (2048, float("inf"))),
                                            ("2048 ≤ Lk < 8192", (2048, 8192)), ("any", (1, float("inf")))])
def test_key_ranges_read(cell, expected):
    assert key_range(cell) == expected
