"""The fuzzer's ragged programs (tkc/fuzz/ragged.py, docs/fuzz.md): a share of
the persistent warpgroup programs run over ragged groups with counts at the
edges; a dead item leaves its outputs at the initial fill and a live one
computes what it computes when every item runs; and the ill-typed twins that
misuse ragged= are refused at the kernel's decorator. The GPU twin:
test/gpu/test_fuzz_ragged_gpu.py (the pinned programs of fuzz_ragged_cases.py)."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

pytest.importorskip("mlir")

from tkc.compiler import TILE_PIPELINE  # noqa: E402
from tkc.fuzz import checks  # noqa: E402
from tkc.fuzz.generate import generate  # noqa: E402
from tkc.fuzz.program import kernel_of  # noqa: E402
from tkc.fuzz.ragged import all_items, expected, live_rows  # noqa: E402
from tkc.fuzz.refusals import refusal  # noqa: E402
from tkc.pass_pipeline import run_pipeline, split_pipeline  # noqa: E402

import fuzz_ragged_cases  # noqa: E402  (test/python, on sys.path)

SEED = 20260


def _count(p):
    return next(a for a in p.args if a.name == "count")


def _rows(p) -> int:
    return int(p.source.split('ragged=("count", ')[1].split(")")[0])


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
    assert any(len(_count(p).values) < len(live_rows(p)) for p in ragged)   # a count gl shorter than the groups
    assert any(0 < h < p.grid[1] for p in ragged for h in live_rows(p))     # a group partly live
    for p in ragged:   # every output is a matrix a group, and the grid's z is the groups
        assert all(a.shape[1] == len(live_rows(p)) for a in p.args if a.output)
        assert "bx, by, bz = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z" in p.source
        assert f", {len(live_rows(p))}), persistent=" in p.source


def _all_items(p):
    """p's outputs when every item runs, from its IR after tk-layout-selection
    (the interpreter runs legal mma layouts only)."""
    q = all_items(p)
    module = kernel_of(q).trace()
    run_pipeline(module, split_pipeline(TILE_PIPELINE)[0])
    return checks.interpret(module, q)


CASES = [generate(SEED, i) for i in (444, 741, 786, 1082, 1231, 1295, 1639, 1862)] + fuzz_ragged_cases.PROGRAMS


@pytest.mark.parametrize("p", CASES, ids=lambda p: p.name)
def test_dead_items_leave_their_outputs_and_live_ones_compute(p):
    """Over the whole pipeline (the fuzzer's passes check), each group's rows
    past its live items keep the fill (0.5, or 7 in an i32 gl) and the rows
    of its live items equal a run of every item, bit for bit."""
    assert "ragged" in p.features
    with contextlib.redirect_stderr(io.StringIO()):
        f, got = checks.check_passes(p)
        assert f is None, f.report()
        full = _all_items(p)
    for x, y in zip(got, expected(p, full)):
        assert np.array_equal(x, y, equal_nan=True)
    if any(h < p.grid[1] for h in live_rows(p)):   # the dead items would have written: not vacuous
        assert any(not np.array_equal(x, y, equal_nan=True) for x, y in zip(full, expected(p, full)))


def test_the_cases_have_partly_live_and_empty_groups():
    lives = [live_rows(p) for p in CASES]
    assert any(0 < h < p.grid[1] for p, hs in zip(CASES, lives) for h in hs)
    assert any(not any(hs) for hs in lives) and any(h == p.grid[1] for p, hs in zip(CASES, lives) for h in hs)


def test_ragged_misuse_is_refused_at_the_decorator():
    seen = {}
    for i in range(800):
        p = refusal(SEED, i)
        if "ragged" in p.bad_what and seen.get(p.bad_what, 0) < 3:
            seen[p.bad_what] = seen.get(p.bad_what, 0) + 1
            assert p.source.splitlines()[p.bad_line - 1].startswith("@tkc.kernel(")
            assert checks.check_refusal(p) is None, p.source
    assert len(seen) == 4, seen
