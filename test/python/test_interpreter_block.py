"""The interpreter on the block-level IR (docs/tile-ir.md, "Block level"):
rings and their slots, subtile views, the compiler-synchronised TMA ops,
named barriers, the asynchronous read windows of wgmma and TMA stores in the
race detector, and the grid name `sms`.

Kernels with the new ops are written as tile IR text (tkc.interpreter.testing);
the wgmma and TMA-store kernels use the frontend, which already has those ops.
Errors are located: text kernels carry `loc("k.py":LINE:1)` on the ops a test
expects in a message.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.dialect.types import GL, RT, ST
from tkc.interpreter import run
from tkc.interpreter.testing import kernel_module
from tkc.ops import group_load, load, store, where, zero

from helpers import ref_bf16

IDX2 = "index, index"
IDX4 = "index, index, index, index"
ALIASES = {
    "g": GL("f32", 1, 1, -1, -1).text(),
    "gb": GL("bf16", 1, 1, -1, -1).text(),
    "r": RT("f32", 16, 16).text(),
    "s": ST("f32", 16, 16).text(),
    "bar": "!tk.barrier",
}


def kernel(args, lines, aliases=None, **kw):
    return kernel_module(args, "\n".join(lines), aliases={**ALIASES, **(aliases or {})}, **kw)


def loc(line: int) -> str:
    return f'loc("k.py":{line}:1)'


def raises(m, args, match, where=None, **kw) -> TkcError:
    with pytest.raises(TkcError, match=match) as info:
        run(m, args, **kw)
    if where is not None:
        assert info.value.where == where, str(info.value)
    return info.value


def warp_is(n: int, name: str) -> list[str]:
    """%name = (warpid == n), an i1."""
    return [f"%{name} = arith.cmpi eq, %w, %c{n} : index"]


def tiles(n, rows=16, cols=16, seed=0):
    """n tiles side by side (rows x n*cols), of distinct values."""
    return np.random.default_rng(seed).standard_normal((rows, n * cols)).astype(np.float32)


# ---- rings

def test_ring_slots_hold_independent_data_and_the_ring_is_slot_0():
    # Slot i gets tile i of x times i+1 (a loop picks the slot at run time);
    # then slot 0 is read through the ring value itself, 1 and 2 through tk.stage.
    m = kernel([("x", "!g"), ("o", "!g")], [
        '%ring = "tk.alloc"() {stages = 3 : i64} : () -> !s',
        "scf.for %i = %c0 to %c3 step %c1 {",
        f'  %t = "tk.load"(%x, %c0, %c0, %c0, %i) : (!g, {IDX4}) -> !r',
        "  %i1 = arith.addi %i, %c1 : index",
        "  %n = arith.index_cast %i1 : index to i32",
        "  %f = arith.sitofp %n : i32 to f32",
        '  %t2 = "tk.mul"(%t, %f) : (!r, f32) -> !r',
        '  %slot = "tk.stage"(%ring, %i) : (!s, index) -> !s',
        '  "tk.store"(%slot, %t2, %c0, %c0) : (!s, !r, index, index) -> ()',
        "}",
        '%s1 = "tk.stage"(%ring, %c1) : (!s, index) -> !s',
        '%s2 = "tk.stage"(%ring, %c2) : (!s, index) -> !s',
        *[line for k, s in enumerate(("%ring", "%s1", "%s2")) for line in (
            f'%u{k} = "tk.load"({s}, %c0, %c0) : (!s, {IDX2}) -> !r',
            f'"tk.store"(%o, %u{k}, %c0, %c0, %c0, %c{k}) : (!g, !r, {IDX4}) -> ()')],
    ])
    x = tiles(3)
    o = np.zeros_like(x)
    run(m, [x, o])
    np.testing.assert_array_equal(o, x * np.repeat([1, 2, 3], 16).astype(np.float32))


def test_stage_out_of_the_ring_is_a_located_error():
    m = kernel([("o", "!g")], [
        '%ring = "tk.alloc"() {stages = 3 : i64} : () -> !s',
        f'%s = "tk.stage"(%ring, %c3) : (!s, index) -> !s {loc(4)}',
    ])
    raises(m, [np.zeros((16, 16), np.float32)], r"tk.stage: slot 3 is out of the ring's slots "
           r"0\.\.2", "k.py:4:1")


def test_stage_of_something_else_than_a_ring_is_refused():
    m = kernel([("o", "!g")], [
        '%s = "tk.alloc"() : () -> !s',
        f'%t = "tk.stage"(%s, %c0) : (!s, index) -> !s {loc(5)}',
    ])
    raises(m, [np.zeros((16, 16), np.float32)], r"the ring must be a tk.alloc \{stages = N\}",
           "k.py:5:1")


def barrier_ring(skip_last: bool):
    """One tk.init_barrier on a 3-slot barrier ring, then an arrival and a
    wait on each slot (skip_last: no arrival on slot 2, so its wait hangs)."""
    slots = [line for i in range(3) for line in (
        f'%b{i} = "tk.stage"(%ring, %c{i}) : (!bar, index) -> !bar',
        *([] if skip_last and i == 2
          else [f'"tk.arrive"(%b{i}) {{count = 1 : i64}} : (!bar) -> ()']),
        f'"tk.wait"(%b{i}, %c0) : (!bar, index) -> () {loc(10 + i)}')]
    return kernel([("o", "!g")], [
        '%ring = "tk.alloc"() {stages = 3 : i64} : () -> !bar',
        '"tk.init_barrier"(%ring) {count = 1 : i64} : (!bar) -> ()', *slots])


def test_init_barrier_of_a_ring_initialises_every_slot_and_slots_are_independent():
    run(barrier_ring(skip_last=False), [np.zeros((16, 16), np.float32)])
    # Slots 0 and 1 completed their phase 0; slot 2 did not.
    raises(barrier_ring(skip_last=True), [np.zeros((16, 16), np.float32)],
           r"deadlock: warp 0 waits for the phase of parity 0 \(phase 0: 0 of 1 arrivals",
           "k.py:12:1")


def ring_pipeline(early_release: bool = False):
    """Warp 1 produces tiles of x into a 2-slot ring of st, warp 0 copies them
    to o; a ring of `full` and a ring of `empty` barriers connect them, each
    initialised by one tk.init_barrier. early_release: the consumer arrives
    on empty before it reads the slot."""
    read = [f'    %v = "tk.load"(%slot, %c0, %c0) : (!s, {IDX2}) -> !r {loc(30)}',
            f'    "tk.store"(%o, %v, %c0, %c0, %c0, %i) : (!g, !r, {IDX4}) -> ()']
    release = ['    %e = "tk.stage"(%empty, %s) : (!bar, index) -> !bar',
               '    "tk.arrive"(%e) {count = 1 : i64} : (!bar) -> ()']
    return kernel([("x", "!g"), ("o", "!g")], [
        '%data = "tk.alloc"() {stages = 2 : i64} : () -> !s',
        '%full = "tk.alloc"() {stages = 2 : i64} : () -> !bar',
        '%empty = "tk.alloc"() {stages = 2 : i64} : () -> !bar',
        '"tk.init_barrier"(%full) {count = 1 : i64} : (!bar) -> ()',
        '"tk.init_barrier"(%empty) {count = 1 : i64} : (!bar) -> ()',
        '%w = "tk.warpid"() : () -> index', *warp_is(1, "producer"),
        "scf.for %i = %c0 to %c4 step %c1 {",
        "  %s = arith.remui %i, %c2 : index",
        "  %round = arith.divui %i, %c2 : index",
        '  %slot = "tk.stage"(%data, %s) : (!s, index) -> !s',
        "  scf.if %producer {",
        "    %r1 = arith.addi %round, %c1 : index",
        "    %pe = arith.remui %r1, %c2 : index",
        '    %e = "tk.stage"(%empty, %s) : (!bar, index) -> !bar',
        '    "tk.wait"(%e, %pe) : (!bar, index) -> ()',
        f'    %t = "tk.load"(%x, %c0, %c0, %c0, %i) : (!g, {IDX4}) -> !r',
        f'    "tk.store"(%slot, %t, %c0, %c0) : (!s, !r, {IDX2}) -> () {loc(20)}',
        '    %f = "tk.stage"(%full, %s) : (!bar, index) -> !bar',
        '    "tk.arrive"(%f) {count = 1 : i64} : (!bar) -> ()',
        "  } else {",
        "    %pf = arith.remui %round, %c2 : index",
        '    %f = "tk.stage"(%full, %s) : (!bar, index) -> !bar',
        '    "tk.wait"(%f, %pf) : (!bar, index) -> ()',
        *(release + read if early_release else read + release),
        "  }",
        "}",
    ], warps=2)


def test_a_ring_of_tiles_and_rings_of_barriers_pipeline_a_copy():
    # Slot 1 of each barrier ring works only if tk.init_barrier initialised it.
    x = tiles(4)
    o = np.zeros_like(x)
    run(ring_pipeline(), [x, o])
    np.testing.assert_array_equal(o, x)


def test_each_ring_slot_is_its_own_buffer_for_races():
    # Releasing a slot before reading it lets the producer overwrite it; the
    # race names that slot of the ring.
    x = tiles(4)
    e = raises(ring_pipeline(early_release=True), [x, np.zeros_like(x)],
               r"shared-memory race: warp 1 overwrites slot 0 of a 2-slot ring of "
               r"st<f32, 16, 16, auto> .* read by warp 0 at k.py:30:1", "k.py:20:1")
    assert "(in block (0, 0, 0))" in e.message


# ---- subtiles

P = ST("f32", 32, 64, "128b")    # 2 x 2 parts of V (a 128b panel is 32 f32 columns)
V = ST("f32", 16, 32, "128b")
R32 = RT("f32", 32, 32)


def test_subtile_of_an_st_reads_and_writes_the_parent():
    # x -> parent; part (1, 1) read through a view; -1 written through the
    # view at part (0, 1); the parent read back whole.
    m = kernel([("x", "!g"), ("o", "!g"), ("part", "!g")], [
        '%p = "tk.alloc"() : () -> !p',
        f'%t = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!g, {IDX4}) -> !rp',
        f'"tk.store"(%p, %t, %c0, %c0) : (!p, !rp, {IDX2}) -> ()',
        f'%v11 = "tk.subtile"(%p, %c1, %c1) : (!p, {IDX2}) -> !v',
        f'%u = "tk.load"(%v11, %c0, %c0) : (!v, {IDX2}) -> !rv',
        f'"tk.store"(%part, %u, %c0, %c0, %c0, %c0) : (!g, !rv, {IDX4}) -> ()',
        f'%v01 = "tk.subtile"(%p, %c0, %c1) : (!p, {IDX2}) -> !v',
        '%neg = "tk.neg_infty"() : () -> !rv',
        '%one = arith.constant 1.0 : f32',
        '%m1 = "tk.fill"(%one) : (f32) -> !rv',
        '%m = "tk.neg"(%m1) : (!rv) -> !rv',
        f'"tk.store"(%v01, %m, %c0, %c0) : (!v, !rv, {IDX2}) -> ()',
        f'%all = "tk.load"(%p, %c0, %c0) : (!p, {IDX2}) -> !rp',
        f'"tk.store"(%o, %all, %c0, %c0, %c0, %c0) : (!g, !rp, {IDX4}) -> ()',
    ], aliases={"p": P.text(), "v": V.text(), "rp": RT("f32", 32, 64).text(),
                "rv": RT("f32", 16, 32).text()})
    x = tiles(4, rows=32)
    o, part = np.zeros_like(x), np.zeros((16, 32), np.float32)
    run(m, [x, o, part])
    np.testing.assert_array_equal(part, x[16:, 32:])
    want = x.copy()
    want[:16, 32:] = -1
    np.testing.assert_array_equal(o, want)


def subtile_rows(neighbour: bool, sync: bool = False):
    """4 warps, each writes its 16 rows of a 64 x 32 st through a row view
    (run-time index = warp), then reads its own or its neighbour's rows
    through the parent."""
    return kernel([("x", "!g"), ("o", "!g")], [
        '%p = "tk.alloc"() : () -> !p', '%w = "tk.warpid"() : () -> index',
        f'%t = "tk.load"(%x, %c0, %c0, %w, %c0) : (!g, {IDX4}) -> !rv',
        f'%v = "tk.subtile"(%p, %w, %c0) : (!p, {IDX2}) -> !v',
        f'"tk.store"(%v, %t, %c0, %c0) : (!v, !rv, {IDX2}) -> () {loc(12)}',
        '"tk.sync"() : () -> ()' if sync else "",
        "%w1 = arith.addi %w, %c1 : index",
        "%n = arith.remui %w1, %c4 : index" if neighbour else "%n = arith.addi %w, %c0 : index",
        f'%u = "tk.load"(%p, %n, %c0) : (!p, {IDX2}) -> !rv {loc(16)}',
        f'"tk.store"(%o, %u, %c0, %c0, %w, %c0) : (!g, !rv, {IDX4}) -> ()',
    ], warps=4, aliases={"p": ST("f32", 64, 32, "128b").text(), "v": V.text(),
                         "rv": RT("f32", 16, 32).text()})


def test_subtile_accesses_land_on_the_parents_cells_for_races():
    x = tiles(2, rows=64)
    o = np.zeros_like(x)
    run(subtile_rows(neighbour=False), [x, o])  # disjoint rows: no sync needed
    np.testing.assert_array_equal(o, x)
    run(subtile_rows(neighbour=True, sync=True), [x, o])
    np.testing.assert_array_equal(o, np.roll(x, -16, axis=0))
    # Warp 0 reads rows 16..31 through the parent before warp 1 writes them
    # through its view: caught at the write, in the parent's coordinates.
    raises(subtile_rows(neighbour=True), [x, o],
           r"warp 1 overwrites rows 16\.\.31, cols 0\.\.31 of st<f32, 64, 32, [0-9a-z]+> .* "
           r"read by warp 0 at k.py:16:1", "k.py:12:1")


def test_subtile_index_outside_the_parent_is_a_located_error():
    m = kernel([("o", "!g")], [
        '%p = "tk.alloc"() : () -> !p',
        f'%v = "tk.subtile"(%p, %c2, %c0) : (!p, {IDX2}) -> !v {loc(3)}',
    ], aliases={"p": P.text(), "v": V.text()})
    raises(m, [np.zeros((16, 16), np.float32)], r"tk.subtile: index \(2, 0\) is outside the "
           r"2 x 2 parts", "k.py:3:1")


def test_subtile_of_an_rt_is_that_part_of_the_registers():
    m = kernel([("x", "!g"), ("o", "!g")], [
        f'%t = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!g, {IDX4}) -> !rb',
        f'%u = "tk.subtile"(%t, %c1, %c0) : (!rb, {IDX2}) -> !r',
        '%two = arith.constant 2.0 : f32',
        '%u2 = "tk.mul"(%u, %two) : (!r, f32) -> !r',
        f'"tk.store"(%o, %u2, %c0, %c0, %c0, %c0) : (!g, !r, {IDX4}) -> ()',
        f'%z = "tk.subtile"(%t, %c0, %c1) : (!rb, {IDX2}) -> !r',
        f'"tk.store"(%o, %z, %c0, %c0, %c0, %c1) : (!g, !r, {IDX4}) -> ()',
    ], aliases={"rb": R32.text()})
    x = tiles(2, rows=32)
    o = np.zeros((16, 32), np.float32)
    run(m, [x, o])
    np.testing.assert_array_equal(o[:, :16], 2 * x[16:, :16])
    np.testing.assert_array_equal(o[:, 16:], x[:16, 16:])


def test_subtile_of_an_rt_needs_constant_indices():
    m = kernel([("x", "!g")], [
        '%w = "tk.warpid"() : () -> index',
        f'%t = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!g, {IDX4}) -> !rb',
        f'%u = "tk.subtile"(%t, %w, %c0) : (!rb, {IDX2}) -> !r {loc(7)}',
    ], aliases={"rb": R32.text()})
    raises(m, [np.zeros((32, 32), np.float32)], "must be constants", "k.py:7:1")


# ---- pipeline_load / pipeline_store

def pipelined_copy():
    """2 warps per block walk 2 column tiles of a 32 x 64 block tile: each
    tile comes in by pipeline_load, each warp doubles its 16 rows into a
    second st, which goes out by pipeline_store. No tk.sync anywhere: the
    pipeline ops synchronise the block (also before reusing both st)."""
    return kernel([("a", "!gb"), ("o", "!gb")], [
        '%s = "tk.alloc"() : () -> !sb', '%d = "tk.alloc"() : () -> !sb',
        '%w = "tk.warpid"() : () -> index',
        '%bx = "tk.block_idx"() {dim = "x"} : () -> index',
        '%by = "tk.block_idx"() {dim = "y"} : () -> index',
        '%two = arith.constant 2.0 : f32',
        "scf.for %j = %c0 to %c2 step %c1 {",
        "  %bx2 = arith.muli %bx, %c2 : index",
        "  %col = arith.addi %bx2, %j : index",
        f'  "tk.pipeline_load"(%s, %a, %c0, %c0, %by, %col) : (!sb, !gb, {IDX4}) -> ()',
        f'  %t = "tk.load"(%s, %w, %c0) : (!sb, {IDX2}) -> !rb',
        '  %t2 = "tk.mul"(%t, %two) : (!rb, f32) -> !rb',
        f'  "tk.store"(%d, %t2, %w, %c0) : (!sb, !rb, {IDX2}) -> ()',
        f'  "tk.pipeline_store"(%o, %d, %c0, %c0, %by, %col) : (!gb, !sb, {IDX4}) -> ()',
        "}",
    ], warps=2, grid=["cdiv(a.c, 64)", "cdiv(a.r, 32)", "1"],
        aliases={"sb": ST("bf16", 32, 32).text(), "rb": RT("bf16", 16, 32).text()})


def test_pipeline_load_and_store_zero_fill_round_and_clip_with_no_sync():
    # 48 x 80 is ragged for 32 x 32 tiles: loads read zeros past the end, the
    # stores write only in bounds (o's 1.0 border would show otherwise). The
    # f32 input is not bf16: the load rounds it to the st's dtype.
    a = np.random.default_rng(5).standard_normal((48, 80)).astype(np.float32)
    o = np.full((48, 80), np.nan, np.float32)
    run(pipelined_copy(), [a, o])  # race checks on: none reported
    np.testing.assert_array_equal(o, ref_bf16(2 * ref_bf16(a)))


def test_pipeline_load_is_reached_by_every_warp():
    m = kernel([("a", "!g")], [
        '%s = "tk.alloc"() : () -> !s', '%w = "tk.warpid"() : () -> index', *warp_is(0, "w0"),
        "scf.if %w0 {",
        f'  "tk.pipeline_load"(%s, %a, %c0, %c0, %c0, %c0) : (!s, !g, {IDX4}) -> () {loc(9)}',
        "}",
    ], warps=2)
    raises(m, [np.zeros((16, 16), np.float32)], r"deadlock at sync: warps \[0\] wait here but "
           r"warps \[1\] returned without reaching it", "k.py:9:1")


# ---- named barriers

def named_exchange(outsider_reads: bool = False):
    """12 warps. Warps 0..7 each write their rows of s, meet at barrier 1
    (8 warps) and read their neighbour's rows; warps 8..11 do the same on t
    with barrier 2 (4 warps). outsider_reads: warp 8 also reads warp 0's rows
    of s, though no barrier orders it after warp 0's write."""
    outsider = [*warp_is(8, "w8"), "scf.if %w8 {",
                f'  %z = "tk.load"(%s, %c0, %c0) : (!s8, {IDX2}) -> !r {loc(40)}',
                "}"] if outsider_reads else []
    return kernel([("x", "!g"), ("o", "!g")], [
        '%s = "tk.alloc"() : () -> !s8', '%t = "tk.alloc"() : () -> !s4',
        '%w = "tk.warpid"() : () -> index',
        f'%v = "tk.load"(%x, %c0, %c0, %w, %c0) : (!g, {IDX4}) -> !r',
        "%lo = arith.cmpi ult, %w, %c8 : index",
        "%n = scf.if %lo -> (index) {",
        f'  "tk.store"(%s, %v, %w, %c0) : (!s8, !r, {IDX2}) -> () {loc(30)}',
        '  "tk.sync"() {id = 1 : i64, warps = 8 : i64} : () -> ()',
        "  %w1 = arith.addi %w, %c1 : index", "  %n = arith.remui %w1, %c8 : index",
        f'  %u = "tk.load"(%s, %n, %c0) : (!s8, {IDX2}) -> !r',
        f'  "tk.store"(%o, %u, %c0, %c0, %w, %c0) : (!g, !r, {IDX4}) -> ()',
        "  scf.yield %n : index",
        "} else {",
        "  %k = arith.subi %w, %c8 : index",
        f'  "tk.store"(%t, %v, %k, %c0) : (!s4, !r, {IDX2}) -> ()',
        '  "tk.sync"() {id = 2 : i64, warps = 4 : i64} : () -> ()',
        "  %k1 = arith.addi %k, %c1 : index", "  %n = arith.remui %k1, %c4 : index",
        f'  %u = "tk.load"(%t, %n, %c0) : (!s4, {IDX2}) -> !r',
        f'  "tk.store"(%o, %u, %c0, %c0, %w, %c0) : (!g, !r, {IDX4}) -> ()',
        "  scf.yield %n : index",
        "}",
        *outsider,
    ], warps=12, aliases={"s8": ST("f32", 128, 16).text(), "s4": ST("f32", 64, 16).text()})


