"""The fuzzer's ragged programs (tkc/fuzz/ragged.py, docs/fuzz.md): a share of
the persistent warpgroup programs run over ragged groups with counts at the
edges; a dead item leaves its outputs at the initial fill and a live one
computes what it computes when every item runs; and the ill-typed twins that
misuse ragged= are refused at the kernel's decorator."""
from __future__ import annotations

import contextlib
import io
import re
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("mlir")

from tkc.compiler import TILE_PIPELINE  # noqa: E402
from tkc.fuzz import checks  # noqa: E402
from tkc.fuzz.generate import generate  # noqa: E402
from tkc.fuzz.program import kernel_of  # noqa: E402
from tkc.fuzz.refusals import refusal  # noqa: E402
from tkc.pass_pipeline import run_pipeline, split_pipeline  # noqa: E402

SEED = 20260
_RAGGED = re.compile(r', ragged=\("count", (\d+)\)')


def _count(p):
    return next(a for a in p.args if a.name == "count")


def _rows(p) -> int:
    return int(_RAGGED.search(p.source).group(1))


def _live(p) -> list[int]:
    """Each group's live y values: min(max(ceil(count / R), 0), Y), 0 past the count gl."""
    counts, rows, height = _count(p).values, _rows(p), p.grid[1]
    z_n = max(a.shape[1] for a in p.args if a.output)
    return [min(max(-(-counts[z] // rows), 0), height) if z < len(counts) else 0 for z in range(z_n)]


def test_a_share_of_the_persistent_programs_are_ragged_at_the_edges():
    ps = [generate(SEED, i) for i in range(1500)]
    persistent = [p for p in ps if "persistent" in p.features]
    ragged = [p for p in persistent if "ragged" in p.features]
    assert 0.1 <= len(ragged) / len(persistent) <= 0.3, (len(ragged), len(persistent))
    counts = [(c, _rows(p), p.grid[1]) for p in ragged for c in _count(p).values]
    assert any(c == 0 for c, _, _ in counts) and any(c < 0 for c, _, _ in counts)
    assert any(c > r * y for c, r, y in counts) and any(c % r for c, r, y in counts if 0 < c <= r * y)
    assert any(c in (2 ** 31 - 1, -2 ** 31) for c, _, _ in counts)
    assert any("ragged_empty" in p.features for p in ragged)
    assert any(len(_count(p).values) < len(_live(p)) for p in ragged)   # a count gl shorter than the groups
    assert any(0 < h < p.grid[1] for p in ragged for h in _live(p))     # a group partly live
    for p in ragged:   # every output is written at the item's group, and the grid's z is the groups
        assert all(a.shape[1] == len(_live(p)) for a in p.args if a.output)
        assert "bz = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z" in p.source and f", {len(_live(p))}), persistent=" in p.source


def _all_items(p):
    """p's outputs when every item runs (ragged= dropped), from its IR after
    tk-layout-selection (the interpreter runs legal mma layouts only)."""
    q = replace(p, source=_RAGGED.sub("", p.source))
    module = kernel_of(q).trace()
    run_pipeline(module, split_pipeline(TILE_PIPELINE)[0])
    return checks.interpret(module, q)


@pytest.mark.parametrize("index", [444, 741, 786, 1082, 1231, 1295, 1639, 1862])
def test_dead_items_leave_their_outputs_and_live_ones_compute(index):
    """Over the whole pipeline (the fuzzer's passes check), each group's rows
    past its live items keep the fill (0.5, or 7 in an i32 gl) and the rows
    of its live items equal a run of every item."""
    p = generate(SEED, index)
    assert "ragged" in p.features
    with contextlib.redirect_stderr(io.StringIO()):
        f, got = checks.check_passes(p)
        assert f is None, f.report()
        full = _all_items(p)
    live = _live(p)
    assert any(0 < h < p.grid[1] for h in live)
    for a, x, y in zip([a for a in p.args if a.output], got, full):
        fill = 7 if a.dtype in ("i32", "i64") else 0.5
        for z, h in enumerate(live):
            cut = h * a.block_rows
            assert (x[0, z, cut:] == fill).all(), (a.name, z)
            assert np.array_equal(x[0, z, :cut], y[0, z, :cut], equal_nan=True), (a.name, z)
        assert not (y == fill).all()   # the all-items run wrote something


def test_ragged_misuse_is_refused_at_the_decorator():
    seen = {}
    for i in range(800):
        p = refusal(SEED, i)
        if "ragged" in p.bad_what and seen.get(p.bad_what, 0) < 3:
            seen[p.bad_what] = seen.get(p.bad_what, 0) + 1
            assert p.source.splitlines()[p.bad_line - 1].startswith("@tkc.kernel(")
            assert checks.check_refusal(p) is None, p.source
    assert len(seen) == 4, seen
