"""Whole-tile requirements: a kernel that counts tiles by floor division (a
grid `c.r // 64`, a loop `tkc.range(a.c // 64)`) or declares a multiple
(`divisible={"K": 256}`) gets it in the manifest's `divisible`, and ragged
shapes are refused (interpreter here, runtime on the GPU) instead of being
silently cut short."""
import numpy as np
import pytest

import tkc
from tkc import f32, gl, rt
from tkc.diagnostics import TkcError
from tkc.ops import load, store, zero

pytest.importorskip("mlir")


@tkc.kernel(warps=1, grid=lambda a, o: (o.r // 16,))
def row_sums(a: gl(f32, 1, 1, None, None), o: gl(f32, 1, 1, None, 16)):
    """o[16-row tile i] = sum over the 16-column tiles of a's rows."""
    i = tkc.block_idx.x
    acc = zero(rt(f32, 16, 16))
    for j in tkc.range(a.c // 16):
        acc = acc + load(rt(f32, 16, 16), a, (0, 0, i, j))
    store(o, acc, (0, 0, i, 0))


def _divisible(kernel):
    from tkc.lowering.requirements import divisible
    m = kernel.trace()
    return divisible(m.body.operations[0])


def test_loop_over_whole_tiles_requires_a_multiple():
    assert "tk.divisible = {a.c = 16 : i64}" in row_sums.tile_ir()
    assert _divisible(row_sums) == {0: [1, 1, 16, 16], 1: [1, 1, 16, 16]}


def test_ragged_shapes_are_refused_not_cut_short():
    a = np.ones((32, 40), np.float32)  # 40 columns: 2.5 tiles
    with pytest.raises(TkcError, match=r"dim c .* = 40 must be a multiple of 16"):
        row_sums.interpret(a, np.zeros((32, 16), np.float32))
    a = np.arange(32 * 48, dtype=np.float32).reshape(32, 48)
    o = np.zeros((32, 16), np.float32)
    row_sums.interpret(a, o)
    np.testing.assert_array_equal(o, a[:, :16] + a[:, 16:32] + a[:, 32:])


def test_grid_floor_division_requires_a_multiple():
    with pytest.raises(TkcError, match=r"dim r .* = 24 must be a multiple of 16"):
        row_sums.interpret(np.ones((24, 16), np.float32), np.zeros((24, 16), np.float32))


def test_declared_multiple_by_dim_name():
    @tkc.kernel(divisible={"N": 64})
    def k(a: gl(f32, 1, 1, 16, "N"), b: gl(f32, 1, 1, 16, "N")):
        store(b, load(rt(f32, 16, 16), a, (0, 0, 0, 0)), (0, 0, 0, 0))
    assert _divisible(k) == {0: [1, 1, 16, 64], 1: [1, 1, 16, 64]}
    with pytest.raises(TkcError, match=r"dim c .* = 32 must be a multiple of 64"):
        k.interpret(np.ones((16, 32), np.float32), np.ones((16, 32), np.float32))


def test_bad_declarations():
    with pytest.raises(TkcError, match="divisible must map dim names to positive ints"):
        tkc.kernel(divisible={"N": 0})(lambda a: None)

    @tkc.kernel(divisible={"Q": 64})
    def k(a: gl(f32, 1, 1, 16, "N")):
        store(a, zero(rt(f32, 16, 16)), (0, 0, 0, 0))
    with pytest.raises(TkcError, match="'Q', which is neither a dim name"):
        k.build()


@tkc.kernel(divisible={"Hq": "Hkv"}, grid=lambda q, k: (q.d,))
def grouped_copy(q: gl(f32, 1, "Hq", 16, 16), k: gl(f32, 1, "Hkv", 16, 16)):
    """k's head h // (Hq / Hkv) into q's head h (the GQA head mapping)."""
    h = tkc.block_idx.x
    store(q, load(rt(f32, 16, 16), k, (0, h // (q.d // k.d), 0, 0)), (0, h, 0, 0))


def test_declared_relation_between_dims():
    """divisible={"Hq": "Hkv"}: the manifest's `multiples`, checked at launch
    with both arguments and sizes named (interpreter and runtime alike)."""
    from tkc.lowering.requirements import multiples
    assert 'tk.divisible = {Hq = "Hkv"}' in grouped_copy.tile_ir()
    module = grouped_copy.trace()
    assert multiples(module.body.operations[0]) == [["Hq", "Hkv"]]
    k = np.arange(2 * 256, dtype=np.float32).reshape(1, 2, 16, 16)
    q = np.zeros((1, 6, 16, 16), np.float32)
    grouped_copy.interpret(q, k)
    assert (q[0, :3] == k[0, 0]).all() and (q[0, 3:] == k[0, 1]).all()
    with pytest.raises(TkcError, match=r"dim d of argument 0 'q' \(Hq = 5\) must be a multiple "
                                       r"of dim d of argument 1 'k' \(Hkv = 2\)"):
        grouped_copy.interpret(np.zeros((1, 5, 16, 16), np.float32), k)


def test_runtime_checks_relations():
    from tkc.runtime.args import Signature
    from tkc.runtime.artifact import validate_manifest
    m = {"version": 1, "kernel": "g", "target": "sm_90a", "warps": 1, "block": [32, 1, 1],
         "grid": ["1", "1", "1"], "shared_bytes": 0, "multiples": [["Hq", "Hkv"]],
         "params": [{"name": n, "kind": "gl", "dtype": "f32", "dims": [1, None, 16, 16],
                     "names": [None, h, None, None]} for n, h in (("q", "Hq"), ("k", "Hkv"))]}
    sig = Signature(validate_manifest(m))
    ok = [np.zeros((1, h, 16, 16), np.float32) for h in (4, 2)]
    sig.bind(ok, host_ok=True)
    with pytest.raises(TkcError, match=r"\(Hq = 3\) must be a multiple of .* \(Hkv = 2\)"):
        sig.bind([np.zeros((1, 3, 16, 16), np.float32), ok[1]], host_ok=True)
    with pytest.raises(TkcError, match="'multiples' must be"):
        validate_manifest({**m, "multiples": [["Hq", "X"]]})


def test_bad_relations():
    with pytest.raises(TkcError, match="or to other dim names"):
        tkc.kernel(divisible={"N": "N"})(lambda a: None)
    with pytest.raises(TkcError, match="or to other dim names"):
        tkc.kernel(divisible={"a.c": "N"})(lambda a: None)

    @tkc.kernel(divisible={"N": "Q"})
    def k(a: gl(f32, 1, 1, 16, "N")):
        store(a, zero(rt(f32, 16, 16)), (0, 0, 0, 0))
    with pytest.raises(TkcError, match="relates two dims: both must be dim names"):
        k.build()