def test_named_barriers_synchronise_only_their_warps():
    x = tiles(1, rows=192)
    o = np.zeros_like(x)
    run(named_exchange(), [x, o])
    want = np.concatenate([np.roll(x[:128], -16, axis=0), np.roll(x[128:], -16, axis=0)])
    np.testing.assert_array_equal(o, want)


def test_a_warp_outside_a_named_barrier_is_not_ordered_by_it():
    x = tiles(1, rows=192)
    raises(named_exchange(outsider_reads=True), [x, np.zeros_like(x)],
           r"warp 8 reads rows 0\.\.15, cols 0\.\.15 of st<f32, 128, 16, auto> .* written "
           r"by warp 0 at k.py:30:1", "k.py:40:1")


def split_syncs(low: str, high: str, split: int, warps: int):
    """Warps below `split` reach `"tk.sync"() {low}` (at k.py:7), the others
    `"tk.sync"() {high}` (at k.py:9); "" for a plain tk.sync."""
    def sync(attrs, line):
        return f'  "tk.sync"() {{{attrs}}} : () -> () {loc(line)}' if attrs else \
            f'  "tk.sync"() : () -> () {loc(line)}'
    return kernel([("o", "!g")], [
        '%w = "tk.warpid"() : () -> index', f"%lo = arith.cmpi ult, %w, %c{split} : index",
        "scf.if %lo {", sync(low, 7), "} else {", sync(high, 9), "}",
    ], warps=warps)


