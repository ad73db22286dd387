"""tk-verify's static race check (tkc/passes/verify_races.py): a warning at
compile time, naming both lines and the warps, for a shared write by one
warp and a read or write by another with no barrier between, where warps
and places are static; none where a barrier, the warps or the places rule
it out; none on the kernel library; and the interpreter agrees on the
racy kernels."""
from __future__ import annotations

import inspect
import io

import numpy as np
import pytest

import tkc
from tkc import f32, gl, rt, rv, st, sv, warpgroup
from tkc.compiler import compile_to
from tkc.diagnostics import TkcError
from tkc.dialect import walk
from tkc.kernels import library
from tkc.ops import block_sum, load, store, zero
from tkc.passes import verify_races

X = gl(f32, 1, 1, 64, 64)


def races(kernel) -> list[str]:
    """The warnings the check gives on the kernel (whatever was said before)."""
    module = kernel.trace()
    return [text for fn in walk(module.operation) if fn.name == "func.func"
            for _, text in verify_races._Kernel(fn).races()]


def line(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if marker in ln)


def k4(fn):
    return tkc.kernel(warps=4, grid=lambda *a: (1,))(fn)


# ---------------------------------------------------------------- found

def neighbours(x: X, o: X):
    s = st(f32, 64, 64)
    w = tkc.warpid()
    store(s, load(rt(f32, 16, 64), x, (0, 0, w, 0)), (w, 0))        # <- write
    store(o, load(rt(f32, 16, 64), s, ((w + 1) % 4, 0)), (0, 0, w, 0))  # <- read


def test_a_missing_sync_is_named_with_both_lines():
    found = races(k4(neighbours))
    assert len(found) == 1, found
    w, r = line(neighbours, "<- write"), line(neighbours, "<- read")
    text = found[0]
    assert f"test_static_races.py:{r}:" in text.split(": warning:")[0]
    assert ("warning: shared-memory race: st<f32, 64, 64" in text and f"test_static_races.py:{w} by warps 0-3, "
            f"read at " in text and f"test_static_races.py:{r} by warps 0-3 with no tkc.sync() between" in text)
    with pytest.raises(TkcError, match="race"):      # the interpreter: the same race at run time
        k4(neighbours).interpret(np.zeros((1, 1, 64, 64), np.float32), np.zeros((1, 1, 64, 64), np.float32))


def one_writer(x: X, o: X):
    s = sv(f32, 64)
    with tkc.if_(tkc.warpid() == 0):
        store(s, load(rv(f32, 64, "flat"), x, (0, 0, 0, 0)), ())     # <- write
    store(o, load(rv(f32, 64, "flat"), s, ()), (0, 0, tkc.warpid(), 0))  # <- read


def test_the_warps_come_from_the_branches():
    found = races(k4(one_writer))
    assert len(found) == 1 and "by warp 0, read at" in found[0] and "by warps 1-3 with" in found[0], found


def next_iteration(x: X, o: X):
    s = sv(f32, 64)
    acc = zero(rv(f32, 64, "flat"))
    for k in tkc.range(4):
        with tkc.if_(tkc.warpid() == 0):
            store(s, load(rv(f32, 64, "flat"), x, (0, 0, k, 0)), ())  # <- write
        tkc.sync()
        acc = acc + load(rv(f32, 64, "flat"), s, ())                 # <- read
    store(o, acc, (0, 0, tkc.warpid(), 0))


def test_a_loop_meets_its_next_iteration():
    """Warp 0 overwrites s in the next iteration while the others may still
    read this one's: a second sync is missing."""
    found = races(k4(next_iteration))
    assert len(found) == 1, found
    r = line(next_iteration, "<- read")
    assert f"read at {__file__}:{r} by warps 1-3, written at " in found[0] and "by warp 0 with" in found[0]


