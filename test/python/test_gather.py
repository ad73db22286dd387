"""Data-dependent TMA (docs/pipelining.md, "Indices from memory and subtiles"):
pipelined loads whose coordinates come from a block table, into whole tiles,
into subtiles that fill a ring slot, and into a subtile chosen at run time,
run in the interpreter against numpy (after tk-pipeline-staging, whose output
the interpreter checks for races and deadlocks); an index out of range reads
zeros, as TMA does; and what the pipeline cannot do is refused at the author's
line. The kernels are test/lit/passes/pipeline-gather.py's (lit checks their
IR; test/gpu/test_gather_gpu.py runs them on the GPU)."""
from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

import tkc
import tkc.interpreter
from tkc import bf16, f32, gl, i32, rt, st, tma, warpgroup
from tkc.compiler import compile_to
from tkc.diagnostics import TkcError
from tkc.frontend.kernel import kernels_in_file
from tkc.ops import atomic_add, load, subtile, zero

from helpers import ref_bf16

KERNELS = {k.name: k for k in kernels_in_file(
    Path(__file__).resolve().parents[1] / "lit" / "passes" / "pipeline-gather.py")}
PAGE = 64


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def staged(kernel):
    module = kernel.trace()
    compile_to(module, "tile")
    return module


def page_of(pages, index):
    """Page `index` of pages [1, 1, P * 64, C] (float64), zeros when out of range."""
    n = pages.shape[2] // PAGE
    if not 0 <= index < n:
        return np.zeros((PAGE, pages.shape[3]))
    return pages[0, 0, index * PAGE:(index + 1) * PAGE].astype(np.float64)


def with_bad_indices(table, n_pages):
    """table with some entries out of range: past the end, negative, and so
    large that index * 64 rows would wrap around in 32 bits."""
    t = table.copy().reshape(-1)
    t[1], t[-1] = n_pages, -1
    if t.size > 3:
        t[2] = 2**26 + 1           # * 64 = 2**32 + 64: row 64 if narrowed before the bounds
    return t.reshape(table.shape)