def test_arrivals_of_one_named_barrier_at_different_syncs_are_a_deadlock():
    m = split_syncs("id = 1 : i64, warps = 4 : i64", "id = 1 : i64, warps = 4 : i64", 2, 4)
    raises(m, [np.zeros((16, 16), np.float32)],
           r"deadlock at sync: warp 0 waits here on barrier 1 but warp 2 arrives on it at "
           r"tk.sync \(k.py:9:1\) on barrier 1 of 4 warps", "k.py:7:1")


def test_named_barrier_that_never_gets_its_warps_is_a_deadlock():
    # Barrier 1 wants 8 warps, but warps 4..7 meet at barrier 2 and return.
    m = split_syncs("id = 1 : i64, warps = 8 : i64", "id = 2 : i64, warps = 4 : i64", 4, 8)
    raises(m, [np.zeros((16, 16), np.float32)],
           r"deadlock at sync: barrier 1 completes when 8 warps arrive, but only warps "
           r"\[0, 1, 2, 3\] wait here; warps \[4, 5, 6, 7\] returned", "k.py:7:1")


def test_warps_split_between_two_barriers_that_cannot_complete():
    m = split_syncs("", "id = 3 : i64, warps = 4 : i64", 2, 4)
    raises(m, [np.zeros((16, 16), np.float32)],
           r"barrier 0 completes when 4 warps arrive, but only warps \[0, 1\] wait here; "
           r"warp 2 waits at tk.sync \(k.py:9:1\) on barrier 3 of 4 warps; warp 3 waits",
           "k.py:7:1")


