"""The interpreter's machine: grid, warps, barriers, group copies, argument
checks, located errors, and speed on a real GEMM."""
from __future__ import annotations

import time

import numpy as np
import pytest

from tkc.diagnostics import TkcError
from tkc.dialect.types import GL, RT, ST
from tkc.interpreter import run
from tkc.interpreter.testing import kernel_module

from helpers import ref_bf16

IDX4 = "index, index, index, index"
G16 = GL("f32", 1, 1, -1, -1)
R16 = RT("f32", 16, 16)
ALIASES = {"g": G16.text(), "r": R16.text(), "s": ST("f32", 16, 16).text()}


def fill_store(value: str, r: str, c: str, dst="o", loc=""):
    """Lines storing a 16x16 tile full of index value `value` at tile (r, c) of `dst`."""
    return [f"%i_{value} = arith.index_cast %{value} : index to i32",
            f"%f_{value} = arith.sitofp %i_{value} : i32 to f32",
            f'%t_{value} = "tk.fill"(%f_{value}) : (f32) -> !r',
            f'"tk.store"(%{dst}, %t_{value}, %c0, %c0, %{r}, %{c}) : (!g, !r, {IDX4}) -> () {loc}']


def kernel(args, lines, **kw):
    kw.setdefault("aliases", ALIASES)
    return kernel_module(args, "\n".join(lines), **kw)


def _block_ids():
    """A kernel whose every 16 x 16 block of o holds its block's linear index."""
    return kernel([("o", "!g")], [
        '%x = "tk.block_idx"() {dim = "x"} : () -> index',
        '%y = "tk.block_idx"() {dim = "y"} : () -> index',
        '%nx = "tk.grid_dim"() {dim = "x"} : () -> index',
        "%yn = arith.muli %y, %nx : index", "%id = arith.addi %yn, %x : index",
        *fill_store("id", "y", "x"),
    ], grid=["o.c // 16", "cdiv(o.r, 16)", "1"])


def test_every_block_runs_with_its_index_and_default_grid():
    m = _block_ids()
    o = np.zeros((48, 80), np.float32)
    run(m, [o])
    blocks = o[::16, ::16]
    np.testing.assert_array_equal(blocks, np.arange(15).reshape(3, 5))
    np.testing.assert_array_equal(o, np.kron(blocks, np.ones((16, 16))))


def test_a_prepared_program_runs_on_many_arguments():
    """prepare() compiles the kernel once; each run binds its own arguments
    and grid (a run keeps nothing in the Program: the second run is the
    first's twin on other arrays)."""
    from tkc.interpreter import prepare
    m = _block_ids()
    program = prepare(m)
    for shape in ((48, 80), (16, 32), (48, 80)):
        o, want = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
        run(program, [o])
        run(m, [want])
        np.testing.assert_array_equal(o, want)
        assert o[-1, -1] == shape[0] // 16 * shape[1] // 16 - 1
    with pytest.raises(TkcError, match="takes 1 arguments"):
        run(program, [])


def test_explicit_grid_overrides_and_z_dimension():
    m = kernel([("o", "!g")], ['%z = "tk.block_idx"() {dim = "z"} : () -> index',
                               *fill_store("z", "z", "c0")])
    o = np.full((64, 16), -1, np.float32)
    run(m, [o], grid=(1, 1, 3))
    np.testing.assert_array_equal(o[:, 0], np.repeat([0, 1, 2, -1], 16))