@pytest.mark.parametrize("bad", [False, True])
def test_paged_sum(bad, rng):
    P, B, J = 5, 3, 4
    pages = ref_bf16(rng.standard_normal((1, 1, P * PAGE, 64)))
    table = rng.integers(0, P, (1, 1, B, J)).astype(np.int32)
    if bad:
        table = with_bad_indices(table, P)
    out = np.full((B, 1, PAGE, 64), np.nan, np.float32)
    tkc.interpreter.run(staged(KERNELS["paged_sum"]), [pages, table, out])
    ref = np.stack([sum(page_of(pages, i) for i in table[0, 0, b]) for b in range(B)])
    np.testing.assert_allclose(out[:, 0], ref, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("T,K,sms,bad", [(4, 128, 2, False), (5, 192, 2, True), (6, 64, 1, True)])
def test_gather_gemm(T, K, sms, bad, rng):
    """Two gathered pages in one ring slot; odd T: the last block's second
    page index reads past the table (fill -1: that page reads as zeros)."""
    P = 7
    pages = ref_bf16(rng.standard_normal((1, 1, P * PAGE, K)))
    w = ref_bf16(rng.standard_normal((1, 1, K, 64)))
    table = rng.integers(0, P, (1, 1, 1, T)).astype(np.int32)
    if bad:
        table = with_bad_indices(table, P)
    out = np.full((1, 1, -(-T // 2) * 2 * PAGE, 64), np.nan, np.float32)
    tkc.interpreter.run(staged(KERNELS["gather_gemm"]), [pages, table, w, out], sms=sms)
    a = np.concatenate([page_of(pages, i) for i in [*table[0, 0, 0], -1][:out.shape[2] // PAGE]])
    ref = a @ w[0, 0].astype(np.float64)
    np.testing.assert_allclose(out[0, 0], ref, rtol=1e-4, atol=1e-3)


def test_pick_page(rng):
    P, T = 4, 5
    pages = ref_bf16(rng.standard_normal((1, 1, P * PAGE, 64)))
    table = with_bad_indices(rng.integers(0, P, (1, 1, 1, T)).astype(np.int32), P)
    out = np.full((1, 1, T * PAGE, 64), np.nan, np.float32)
    tkc.interpreter.run(staged(KERNELS["pick_page"]), [pages, table, out])
    ref = np.concatenate([page_of(pages, i) for i in table[0, 0, 0]])
    np.testing.assert_array_equal(out[0, 0], ref)


# ---------------------------------------------------------------- refusals

def refused(kernel, text: str, marker: str) -> TkcError:
    with pytest.raises(TkcError) as e:
        staged(kernel)
    assert text in e.value.message, e.value.message
    lines, first = inspect.getsourcelines(kernel.fn)
    line = first + next(i for i, ln in enumerate(lines) if marker in ln)
    assert e.value.where.split(":")[-2] == str(line), (e.value.where, marker)
    return e.value


@tkc.kernel(warps=4, grid=lambda pages, table, out: (out.b,))
def writes_its_table(pages: gl(bf16, 1, 1, "P", 64), table: gl(i32, 1, 1, "B", "J"),
                     out: gl(f32, "B", 1, 64, 64)):
    b, p_s = tkc.block_idx.x, st(bf16, 64, 64)
    acc = zero(rt(f32, 16, 64))
    for j in tkc.range(table.c, stages=2):
        page = load(i32, table, at=(0, 0, b, j), fill=-1)  # <- index
        tma.load(p_s, pages, (0, 0, page, 0))
        acc = acc + warpgroup.load(rt(bf16, 16, 64), p_s).to(f32)
    atomic_add(table, 1, at=(0, 0, b, 0))  # <- writes
    warpgroup.store(out, acc, (b, 0, 0, 0))


def test_refuses_indices_from_a_gl_the_kernel_writes():
    e = refused(writes_its_table, "from a gl the kernel also writes", "# <- index")
    line = inspect.getsourcelines(writes_its_table.fn)[1] + 9
    assert f":{line}:" in e.message


def _ring_kernel(dests):
    """A pipelined loop loading `dests(a_s, j)` (a list of subtiles of a
    128-row tile, each from page j) and reading all of a_s."""
    @tkc.kernel(warps=8, grid=lambda pages, out: (1,))
    def ring(pages: gl(bf16, 1, 1, "P", 64), out: gl(f32, 1, 1, 128, 64)):
        a_s = st(bf16, 128, 64)
        acc = zero(rt(f32, 16, 64))
        for j in tkc.range(pages.r // 64, stages=2):
            for d in dests(a_s, j):
                tma.load(d, pages, (0, 0, j, 0))  # <- load
            acc = acc + warpgroup.load(rt(bf16, 16, 64), subtile(a_s, 64, 64, (tkc.warpgroupid(), 0))).to(f32)
        warpgroup.store(out, acc, (0, 0, tkc.warpgroupid(), 0))
    return ring


def test_refuses_a_ring_subtile_chosen_at_run_time():
    e = refused(_ring_kernel(lambda a_s, j: [subtile(a_s, 64, 64, (j % 2, 0))]),
                "a pipelined tma.load into a subtile at run-time coordinates", "# <- load")
    assert "stages=2 is a double buffer" in e.message


def test_refuses_a_ring_tile_left_partly_unloaded():
    e = refused(_ring_kernel(lambda a_s, j: [subtile(a_s, 64, 64, (0, 0))]),
                "leave part of it unloaded", "# <- load")
    assert "row 64, column 0" in e.message


@pytest.mark.parametrize("twice,why", [
    (lambda a_s: [subtile(a_s, 64, 64, (0, 0)), subtile(a_s, 64, 64, (1, 0)), subtile(a_s, 64, 64, (1, 0))],
     "this load overlaps another piece"),
    (lambda a_s: [a_s, a_s], "this tile is loaded twice per iteration"),
])
def test_refuses_overlapping_pieces(twice, why):
    refused(_ring_kernel(lambda a_s, j: twice(a_s)), why, "# <- load")


def test_subtiles_made_before_the_loop_view_each_slot(rng):
    """Views of a ring tile made before its loop (and only used in it) are
    remade in the loop, on each iteration's slot."""
    @tkc.kernel(warps=8, grid=lambda pages, out: (1,))
    def halves_before(pages: gl(bf16, 1, 1, "P", 64), out: gl(f32, 1, 1, 128, 64)):
        a_s = st(bf16, 128, 64)
        top, bottom = subtile(a_s, 64, 64, (0, 0)), subtile(a_s, 64, 64, (1, 0))
        mine = subtile(a_s, 64, 64, (tkc.warpgroupid(), 0))
        acc = zero(rt(f32, 16, 64))
        for j in tkc.range(pages.r // 128, stages=2):
            tma.load(bottom, pages, (0, 0, 2 * j, 0))     # swapped halves
            tma.load(top, pages, (0, 0, 2 * j + 1, 0))
            acc = acc + warpgroup.load(rt(bf16, 16, 64), mine).to(f32)
        warpgroup.store(out, acc, (0, 0, tkc.warpgroupid(), 0))

    pages = ref_bf16(rng.standard_normal((1, 1, 6 * PAGE, 64)))
    out = np.zeros((1, 1, 128, 64), np.float32)
    tkc.interpreter.run(staged(halves_before), [pages, out])
    p = pages[0, 0].astype(np.float64).reshape(3, 2, PAGE, 64).sum(0)
    np.testing.assert_allclose(out[0, 0], np.concatenate([p[1], p[0]]), rtol=1e-6, atol=1e-5)


def test_refuses_a_view_of_a_ring_tile_used_after_the_loop():
    @tkc.kernel(warps=4, grid=lambda pages, out: (1,))
    def view_after(pages: gl(bf16, 1, 1, "P", 64), out: gl(f32, 1, 1, 64, 64)):
        a_s = st(bf16, 128, 64)
        top = subtile(a_s, 64, 64, (0, 0))
        for j in tkc.range(pages.r // 128, stages=2):
            tma.load(a_s, pages, (0, 0, j, 0))
        warpgroup.store(out, warpgroup.load(rt(bf16, 16, 64), top).to(f32), (0, 0, 0, 0))
    refused(view_after, "is a pipelined tile", "top = subtile")