def test_mbarrier_wait_stuck_behind_a_named_barrier_is_a_deadlock():
    # Warp 1 would arrive on bar after barrier 1, which needs warp 0 too.
    m = kernel([("o", "!g")], [
        '%b = "tk.alloc"() : () -> !bar',
        '"tk.init_barrier"(%b) {count = 1 : i64} : (!bar) -> ()',
        '%w = "tk.warpid"() : () -> index', *warp_is(0, "w0"),
        "scf.if %w0 {", f'  "tk.wait"(%b, %c0) : (!bar, index) -> () {loc(8)}',
        "} else {", f'  "tk.sync"() {{id = 1 : i64, warps = 2 : i64}} : () -> () {loc(10)}',
        '  "tk.arrive"(%b) {count = 1 : i64} : (!bar) -> ()', "}",
        '"tk.sync"() {id = 1 : i64, warps = 2 : i64} : () -> ()',
    ], warps=2)
    raises(m, [np.zeros((16, 16), np.float32)],
           r"deadlock: warp 0 waits for the phase of parity 0 .* warp 1 waits at tk.sync "
           r"\(k.py:10:1\) on barrier 1 of 2 warps", "k.py:8:1")


def turns_kernel(turns: bool = True, short: bool = False, rounds: int = 1, end: bool = False):
    """Two warpgroups pass a 64 x 16 tile back and forth: in each of its 3
    turns (warpgroup.turns) a warpgroup adds 1 to it, so it ends at 6 (times
    rounds), each read ordered after the other warpgroup's write by the
    turn's barrier. turns=False: the same without turns; short: warpgroup 0
    takes 2 turns; rounds: turns() started that many times (a persistent
    kernel's work items), each ended with turn.end() if end."""
    @tkc.kernel(warps=8)
    def passing(o: gl(f32, 1, 1, 64, 16)):
        wg, w = tkc.warpgroupid(), tkc.warpid() % 4
        s = st(f32, 64, 16)
        with tkc.if_(wg == 0):
            store(s, zero(rt(f32, 16, 16)), (w, 0))
        for _ in range(rounds):
            turn = warpgroup.turns() if turns else tkc.if_(wg >= 0)
            for _ in tkc.range(where(wg == 0, 2, 3) if short else 3):
                with turn:
                    x = load(rt(f32, 16, 16), s, (w, 0))
                    store(s, x + 1.0, (w, 0))
            if end:
                turn.end()
        with tkc.if_(wg == 1):
            store(o, load(rt(f32, 16, 16), s, (w, 0)), (0, 0, w, 0))
    return passing


