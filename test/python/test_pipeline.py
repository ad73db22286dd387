"""run_pipeline: splitting, tk and upstream entries interleaved, IR dumps, errors."""
from __future__ import annotations

import io

import pytest

from tkc.diagnostics import TkcError
from tkc.pass_pipeline import run_pipeline, split_pipeline
from tkc.passes.registry import PASSES, register

TEXT = '''
func.func @k() attributes {tk.kernel} {
  %c1 = arith.constant 1 : index
  %c2 = arith.addi %c1, %c1 : index
  %s = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 32 : i64, "auto">
  %x = "tk.load"(%s, %c2, %c2) : (!tk.st<bf16, 16 : i64, 32 : i64, "auto">, index, index) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  return
}
'''


def _module(text=TEXT):
    from mlir import ir

    import tkc.dialect as d
    return ir.Module.parse(text, d.context())


@pytest.mark.parametrize("text, entries", [
    ("a,b", ["a", "b"]),
    (" a , b ,", ["a", "b"]),
    ("gpu.module(x,y),z", ["gpu.module(x,y)", "z"]),
    ("cse{a=1,b=2},func.func(canonicalize{max-iterations=2,x=[1,2]})",
     ["cse{a=1,b=2}", "func.func(canonicalize{max-iterations=2,x=[1,2]})"]),
    ("", []),
])
def test_split(text, entries):
    assert split_pipeline(text) == entries


@pytest.mark.parametrize("text", ["a(b", "a)b", "a{b)", "a[b"])
def test_split_unbalanced(text):
    with pytest.raises(TkcError, match="unbalanced"):
        split_pipeline(text)


def test_tk_and_upstream_passes_interleave():
    m = _module()
    run_pipeline(m, "tk-verify,canonicalize,tk-layout-selection,cse")
    text = str(m)
    assert "arith.addi" not in text          # canonicalize folded it
    assert '"64b"' in text and '"auto"' not in text  # 32 bf16 = 64 bytes


def test_builtin_module_wrapper_is_accepted():
    m = _module()
    run_pipeline(m, "builtin.module(canonicalize,tk-layout-selection)")
    assert "arith.addi" not in str(m) and '"64b"' in str(m)


def test_entries_run_in_order():
    """A recording tk pass sees the IR as the previous entry left it."""
    seen = []

    @register("test-record", "records whether arith.addi is present")
    def record(op):
        seen.append("arith.addi" in str(op))
    try:
        run_pipeline(_module(), "test-record,canonicalize,test-record")
    finally:
        del PASSES["test-record"]
    assert seen == [True, False]


def test_print_ir_after_all_goes_to_out():
    out = io.StringIO()
    m = _module()
    run_pipeline(m, "tk-layout-selection,canonicalize", print_ir_after_all=True, out=out)
    dump = out.getvalue()
    first = dump.index("// -----// IR Dump After tk-layout-selection //----- //")
    second = dump.index("// -----// IR Dump After canonicalize //----- //")
    assert first < second
    assert "arith.addi" in dump[first:second] and "arith.addi" not in dump[second:]
    assert dump[second:].strip().endswith(str(m).strip())


def test_no_dump_without_flag():
    out = io.StringIO()
    run_pipeline(_module(), "canonicalize", out=out)
    assert out.getvalue() == ""


def test_unknown_pass():
    with pytest.raises(TkcError, match="unknown pass or bad pipeline entry 'frobnicate'"):
        run_pipeline(_module(), "tk-verify,frobnicate")


def test_verifier_errors_propagate_located():
    from mlir import ir
    bad = TEXT.replace('%c1 = arith.constant 1 : index',
                       '%c1 = arith.constant 1 : index loc("k.py":3:7)')
    bad = bad.replace('"tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 32 : i64, "auto">\n',
                      '"tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 32 : i64, "auto"> loc("k.py":4:9)\n')
    bad = bad.replace('-> !tk.rt<bf16, 16 : i64, 32 : i64, "row">\n',
                      '-> !tk.rt<bf16, 16 : i64, 48 : i64, "row"> loc("k.py":5:9)\n')
    m = _module(bad)
    assert isinstance(m, ir.Module)
    with pytest.raises(TkcError) as info:
        run_pipeline(m, "canonicalize,tk-verify,tk-layout-selection")
    assert str(info.value).startswith("k.py:5:9: error: load: rt<bf16, 16, 48, row> is not a subtile")
    assert '"auto"' in str(m)  # the pipeline stopped at tk-verify


def test_broken_ir_from_a_tk_pass_is_caught_after_it():
    """A Python pass that breaks the IR is named, not a later stage."""
    @register("test-break", "gives an index constant an i32 value")
    def brk(op):
        from mlir import ir
        body = op.regions[0].blocks[0].operations[0].regions[0].blocks[0]
        const = next(o.operation for o in body.operations if o.operation.name == "arith.constant")
        const.attributes["value"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1)
    try:
        with pytest.raises(TkcError, match="IR invalid after test-break"):
            run_pipeline(_module(), "test-break")
    finally:
        del PASSES["test-break"]
