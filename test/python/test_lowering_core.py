"""tk-lower-to-nvvm framework tests: the kernel's llvm.func, its manifest,
loop-carried and if-carried tiles (run on lanesim's 32 simulated lanes),
located errors."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tkc.diagnostics import TkcError
from tkc.dialect import context, ops
from tkc.dialect.types import RT
from tkc.lowering import lower_module

from lanesim import bf16, build, run_kernel, to_ptx

pytest.importorskip("mlir")
from mlir import ir  # noqa: E402

def _parse(text):
    ctx = context()
    with ctx:
        return ir.Module.parse(text)


KERNEL = '''
func.func @k(%a: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, %s: f32, %n: i32)
    attributes {tk.kernel, tk.warps = 2 : i64, tk.arg_names = ["a", "s", "n"],
                tk.grid = ["cdiv(a.r, 16)", "1", "n"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %x = arith.addf %s, %s : f32
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %x) -> (f32) {
    %y = arith.mulf %acc, %s : f32
    scf.yield %y : f32
  }
  return
}
'''


def test_kernel_becomes_llvm_func_in_gpu_module():
    m = _parse(KERNEL)
    with m.context:
        lower_module(m)
        assert m.operation.verify()
    text = str(m)
    assert "gpu.container_module" in text
    assert re.search(r'gpu.module @tkc \[#nvvm.target<O = 3, chip = "sm_90a", features = "\+ptx81">\]', text)
    assert "func.func" not in text
    sig = re.search(r"llvm.func @k\(([^)]*)\)", text)[1]
    # gl with one runtime dim: ptr<1> + i32; scalars as they are
    assert [p.split(": ")[1] for p in sig.split(", ")] == ["!llvm.ptr<1>", "i32", "f32", "i32"]
    assert "nvvm.kernel" in text and "nvvm.maxntid = array<i32: 64, 1, 1>" in text


def test_manifest_attribute():
    m = _parse(KERNEL)
    with m.context:
        lower_module(m)
        gm = [o for o in m.body.operations if o.operation.name == "gpu.module"][0]
        fn = gm.regions[0].blocks[0].operations[0].operation
        man = json.loads(ir.StringAttr(fn.attributes["tkc.manifest"]).value)
    assert man["kernel"] == "k" and man["warps"] == 2 and man["block"] == [64, 1, 1]
    assert man["grid"] == ["cdiv(a.r, 16)", "1", "n"]
    assert man["params"][0] == {"name": "a", "kind": "gl", "dtype": "f32", "dims": [1, 1, None, 64],
                                "names": [None] * 4, "divisible": [1, 1, 1, 1], "writes": False}
    assert man["params"][1:] == [{"name": "s", "kind": "scalar", "dtype": "f32"},
                                 {"name": "n", "kind": "scalar", "dtype": "i32"}]
    assert man["shared_bytes"] == 0 and man["cluster"] == [1, 1, 1] and man["tensor_maps"] == []


def test_scalar_loop_reaches_ptx():
    m = _parse(KERNEL)
    with m.context:
        ptx = to_ptx(m)
    assert ".entry k(" in ptx and ".maxntid 64, 1, 1" in ptx


def test_rt_loop_carried_values_are_flattened(lane_major_io):
    """scf.for carrying an rt: 8 f32 iter_args; three iterations of x + 1."""
    v = RT("f32", 16, 16, "row")

    def body(x):
        from mlir.dialects import arith, scf
        c = [arith.constant(ir.IndexType.get(), n) for n in (0, 3, 1)]
        loop = scf.ForOp(c[0], c[1], c[2], [x])
        with ir.InsertionPoint(loop.body):
            one = ops.init("ones", v)
            scf.YieldOp([ops.binary("add", loop.inner_iter_args[0], one)])
        return [loop.results[0]]
    x = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    out, = run_kernel([v], [v], body, [x])
    np.testing.assert_allclose(out, x + 3, rtol=1e-6)
    m = build([v], [v], body)
    with m.context:
        lower_module(m)
    assert re.search(r"scf.for .* iter_args\((%\w+ = %\w+(, )?){8}\) -> \((f32(, )?){8}\)", str(m))


def test_rt_if_results_are_flattened(lane_major_io):
    v = RT("bf16", 16, 32, "row")

    def body(x, s):
        from mlir.dialects import arith, scf
        cond = arith.cmpf(arith.CmpFPredicate.OGT, s, arith.constant(ir.F32Type.get(), 0.0))
        branch = scf.IfOp(cond, [v.mlir()], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([ops.unary("neg", x)])
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([x])
        return [branch.results[0]]
    x = bf16(np.random.default_rng(1).standard_normal((16, 32)))
    for s, want in ((1.0, -x), (-1.0, x)):
        out, = run_kernel([v], [v], body, [x], scalars=(s,))
        np.testing.assert_array_equal(out, want)


def test_op_without_rule_is_a_located_error(monkeypatch):
    from tkc.lowering import core
    import tkc.lowering.walker  # noqa: F401  (importing it registers every rule)
    monkeypatch.delitem(core.RULES, "tk.zero")
    m = _parse('''
func.func @k() attributes {tk.kernel} {
  %z = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 16 : i64, "row"> loc("kern.py":12:5)
  return
}''')
    with m.context, pytest.raises(TkcError) as e:
        lower_module(m)
    assert "no lowering for tk.zero" in str(e.value) and e.value.where == "kern.py:12:5"


def test_bad_kernel_argument_is_a_located_error():
    m = _parse('''
func.func @k(%x: f16) attributes {tk.kernel} {
  return
} loc("kern.py":3:1)''')
    with m.context, pytest.raises(TkcError) as e:
        lower_module(m)
    assert "must be a gl, f32 or i32" in str(e.value) and e.value.where == "kern.py:3:1"


def test_shared_tile_through_loop_is_a_located_error():
    m = _parse('''
func.func @k() attributes {tk.kernel} {
  %s = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 16 : i64, "none">
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%a = %s) -> (!tk.st<bf16, 16 : i64, 16 : i64, "none">) {
    scf.yield %a : !tk.st<bf16, 16 : i64, 16 : i64, "none">
  } loc("kern.py":9:3)
  return
}''')
    with m.context, pytest.raises(TkcError) as e:
        lower_module(m)
    assert e.value.where == "kern.py:9:3"


def test_pass_is_registered():
    from tkc.pass_pipeline import all_passes
    assert "tk-lower-to-nvvm" in all_passes()