def test_turns_order_the_warpgroups():
    o = np.zeros((64, 16), np.float32)
    turns_kernel().interpret(o)
    np.testing.assert_array_equal(o, 6)


def test_ended_turns_start_again():
    o = np.zeros((64, 16), np.float32)
    turns_kernel(rounds=2, end=True).interpret(o)
    np.testing.assert_array_equal(o, 12)
    ir = turns_kernel(end=True).tile_ir()  # end: warpgroup 0 waits for the last hand-over
    assert ir.count('"tk.sync"() {id = 12 : i64, warps = 8 : i64}') == 2


def test_turns_started_again_without_end_deadlock():
    # the pending 1 -> 0 hand-over and the new start complete barrier 12 early
    with pytest.raises(TkcError, match=r"deadlock at sync: barrier 12 completes when 8 warps arrive, "
                                       r"but only warps \[0, 1, 2, 3\] wait here"):
        turns_kernel(rounds=2).interpret(np.zeros((64, 16), np.float32))


def test_turns_ir_waits_on_its_own_barrier_and_arrives_on_the_next():
    ir = turns_kernel().tile_ir()
    assert ir.count('"tk.sync"() {arrive, id = 12 : i64, warps = 8 : i64}') == 2  # start, 1 -> 0
    assert ir.count('"tk.sync"() {arrive, id = 13 : i64, warps = 8 : i64}') == 1  # 0 -> 1
    assert ir.count('"tk.sync"() {id = 12 : i64, warps = 8 : i64}') == 1
    assert ir.count('"tk.sync"() {id = 13 : i64, warps = 8 : i64}') == 1