def test_warps_each_run_with_their_id():
    m = kernel([("o", "!g")], [
        '%w = "tk.warpid"() : () -> index', '%g = "tk.warpgroupid"() : () -> index',
        *fill_store("w", "w", "c0"), *fill_store("g", "w", "c1"),
    ], warps=8)
    o = np.zeros((128, 32), np.float32)
    run(m, [o])
    np.testing.assert_array_equal(o[::16, 0], np.arange(8))
    np.testing.assert_array_equal(o[::16, 16], np.arange(8) // 4)


def group_then_read(sync: bool):
    """Warp 1 copies a tile into shared memory; warp 0 reads it, after a sync or not."""
    return kernel([("a", "!g"), ("o", "!g")], [
        '%s = "tk.alloc"() : () -> !s', '%w = "tk.warpid"() : () -> index',
        "%is1 = arith.cmpi eq, %w, %c1 : index",
        "scf.if %is1 {",
        f'  "tk.group_load"(%s, %a, %c0, %c0, %c0, %c0) {{warps = 1 : i64}} : (!s, !g, {IDX4}) -> ()',
        "}",
        '"tk.sync"() : () -> ()' if sync else "",
        "%is0 = arith.cmpi eq, %w, %c0 : index",
        "scf.if %is0 {",
        '  %x = "tk.load"(%s, %c0, %c0) : (!s, index, index) -> !r',
        f'  "tk.store"(%o, %x, %c0, %c0, %c0, %c0) : (!g, !r, {IDX4}) -> ()',
        "}",
    ], warps=2)


def test_group_load_is_visible_to_other_warps_after_sync():
    a = np.random.default_rng(1).random((16, 16), np.float32)
    o = np.zeros_like(a)
    run(group_then_read(sync=True), [a, o])
    np.testing.assert_array_equal(o, a)


def test_read_before_the_sync_sees_unwritten_memory():
    """With the race detector off, the read runs before the copy: NaN shows it."""
    a = np.ones((16, 16), np.float32)
    o = np.zeros_like(a)
    run(group_then_read(sync=False), [a, o], races=False)
    assert np.isnan(o).all()


def test_read_before_the_sync_is_a_race():
    a = np.ones((16, 16), np.float32)
    with pytest.raises(TkcError, match="shared-memory race"):
        run(group_then_read(sync=False), [a, np.zeros_like(a)])


def test_group_load_by_four_warps_copies_once_and_each_reads_its_part():
    m = kernel([("a", "!g"), ("o", "!g")], [
        '%s = "tk.alloc"() : () -> !big', '%w = "tk.warpid"() : () -> index',
        '%b = "tk.block_idx"() {dim = "x"} : () -> index',
        f'"tk.group_load"(%s, %a, %c0, %c0, %b, %c0) {{warps = 4 : i64}} : (!big, !g, {IDX4}) -> ()',
        '"tk.sync"() : () -> ()',
        '%x = "tk.load"(%s, %w, %c0) : (!big, index, index) -> !r',
        '%y = "tk.exp"(%x) : (!r) -> !r',
        "%b4 = arith.muli %b, %c4 : index", "%row = arith.addi %b4, %w : index",
        f'"tk.store"(%o, %y, %c0, %c0, %row, %c0) : (!g, !r, {IDX4}) -> ()',
    ], warps=4, grid=["a.r // 64", "1", "1"], aliases={**ALIASES, "big": ST("f32", 64, 16).text()})
    a = np.random.default_rng(2).random((128, 16), np.float32)
    o = np.zeros_like(a)
    run(m, [a, o])
    np.testing.assert_array_equal(o, np.exp(a))


# ---- located errors

def raises(m, args, match, where=None, **kw):
    with pytest.raises(TkcError, match=match) as info:
        run(m, args, **kw)
    if where is not None:
        assert info.value.where == where, str(info.value)
    return info.value


def test_sync_reached_by_some_warps_only_is_a_deadlock():
    m = kernel([("o", "!g")], [
        '%w = "tk.warpid"() : () -> index', "%is0 = arith.cmpi eq, %w, %c0 : index",
        'scf.if %is0 {', '  "tk.sync"() : () -> () loc("k.py":7:9)', "}",
    ], warps=2)
    e = raises(m, [np.zeros((16, 16), np.float32)], "deadlock at sync", "k.py:7:9")
    assert "warps [1] returned" in e.message and "block (0, 0, 0)" in e.message


def test_warps_at_different_syncs_is_a_deadlock():
    m = kernel([("o", "!g")], [
        '%w = "tk.warpid"() : () -> index', "%is0 = arith.cmpi eq, %w, %c0 : index",
        'scf.if %is0 {', '  "tk.sync"() : () -> () loc("k.py":7:9)',
        '} else {', '  "tk.sync"() : () -> () loc("k.py":9:9)', "}",
    ], warps=2)
    raises(m, [np.zeros((16, 16), np.float32)], r"deadlock at sync.*k.py:9:9", "k.py:7:9")


def test_laneid_is_refused_at_the_op():
    m = kernel([("o", "!g")], ['%l = "tk.laneid"() : () -> index loc("k.py":3:5)'])
    raises(m, [np.zeros((16, 16), np.float32)], "tk.laneid is not supported by the interpreter",
           "k.py:3:5")


@pytest.mark.parametrize("coords,shape", [("%c0, %c0, %c2, %c0", (32, 16)),
                                          ("%c0, %c1, %c0, %c0", (32, 16)),
                                          ("%c0, %c0, %c0, %c1", (32, 16))])
def test_out_of_bounds_global_access_names_coordinate_and_shape(coords, shape):
    m = kernel([("a", "!g")], [
        f'%x = "tk.load"(%a, {coords}) : (!g, {IDX4}) -> !r loc("k.py":4:8)'])
    c = tuple(int(x.strip()[2:]) for x in coords.split(","))
    e = raises(m, [np.zeros(shape, np.float32)], "out of bounds", "k.py:4:8")
    assert str(c) in e.message and str((1, 1) + shape) in e.message


def test_group_op_called_by_part_of_its_group():
    m = kernel([("a", "!g")], [
        '%s = "tk.alloc"() : () -> !s', '%w = "tk.warpid"() : () -> index',
        "%is0 = arith.cmpi eq, %w, %c0 : index", "scf.if %is0 {",
        f'  "tk.group_load"(%s, %a, %c0, %c0, %c0, %c0) {{warps = 2 : i64}} : (!s, !g, {IDX4}) -> () '
        'loc("k.py":5:3)', "}", '"tk.sync"() : () -> ()'], warps=2)
    raises(m, [np.zeros((16, 16), np.float32)], "only 1 of the 2 warps", "k.py:5:3")


def test_group_warps_disagreeing_on_coordinates():
    m = kernel([("a", "!g")], [
        '%s = "tk.alloc"() : () -> !s', '%w = "tk.warpid"() : () -> index',
        f'"tk.group_load"(%s, %a, %c0, %c0, %w, %c0) {{warps = 2 : i64}} : (!s, !g, {IDX4}) -> () '
        'loc("k.py":5:3)'], warps=2)
    raises(m, [np.zeros((32, 16), np.float32)], "disagree on coordinates", "k.py:5:3")


def test_malformed_mma_is_refused_before_running():
    m = kernel([("o", "!g")], [
        '%a = "tk.zero"() : () -> !rb', '%c = "tk.zero"() : () -> !r',
        '%d = "tk.mma_ab"(%a, %a, %c) : (!rb, !rb, !r) -> !r loc("k.py":6:2)',
    ], aliases={**ALIASES, "rb": RT("bf16", 16, 16).text()})
    raises(m, [np.zeros((16, 16), np.float32)], "wants a in 'row' and b in 'col'", "k.py:6:2")


def test_unknown_op():
    m = kernel([("o", "!g")], ["%one = arith.constant 1.0 : f32",
                               '%x = math.sqrt %one : f32 loc("k.py":2:2)'])
    raises(m, [np.zeros((16, 16), np.float32)], "does not know the op 'math.sqrt'", "k.py:2:2")


def test_numpy_failure_is_located():
    m = kernel([("n", "i32")], ['%z = arith.constant 0 : i32',
                                '%q = arith.divsi %n, %z : i32 loc("k.py":8:1)'])
    raises(m, [3], "ZeroDivisionError", "k.py:8:1")


SIG = [("a", "!gb"), ("s", "f32"), ("n", "i32")]
SIG_ALIASES = {"gb": GL("bf16", 1, 1, -1, 32).text()}


@pytest.mark.parametrize("args,match", [
    ([np.zeros((4, 32), np.float64), 1.0, 1], "must be a float32 array, got float64"),
    ([np.zeros((4, 32), np.float16), 1.0, 1], "must be a float32 array, got float16"),
    ([np.zeros((4, 16), np.float32), 1.0, 1], r"dim c .* must be 32, found 16"),
    ([np.zeros((2, 2, 2, 4, 32), np.float32), 1.0, 1], "rank 1 to 4, found rank 5"),
    ([[0.0] * 32, 1.0, 1], "must be a numpy array, got list"),
    ([np.zeros((4, 32), np.float32), "x", 1], "'s' .*expected a real number, found str"),
    ([np.zeros((4, 32), np.float32), 1.0, 1.5], "'n' .*expected an int, found float"),
    ([np.zeros((4, 32), np.float32), 1.0, 2**40], "'n' .*does not fit int32"),
    ([np.zeros((4, 32), np.float32), 1.0], "takes 3 arguments"),
])
def test_argument_checks(args, match):
    m = kernel_module(SIG, "", aliases=SIG_ALIASES)
    raises(m, args, match)


def test_kernel_selection():
    text = kernel_module(SIG, "", aliases=SIG_ALIASES)
    with pytest.raises(TkcError, match="named 'nope', found 0"):
        run(text, [np.zeros((4, 32), np.float32), 1.0, 1], kernel="nope")
    run(text, [np.zeros((4, 32), np.float32), 1.0, 1], kernel="k")


# ---- speed: a 128x128x128 bf16 GEMM, 4 warps, 64x64 block tiles

def gemm_module():
    aliases = {"g": GL("bf16", 1, 1, -1, -1).text(), "go": GL("f32", 1, 1, -1, -1).text(),
               "sa": ST("bf16", 64, 32).text(), "sb": ST("bf16", 32, 64).text(),
               "ra": RT("bf16", 32, 32).text(), "rb": RT("bf16", 32, 32, "col").text(),
               "rc": RT("f32", 32, 32).text()}
    return kernel_module([("a", "!g"), ("b", "!g"), ("c", "!go")], "\n".join([
        '%as = "tk.alloc"() : () -> !sa', '%bs = "tk.alloc"() : () -> !sb',
        '%bx = "tk.block_idx"() {dim = "x"} : () -> index',
        '%by = "tk.block_idx"() {dim = "y"} : () -> index',
        '%w = "tk.warpid"() : () -> index',
        "%wm = arith.divui %w, %c2 : index", "%wn = arith.remui %w, %c2 : index",
        '%kd = "tk.dim"(%a) {axis = "c"} : (!g) -> index', "%c32 = arith.constant 32 : index",
        "%nk = arith.ceildivsi %kd, %c32 : index", '%z = "tk.zero"() : () -> !rc',
        "%acc = scf.for %k = %c0 to %nk step %c1 iter_args(%c_in = %z) -> (!rc) {",
        f'  "tk.group_load"(%as, %a, %c0, %c0, %by, %k) {{warps = 4 : i64}} : (!sa, !g, {IDX4}) -> ()',
        f'  "tk.group_load"(%bs, %b, %c0, %c0, %k, %bx) {{warps = 4 : i64}} : (!sb, !g, {IDX4}) -> ()',
        '  "tk.sync"() : () -> ()',
        '  %ar = "tk.load"(%as, %wm, %c0) : (!sa, index, index) -> !ra',
        '  %br = "tk.load"(%bs, %c0, %wn) : (!sb, index, index) -> !rb',
        '  %d = "tk.mma_ab"(%ar, %br, %c_in) : (!ra, !rb, !rc) -> !rc',
        '  "tk.sync"() : () -> ()', "  scf.yield %d : !rc", "}",
        "%r0 = arith.muli %by, %c2 : index", "%r = arith.addi %r0, %wm : index",
        "%q0 = arith.muli %bx, %c2 : index", "%q = arith.addi %q0, %wn : index",
        f'"tk.store"(%c, %acc, %c0, %c0, %r, %q) : (!go, !rc, {IDX4}) -> ()',
    ]), aliases=aliases, warps=4, grid=["c.c // 64", "c.r // 64", "1"])


def test_gemm_is_right_and_fast():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 128, 128), np.float32)
    c = np.zeros((128, 128), np.float32)
    m = gemm_module()
    start = time.perf_counter()
    run(m, [a, b, c])
    elapsed = time.perf_counter() - start
    want = ref_bf16(a).astype(np.float64) @ ref_bf16(b).astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
    assert elapsed < 2.0, f"interpreting a 128^3 GEMM took {elapsed:.2f} s"


def test_same_numbers_after_the_tile_pipeline():
    """tk-layout-selection picks swizzles; swizzles never change values."""
    from tkc.pass_pipeline import run_pipeline
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 128, 64), np.float32)
    b = b.reshape(64, 128)
    before, after = np.zeros((2, 128, 128), np.float32)
    m = gemm_module()
    run(m, [a, b, before])
    run_pipeline(m, "tk-verify,tk-layout-selection")
    assert '"auto"' not in str(m) and '"64b"' in str(m)
    run(m, [a, b, after])
    np.testing.assert_array_equal(after, before)
    assert not np.isnan(after).any()


def test_loop_with_zero_step_is_an_error_not_a_hang():
    m = kernel([("n", "i32")], ["%i = arith.index_cast %n : i32 to index",
                                "scf.for %k = %c0 to %c4 step %i {", "}"])
    raises(m, [0], "step must be positive")
