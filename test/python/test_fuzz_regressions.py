"""Mismatches and crashes the fuzzer (tkc/fuzz, docs/fuzz.md) found, each as
the smallest kernel that shows it, against numpy. Fixed ones pass; open ones
are xfail(strict=True) with the reason, so their fix turns them into
failures to flip."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.frontend.kernel import kernels_in_file
from tkc.ops import group_load, load, store, subtile, zero

import fuzz_cases  # test/python, on sys.path (conftest.py)


@tkc.kernel(warps=1, grid=lambda x, o: (1,))
def rebound_in_if_and_else_in_a_loop(x: gl(f32, 1, 1, 16, 16), o: gl(f32, 1, 1, 16, 16)):
    """seed 20260 program 374: both branches of an if/else inside a tkc.range
    rebind an outer tile to a value that does not depend on it. The loop took
    the branch's new handle for an unrelated tile, so the name had no value
    after the loop ("was assigned inside the tkc.range loop ... and has no
    value after it"). Fixed in frontend/control.py (_Capture.finals)."""
    a = load(rt(f32, 16, 16), x, (0, 0, 0, 0))
    b = a + 1.0
    for i in tkc.range(3):
        with tkc.if_(i > 0):
            a = b * 2.0
        with tkc.else_():
            a = b * 0.5
    store(o, a, (0, 0, 0, 0))


def test_a_tile_rebound_in_if_and_else_in_a_loop_is_carried():
    x = np.random.default_rng(0).uniform(-1, 1, (1, 1, 16, 16)).astype(np.float32)
    o = np.zeros_like(x)
    rebound_in_if_and_else_in_a_loop.interpret(x, o)
    np.testing.assert_array_equal(o, (x + 1) * 2)


@tkc.kernel(warps=1, grid=lambda x, o: (1,))
def rebound_in_if_and_else_then_in_a_nested_loop(x: gl(f32, 1, 1, 16, 16), o: gl(f32, 1, 1, 16, 16)):
    """seed 1 program 9577: as above, then a nested tkc.range updates the
    tile (`a = a + b`): the nested loop's handle is an alias of the if's,
    which is an alias of the outer loop's, so the outer loop carries it.
    Fixed in frontend/control.py (_alias_of)."""
    a = load(rt(f32, 16, 16), x, (0, 0, 0, 0))
    b = a + 1.0
    for i in tkc.range(3):
        with tkc.if_(i > 0):
            a = b * 2.0
        with tkc.else_():
            a = b * 0.5
        for j in tkc.range(2):
            a = a + b
    store(o, a, (0, 0, 0, 0))


def test_a_tile_rebound_in_if_and_else_then_in_a_nested_loop_is_carried():
    x = np.random.default_rng(0).uniform(-1, 1, (1, 1, 16, 16)).astype(np.float32)
    o = np.zeros_like(x)
    rebound_in_if_and_else_then_in_a_nested_loop.interpret(x, o)
    np.testing.assert_array_equal(o, (x + 1) * 4)


@tkc.kernel(warps=8, grid=lambda a, b, y, o: (1,))
def group_load_beside_a_producer(a: gl(bf16, 1, 1, 128, 64), b: gl(bf16, 1, 1, 64, 64),
                                 y: gl(f32, 1, 1, 128, 64), o: gl(f32, 1, 1, 128, 64)):
    """seed 9 (warpgroup programs): tma.loads make tk-pipeline-staging add a
    producer warpgroup, 8 consumer warps + 4; the group_load of all the
    kernel's (8) warps then "did not divide the block's 12 warps" in the
    verifier, the interpreter and the lowering, though only the 8 consumers
    run it. Fixed: staging records tk.consumer_warps, which group ops'
    groups tile (dialect.kernel.group_warps)."""
    a_s, b_s, y_s = st(bf16, 128, 64), st(bf16, 64, 64), st(f32, 128, 64)
    tma.load(a_s, a, (0, 0, 0, 0))
    tma.load(b_s, b, (0, 0, 0, 0))
    acc = warpgroup.mma_async_wait(warpgroup.mma_AB(subtile(a_s, 64, 64, (tkc.warpgroupid(), 0)), b_s,
                                                    zero(rt(f32, 16, 64))))
    group_load(y_s, y, (0, 0, 0, 0))
    tkc.sync()
    store(o, acc + load(rt(f32, 16, 64), y_s, (tkc.warpid(), 0)), (0, 0, tkc.warpid(), 0))


def test_a_group_load_beside_a_pipeline_producer(artifact_cache):
    art = group_load_beside_a_producer.build()   # the lowering takes the 8 consumers' group too
    assert art.manifest["warps"] == 12 and art.cubin[:4] == b"\x7fELF"
    rng = np.random.default_rng(1)
    from tkc.fuzz.program import round_bf16
    a = round_bf16(rng.uniform(-1, 1, (1, 1, 128, 64)).astype(np.float32))
    b = round_bf16(rng.uniform(-1, 1, (1, 1, 64, 64)).astype(np.float32))
    y = rng.uniform(-1, 1, (1, 1, 128, 64)).astype(np.float32)
    o = np.zeros_like(y)
    group_load_beside_a_producer.interpret(a, b, y, o)
    np.testing.assert_allclose(o[0, 0], a[0, 0] @ b[0, 0] + y[0, 0], rtol=1e-5, atol=1e-4)


# seed 2 programs 764 and 1881 (this is 1881, its unused argument
# dropped): wrong values on the H200, or an illegal address. A persistent
# kernel's once-per-item tma.loads get two slots, by the item's parity, so
# the wgmma descriptors have a run-time part, `mul.wide.u32` in the PTX.
# Each descriptor was that field plus its constant in one `add.s64`;
# ptxas 12.9 and 13.0 then add only the low word, for two or more k steps,
# and leave the high word (SBO, swizzle) of the first HGMMA's descriptors
# in uniform registers nothing writes. Fixed in lowering/wgmma.py: the
# descriptor is joined from 32-bit words (`mov.b64 {lo, hi}`).
# The kernel is the lit test's (test/lit/lowering/wgmma-ring-slot.py), which
# checks the descriptors' PTX.
persistent_once_loaded_wgmma = {k.name: k for k in kernels_in_file(
    Path(__file__).resolve().parents[1] / "lit" / "lowering" / "wgmma-ring-slot.py")}["ring_slot_wgmma"]


def test_a_persistent_wgmma_of_once_loaded_tiles_interprets():
    from tkc.fuzz.program import round_bf16
    rng = np.random.default_rng(2)
    a = round_bf16(rng.uniform(-1, 1, (1, 1, 64, 128)).astype(np.float32))
    b = round_bf16(rng.uniform(-1, 1, (1, 1, 64, 128)).astype(np.float32))
    o, m = np.zeros((1, 1, 128, 80), np.float32), np.zeros((1, 1, 128, 80), np.float32)
    persistent_once_loaded_wgmma.interpret(a, b, o, m)
    want = (a[0, 0].T @ b[0, 0])[:, :80]
    np.testing.assert_allclose(o[0, 0], want, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(m, o)


def _sass(kernel):
    pytest.importorskip("mlir")
    from tkc.sass import cuobjdump, disassemble
    import shutil
    if shutil.which("ptxas") is None or cuobjdump() is None:
        pytest.skip("needs ptxas and cuobjdump")
    from tkc.compiler import compile_kernel
    return disassemble(compile_kernel(kernel.trace()).cubin)


def test_a_persistent_wgmma_of_once_loaded_tiles_sets_its_descriptors():
    """The SASS's first HGMMA reads no descriptor register that nothing
    wrote (with ptxas 13.0 it read UR23: B's high word)."""
    from tkc.sass import unset_descriptor_registers
    assert unset_descriptor_registers(_sass(persistent_once_loaded_wgmma)) == []


@pytest.mark.parametrize("program", fuzz_cases.PROGRAMS, ids=lambda p: p.name)
def test_the_fuzz_programs_wgmma_descriptors_are_set(program):
    from tkc.fuzz.program import kernel_of
    from tkc.sass import unset_descriptor_registers
    assert unset_descriptor_registers(_sass(kernel_of(program))) == []


@tkc.kernel(warps=1, grid=lambda count, x, o: (1, 3, 2), persistent=True, ragged=("count", 16))
def ragged_copy(count: gl(tkc.i32, 1, 1, 1, 2), x: gl(f32, 1, 1, 48, 16), o: gl(f32, 1, 2, 48, 16)):
    """seed 20260 (ragged programs, tkc/fuzz/ragged.py): the interpreter ran
    the traced IR's dead items too (tk.ragged took effect only once
    tk-grid-ordering wrote the item loop), so that pass changed the outputs
    of every program with a dead item. Fixed in interpreter/machine.py
    (_live_rows)."""
    bz, by = tkc.block_idx.z, tkc.block_idx.y
    store(o, load(rt(f32, 16, 16), x, (0, 0, by, 0)), (0, bz, by, 0))


def test_ragged_items_run_alike_before_and_after_grid_ordering():
    from tkc.compiler import TILE_PIPELINE
    from tkc.interpreter import run
    from tkc.pass_pipeline import run_pipeline
    count = np.array([17, -3], np.int32).reshape(1, 1, 1, 2)   # 2 live row blocks, then none
    x = np.random.default_rng(0).uniform(-1, 1, (1, 1, 48, 16)).astype(np.float32)
    want = np.full((1, 2, 48, 16), 0.5, np.float32)
    want[0, 0, :32] = x[0, 0, :32]
    module = ragged_copy.trace()
    for passes in (None, TILE_PIPELINE):
        if passes:
            run_pipeline(module, passes)
        o = np.full((1, 2, 48, 16), 0.5, np.float32)
        run(module, [count, x, o])
        np.testing.assert_array_equal(o, want)