def test_without_turns_the_exchange_is_a_race():
    with pytest.raises(TkcError, match=r"warp 4 reads rows 0\.\.15.* written by warp 0"):
        turns_kernel(turns=False).interpret(np.zeros((64, 16), np.float32))


def test_a_warpgroup_taking_fewer_turns_is_a_deadlock():
    # warpgroup 1's third turn waits for a hand-over from warpgroup 0's third
    with pytest.raises(TkcError, match=r"deadlock at sync: barrier 13 completes when 8 warps "
                                       r"arrive, but only warps \[4, 5, 6, 7\] wait here; "
                                       r"warps \[0, 1, 2, 3\] returned"):
        turns_kernel(short=True).interpret(np.zeros((64, 16), np.float32))


def test_an_arrive_on_barrier_0_or_for_one_warp_is_refused():
    for attrs in ("arrive, warps = 2 : i64", "arrive, id = 1 : i64, warps = 1 : i64",
                  "arrive, id = 1 : i64"):
        m = kernel([("o", "!g")], [f'"tk.sync"() {{{attrs}}} : () -> () {loc(2)}'], warps=2)
        raises(m, [np.zeros((16, 16), np.float32)], r"sync \{arrive\}: needs a named barrier",
               "k.py:2:1")


def test_arrivals_for_different_warp_counts_are_refused():
    m = split_syncs("arrive, id = 1 : i64, warps = 4 : i64", "id = 1 : i64, warps = 2 : i64", 2, 4)
    raises(m, [np.zeros((16, 16), np.float32)],
           r"barrier 1: warp 2 arrives here for 2 warps, but warp 0 arrived at tk.sync \{arrive\} "
           r"\(k.py:7:1\)", "k.py:9:1")


