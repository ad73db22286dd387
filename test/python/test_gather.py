"""Data-dependent TMA (docs/pipelining.md, "Indices from memory and subtiles"):
pipelined loads whose coordinates come from a block table, into whole tiles,
into subtiles that fill a ring slot, and into a subtile chosen at run time,
and pages stored by TMA as loaded (once per work item of a persistent kernel,
or from ring slots: their release must wait for the store's read), run in
the interpreter against numpy (after tk-pipeline-staging, whose output the
interpreter checks for races and deadlocks); an index out of range reads
zeros, as TMA does; and what the pipeline cannot do is refused at the author's
line. The kernels are test/lit/passes/pipeline-gather.py's, loaded by
gather_kernels.py (lit checks their IR; test/gpu/test_gather_gpu.py runs
them on the GPU)."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import tkc
import tkc.interpreter
from tkc import bf16, f32, gl, i32, rt, st, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import atomic_add, load, subtile, zero

from gather_kernels import KERNELS
from helpers import ref_bf16, staged

PAGE = 64


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def page_of(pages, index, rows=PAGE):
    """Page `index` of pages [1, 1, P * rows, C] (float64), zeros when out of range."""
    n = pages.shape[2] // rows
    if not 0 <= index < n:
        return np.zeros((rows, pages.shape[3]))
    return pages[0, 0, index * rows:(index + 1) * rows].astype(np.float64)


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


# ------------------------------------------------- tiles stored as loaded

@pytest.mark.parametrize("name,T,sms", [
    ("copy_pages", 7, 2), ("copy_pages", 4, 2), ("copy_pages", 5, 1), ("copy_pages", 7, 3),
    ("copy_wide", 4, 2), ("copy_wide", 3, 1)])
def test_copy_pages(name, T, sms, rng):
    """Persistent, a page loaded once per work item and stored by TMA as
    loaded: its slot goes back to the producer only once the store has read
    it, else the interpreter reports the producer's load for a later item
    (the item after next with copy_pages' two slots, the next one with
    copy_wide's one) overwriting it under the store. Two items an SM with
    two slots reuse no slot: there the parity alone is checked."""
    rows = 256 if name == "copy_wide" else PAGE
    P = 5
    pages = ref_bf16(rng.standard_normal((1, 1, P * rows, rows if name == "copy_wide" else 64)))
    table = with_bad_indices(rng.integers(0, P, (1, 1, 1, T)).astype(np.int32), P)
    out = np.full((1, 1, T * rows, pages.shape[3]), np.nan, np.float32)
    tkc.interpreter.run(staged(KERNELS[name]), [pages, table, out], sms=sms)
    ref = np.concatenate([page_of(pages, i, rows) for i in table[0, 0, 0]])
    np.testing.assert_array_equal(out[0, 0], ref)


def test_copy_square(rng):
    """The page is read again after another tile's store: its release waits
    for its own store only (pending = 1)."""
    P, T = 4, 7
    pages = ref_bf16(rng.standard_normal((1, 1, P * PAGE, 64)))
    table = with_bad_indices(rng.integers(0, P, (1, 1, 1, T)).astype(np.int32), P)
    out, sq, twice = (np.full((1, 1, T * PAGE, 64), np.nan, np.float32) for _ in range(3))
    tkc.interpreter.run(staged(KERNELS["copy_square"]), [pages, table, out, sq, twice], sms=2)
    ref = np.concatenate([page_of(pages, i) for i in table[0, 0, 0]])
    np.testing.assert_array_equal(out[0, 0], ref)
    np.testing.assert_array_equal(sq[0, 0], ref_bf16(ref * ref))
    np.testing.assert_array_equal(twice[0, 0], 2 * ref)


@pytest.mark.parametrize("B,J,sms", [(3, 5, 2), (2, 3, 1)])
def test_gather_copy(B, J, sms, rng):
    """A ring slot stored by TMA as loaded: released once the store has read it."""
    P = 6
    pages = ref_bf16(rng.standard_normal((1, 1, P * PAGE, 64)))
    table = with_bad_indices(rng.integers(0, P, (1, 1, B, J)).astype(np.int32), P)
    out = np.full((B, 1, J * PAGE, 64), np.nan, np.float32)
    tkc.interpreter.run(staged(KERNELS["gather_copy"]), [pages, table, out], sms=sms)
    ref = np.stack([np.concatenate([page_of(pages, i) for i in table[0, 0, b]]) for b in range(B)])
    np.testing.assert_array_equal(out[:, 0], ref)


def test_gather_gemm_copy(rng):
    """Ring slots stored by TMA and read by a wgmma kept in flight: the
    previous iteration's slot is released after the relaxed wait, once both
    its stores have read it."""
    P, T = 4, 5
    pages = ref_bf16(rng.standard_normal((1, 1, P * PAGE, 64)))
    w = ref_bf16(rng.standard_normal((1, 1, T * PAGE, 64)))
    table = with_bad_indices(rng.integers(0, P, (1, 1, 1, T)).astype(np.int32), P)
    a_out = np.full((1, 1, 2 * T * PAGE, 64), np.nan, np.float32)
    out = np.full((1, 1, PAGE, 64), np.nan, np.float32)
    tkc.interpreter.run(staged(KERNELS["gather_gemm_copy"]), [pages, table, w, a_out, out])
    a = [page_of(pages, i) for i in table[0, 0, 0]]
    np.testing.assert_array_equal(a_out[0, 0], np.concatenate([*a, w[0, 0]]))
    ref = sum(a[t] @ w[0, 0, t * PAGE:(t + 1) * PAGE].astype(np.float64) for t in range(T))
    np.testing.assert_allclose(out[0, 0], ref, rtol=1e-4, atol=1e-3)


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


@tkc.kernel(warps=4, grid=lambda pages, table, out: (1,))
def store_warp_copy(pages: gl(bf16, 1, 1, "P", 64), table: gl(i32, 1, 1, 1, "T"),
                    out: gl(bf16, 1, 1, "M", 64)):
    p_s = st(bf16, 64, 64)
    for j in tkc.range(table.c, stages=2, store_warp=True):  # <- loop
        tma.load(p_s, pages, (0, 0, load(i32, table, at=(0, 0, 0, j), fill=-1), 0))
        tma.store(out, p_s, (0, 0, j, 0))  # <- store


def test_refuses_a_store_warp_storing_a_ring_slot():
    """The store warp stores output slots it hands back itself; a slot of the
    input ring goes back to the producer through the consumers."""
    e = refused(store_warp_copy, "reads a tile this loop loads", "# <- loop")
    lines, first = inspect.getsourcelines(store_warp_copy.fn)
    line = first + next(i for i, ln in enumerate(lines) if "# <- store" in ln)
    assert f":{line}:" in e.message


@tkc.kernel(warps=4, grid=lambda pages, table, out: (1,))
def store_warp_copied(pages: gl(bf16, 1, 1, "P", 64), table: gl(i32, 1, 1, 1, "T"),
                      out: gl(bf16, 1, 1, "M", 64)):
    p_s, o_s = st(bf16, 64, 64), st(bf16, 64, 64)
    for j in tkc.range(table.c, stages=2, store_warp=True):
        tma.load(p_s, pages, (0, 0, load(i32, table, at=(0, 0, 0, j), fill=-1), 0))
        warpgroup.store(o_s, warpgroup.load(rt(bf16, 16, 64), p_s))
        tma.store(out, o_s, (0, 0, j, 0))


def test_store_warp_stores_a_copied_ring_slot(rng):
    """What the refusal advises: the page written to a tile of its own, which
    the store warp stores and hands back."""
    P, T = 5, 7
    pages = ref_bf16(rng.standard_normal((1, 1, P * PAGE, 64)))
    table = with_bad_indices(rng.integers(0, P, (1, 1, 1, T)).astype(np.int32), P)
    out = np.full((1, 1, T * PAGE, 64), np.nan, np.float32)
    tkc.interpreter.run(staged(store_warp_copied), [pages, table, out])
    np.testing.assert_array_equal(out[0, 0], np.concatenate([page_of(pages, i) for i in table[0, 0, 0]]))