def other_warpgroup(x: gl(f32, 1, 1, 128, 64), o: gl(f32, 1, 1, 128, 64)):
    s = st(f32, 128, 64)
    w = tkc.warpid()
    store(s, load(rt(f32, 16, 64), x, (0, 0, w, 0)), (w, 0))
    warpgroup.sync()                      # orders each warpgroup's own rows only
    mine = load(rt(f32, 16, 64), s, ((w + 1) % 4 + 4 * tkc.warpgroupid(), 0))
    theirs = load(rt(f32, 16, 64), s, ((w + 4) % 8, 0))                   # <- theirs
    store(o, mine + theirs, (0, 0, w, 0))


def test_a_warpgroup_barrier_orders_its_warpgroup():
    found = races(tkc.kernel(warps=8, grid=lambda *a: (1,))(other_warpgroup))
    assert len(found) == 1 and f":{line(other_warpgroup, '<- theirs')} by warps 0-7 with" in found[0], found


# ---------------------------------------------------------------- not found

def synced(x: X, o: X):
    s = st(f32, 64, 64)
    w = tkc.warpid()
    store(s, load(rt(f32, 16, 64), x, (0, 0, w, 0)), (w, 0))
    own = load(rt(f32, 16, 64), s, (w, 0))            # its own rows: no other warp
    tkc.sync()
    store(o, own + load(rt(f32, 16, 64), s, ((w + 1) % 4, 0)), (0, 0, w, 0))


def reduced(x: X, o: X):
    s = sv(f32, 64)
    with tkc.if_(tkc.warpid() == 0):
        store(s, load(rv(f32, 64, "flat"), x, (0, 0, 0, 0)), ())
    block_sum(1.0)                                    # a block reduction meets like tkc.sync()
    store(o, load(rv(f32, 64, "flat"), s, ()), (0, 0, tkc.warpid(), 0))


def unknown_warps(x: X, o: X):
    s = sv(f32, 64)
    with tkc.if_(tkc.warpid() < x.r - 63):            # warps the check cannot tell: not checked
        store(s, load(rv(f32, 64, "flat"), x, (0, 0, 0, 0)), ())
    tkc.sync()
    store(o, load(rv(f32, 64, "flat"), s, ()), (0, 0, tkc.warpid(), 0))


@pytest.mark.parametrize("fn", [synced, reduced, unknown_warps], ids=lambda f: f.__name__)
def test_ordered_or_unknown_is_quiet(fn):
    assert races(k4(fn)) == []
    x = np.arange(64 * 64, dtype=np.float32).reshape(1, 1, 64, 64)
    k4(fn).interpret(x, np.zeros_like(x))            # and the interpreter finds no race


def test_warned_once_through_tk_verify(capsys):
    """tk-verify writes it on stderr, once a process (the pipeline runs
    tk-verify twice, builds and interpret() again)."""
    k = tkc.kernel(warps=4, grid=lambda *a: (1,), name="once_racy")(one_writer)
    verify_races._WARNED.clear()
    for _ in range(2):
        compile_to(k.trace(), "tile")
    err = capsys.readouterr().err
    assert err.count("warning: shared-memory race") == 1, err
    out = io.StringIO()
    assert verify_races.report(k.trace().operation, out=out) == [] and out.getvalue() == ""


def test_the_library_is_quiet():
    """No warning on any kernel of the library (false warnings are worse than
    misses). One kernel per kernel-building function and shape of block."""
    seen, found = set(), []
    for k in library():
        key = (k.fn.__code__.co_filename, k.fn.__code__.co_firstlineno, k.warps)
        if key not in seen:
            seen.add(key)
            found += races(k)
    assert found == [], found


def test_agrees_with_the_interpreters_race_tests():
    """The kernels test_interpreter_races.py runs: warned where the
    interpreter finds a race, quiet where it does not."""
    from test_interpreter_block import turns_kernel
    from test_interpreter_races import own_rows, overwrite, small_gemm
    racy = [small_gemm(sync_after_load=False), small_gemm(sync_after_mma=False), overwrite(sync=False),
            own_rows(neighbour=True), turns_kernel(turns=False)]
    fine = [small_gemm(), overwrite(sync=True), own_rows(neighbour=False)]
    assert all(races(k) for k in racy)
    assert not any(races(k) for k in fine)
    # a bar.arrive hand-off (warpgroup.turns) orders a wait at another line: not followed
    assert races(turns_kernel()) == []