def test_sync_warps_beyond_the_block_is_refused():
    m = kernel([("o", "!g")],
               [f'"tk.sync"() {{id = 1 : i64, warps = 3 : i64}} : () -> () {loc(2)}'], warps=2)
    raises(m, [np.zeros((16, 16), np.float32)], r"warps must be an integer in 1\.\.2", "k.py:2:1")


# ---- asynchronous reads: wgmma operands until the wait retires the group

def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def producer_consumer(early_release: bool):
    """Warp 4 loads A and B tiles by TMA into a 2-stage ring, warpgroup 0
    multiplies them with wgmma and hands each stage back through `empty`.
    early_release: the consumers arrive on empty before
    warpgroup.mma_async_wait, while the wgmma may still read the stage (the
    delayed-release bug)."""
    @tkc.kernel(warps=8)
    def k(a: gl(bf16, 1, 1, 64, 256), b: gl(bf16, 1, 1, 256, 64), c: gl(f32, 1, 1, 64, 64)):
        wg, w = tkc.warpgroupid(), tkc.warpid()
        a_s = [st(bf16, 64, 64) for _ in range(2)]
        b_s = [st(bf16, 64, 64) for _ in range(2)]
        full = [tkc.barrier(count=1) for _ in range(2)]
        empty = [tkc.barrier(count=4) for _ in range(2)]
        with tkc.if_(wg == 1):
            with tkc.if_(w == 4):
                for r in tkc.range(2):
                    for s in range(2):
                        tkc.wait(empty[s], (r + 1) % 2)
                        tma.expect(full[s], a_s[s], b_s[s])
                        tma.load_async(a_s[s], a, (0, 0, 0, r * 2 + s), full[s])
                        tma.load_async(b_s[s], b, (0, 0, r * 2 + s, 0), full[s])
        with tkc.else_():
            acc = zero(rt(f32, 16, 64))
            for r in tkc.range(2):
                for s in range(2):
                    tkc.wait(full[s], r % 2)
                    warpgroup.mma_AB(acc, a_s[s], b_s[s])
                    if early_release:
                        tkc.arrive(empty[s])
                    warpgroup.mma_async_wait(acc)
                    if not early_release:
                        tkc.arrive(empty[s])
            warpgroup.store(c, acc, (0, 0, 0, 0))
    return k


def gemm_args(seed=3):
    rng = np.random.default_rng(seed)
    a = ref_bf16(rng.standard_normal((64, 256)))
    b = ref_bf16(rng.standard_normal((256, 64)))
    return a, b, np.zeros((64, 64), np.float32)


def test_stage_released_after_the_wgmma_wait_runs():
    a, b, c = gemm_args()
    producer_consumer(early_release=False).interpret(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_stage_released_before_the_wgmma_wait_is_a_race():
    k = producer_consumer(early_release=True)
    with pytest.raises(TkcError, match="shared-memory race") as info:
        k.interpret(*gemm_args())
    e = info.value
    assert e.where.startswith(f"{__file__}:{line_of(k.fn, 'tma.load_async(a_s')}:"), str(e)
    mma, wait = line_of(k.fn, "warpgroup.mma_AB("), line_of(k.fn, "warpgroup.mma_async_wait(")
    assert ("the TMA load issued by warp 4 overwrites st<bf16, 64, 64, 128b>" in e.message
            and f"read by warp 0 at {__file__}:{mma}:" in e.message), str(e)
    assert f"(asynchronously, until the tk.warpgroup_mma_wait at {__file__}:{wait}:" in e.message


def in_flight(release: str):
    """One warpgroup: two wgmma (on stage 0, then stage 1) in flight, then
    mma_async_wait(pending=1) retires the first; after a tk.sync warp 0
    overwrites a stage's B. release: "first" overwrites stage 0 (retired),
    "second" stage 1 (still read by the second wgmma)."""
    @tkc.kernel(warps=4)
    def k(a: gl(bf16, 1, 1, 64, 64), b: gl(bf16, 1, 1, 64, 64), c: gl(f32, 1, 1, 64, 64)):
        a_s = st(bf16, 64, 64)
        b_s = [st(bf16, 64, 64) for _ in range(2)]
        group_load(a_s, a, (0, 0, 0, 0))
        group_load(b_s[0], b, (0, 0, 0, 0))
        group_load(b_s[1], b, (0, 0, 0, 0))
        tkc.sync()
        acc = zero(rt(f32, 16, 64))
        warpgroup.mma_AB(acc, a_s, b_s[0])
        warpgroup.mma_AB(acc, a_s, b_s[1])
        warpgroup.mma_async_wait(acc, pending=1)
        tkc.sync()
        with tkc.if_(tkc.warpid() == 0):
            store(b_s[0 if release == "first" else 1], zero(rt(bf16, 16, 64)), (0, 0))
        warpgroup.mma_async_wait(acc)
        warpgroup.store(c, acc, (0, 0, 0, 0))
    return k


def test_wgmma_wait_with_pending_retires_all_but_the_newest_groups():
    rng = np.random.default_rng(4)
    a, b = (ref_bf16(rng.standard_normal((64, 64))) for _ in range(2))
    c = np.zeros((64, 64), np.float32)
    in_flight("first").interpret(a, b, c)
    np.testing.assert_allclose(c, 2 * (a.astype(np.float64) @ b), rtol=1e-5, atol=1e-5)
    k = in_flight("second")
    with pytest.raises(TkcError, match=r"shared-memory race: warp 0 overwrites rows 0\.\.15, "
                                       r"cols 0\.\.63 of st<bf16, 64, 64, 128b> .* while the "
                                       r"warpgroup mma issued by warp 0 at .* may still read "
                                       r"it") as info:
        k.interpret(a, b, c)
    e = info.value
    assert e.where.startswith(f"{__file__}:{line_of(k.fn, 'store(b_s[')}:"), str(e)
    assert f"{__file__}:{line_of(k.fn, 'warpgroup.mma_AB(acc, a_s, b_s[1])')}:" in e.message


# ---- asynchronous reads: a TMA store's tile until tma_store_wait

def tma_store_overwrite(wait: bool):
    """Warp 0 stores x into s, TMA-stores s to o, then overwrites s (after
    tma.store_async_wait, or before it)."""
    @tkc.kernel(warps=1)
    def k(x: gl(f32, 1, 1, 16, 16), o: gl(f32, 1, 1, 16, 16)):
        s = st(f32, 16, 16)
        store(s, load(rt(f32, 16, 16), x, (0, 0, 0, 0)), (0, 0))
        tkc.fence_async()
        tma.store_async(o, s, (0, 0, 0, 0))
        if wait:
            tma.store_async_wait()
        store(s, zero(rt(f32, 16, 16)), (0, 0))
    return k


def test_tma_store_source_reused_after_the_wait_runs():
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    o = np.zeros_like(x)
    tma_store_overwrite(wait=True).interpret(x, o)
    np.testing.assert_array_equal(o, x)


def test_tma_store_source_overwritten_before_the_wait_is_a_race():
    k = tma_store_overwrite(wait=False)
    x = np.ones((16, 16), np.float32)
    with pytest.raises(TkcError, match=r"shared-memory race: warp 0 overwrites st<f32, 16, 16, "
                                       r"64b> .* while the TMA store issued by warp 0 at .* may "
                                       r"still read it \(no tk.tma_store_wait retired it") as info:
        k.interpret(x, np.zeros_like(x))
    e = info.value
    assert e.where.startswith(f"{__file__}:{line_of(k.fn, 'store(s, zero(')}:"), str(e)
    assert f"{__file__}:{line_of(k.fn, 'tma.store_async(o, s')}:" in e.message


def test_tma_store_wait_with_pending_keeps_the_newest_stores_in_flight():
    def k_of(overwrite: int):
        @tkc.kernel(warps=1)
        def k(x: gl(f32, 1, 1, 16, 32), o: gl(f32, 1, 1, 16, 32)):
            s = [st(f32, 16, 16) for _ in range(2)]
            for i in range(2):
                store(s[i], load(rt(f32, 16, 16), x, (0, 0, 0, i)), (0, 0))
            tkc.fence_async()
            for i in range(2):
                tma.store_async(o, s[i], (0, 0, 0, i))
            tma.store_async_wait(pending=1)  # the first store is done reading
            store(s[overwrite], zero(rt(f32, 16, 16)), (0, 0))
        return k
    x = tiles(2)
    o = np.zeros_like(x)
    k_of(0).interpret(x, o)
    np.testing.assert_array_equal(o, x)
    with pytest.raises(TkcError, match="while the TMA store issued by warp 0"):
        k_of(1).interpret(x, o)


# ---- the grid name `sms`

def persistent():
    """min(sms, 8) blocks walk 8 work items (tile i of o gets i + 10 * blocks)."""
    return kernel([("o", "!g")], [
        '%bx = "tk.block_idx"() {dim = "x"} : () -> index',
        '%gx = "tk.grid_dim"() {dim = "x"} : () -> index',
        "%ten = arith.constant 10 : index",
        "scf.for %i = %bx to %c8 step %gx {",
        "  %g10 = arith.muli %gx, %ten : index", "  %v = arith.addi %i, %g10 : index",
        "  %n = arith.index_cast %v : index to i32", "  %f = arith.sitofp %n : i32 to f32",
        '  %t = "tk.fill"(%f) : (f32) -> !r',
        f'  "tk.store"(%o, %t, %c0, %c0, %c0, %i) : (!g, !r, {IDX4}) -> ()',
        "}",
    ], grid=["min(sms, 8)", "1", "1"])


@pytest.mark.parametrize("sms, blocks", [(None, 4), (3, 3), (132, 8)])
def test_sms_in_a_grid_expression_is_the_given_sm_count(sms, blocks):
    o = np.zeros((16, 128), np.float32)
    run(persistent(), [o], **({} if sms is None else {"sms": sms}))
    np.testing.assert_array_equal(o[0, ::16], np.arange(8) + 10 * blocks)


def test_sms_must_be_a_positive_int():
    raises(persistent(), [np.zeros((16, 128), np.float32)], "sms must be a positive int", sms=0)
