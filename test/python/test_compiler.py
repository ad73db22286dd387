"""tkc.compiler: stages, resuming from printed IR, ptxas and its report, compile_kernel;
and the SASS of a cubin kept in the artifact cache (tkc.sass.disassemble)."""
from __future__ import annotations

import pytest

from tkc import compiler
from tkc.diagnostics import TkcError

GL = "!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 32 : i64>"
ST = '!tk.st<bf16, 32 : i64, 32 : i64, "auto">'
KERNEL = f'''
func.func @roundtrip(%a: {GL}, %o: {GL}) attributes {{tk.kernel, tk.warps = 2 : i64,
    tk.grid = ["cdiv(a.r, 32)", "1", "1"], tk.arg_names = ["a", "o"]}} {{
  %s = "tk.alloc"() : () -> {ST}
  %c0 = arith.constant 0 : index
  %bx = "tk.block_idx"() {{dim = "x"}} : () -> index
  %w = "tk.warpid"() : () -> index
  "tk.group_load"(%s, %a, %c0, %c0, %bx, %c0) {{warps = 2 : i64}} : ({ST}, {GL}, index, index, index, index) -> ()
  "tk.sync"() : () -> ()
  %r = "tk.load"(%s, %w, %c0) : ({ST}, index, index) -> !tk.rt<f32, 16 : i64, 32 : i64, "row">
  %row = arith.addi %bx, %bx : index
  %rr = arith.addi %row, %w : index
  "tk.store"(%o, %r, %c0, %c0, %rr, %c0) : ({GL}, !tk.rt<f32, 16 : i64, 32 : i64, "row">, index, index, index, index) -> ()
  return
}}
'''


def _module(text=KERNEL):
    from mlir import ir
    import tkc.dialect as d
    ctx = d.context()
    with ctx:
        return ir.Module.parse(text)


def test_stages_advance_in_order():
    m = _module()
    assert compiler.stage_of(m) == "tile"
    tile = compiler.compile_to(m, "tile")
    assert '"128b"' not in KERNEL and '"64b"' in tile  # layout selection ran (32 bf16 = 64 B rows)
    compiler.compile_to(m, "nvvm")
    assert compiler.stage_of(m) == "nvvm"
    compiler.compile_to(m, "llvm")
    assert compiler.stage_of(m) == "llvm"
    ptx = compiler.compile_to(m, "ptx")
    assert compiler.stage_of(m) == "ptx"
    assert ".target sm_90a" in ptx and ".entry roundtrip(" in ptx
    with pytest.raises(TkcError, match="already at stage 'ptx'"):
        compiler.compile_to(m, "nvvm")


def test_resumes_from_printed_nvvm_and_llvm():
    """The IR printed at a stage parses back and finishes the same way."""
    m = _module()
    nvvm_text = compiler.compile_to(m, "nvvm")
    llvm_text = compiler.compile_to(m, "llvm")
    ptx = compiler.compile_to(m, "ptx")
    assert compiler.compile_to(_module(nvvm_text), "ptx") == ptx
    assert compiler.compile_to(_module(llvm_text), "ptx") == ptx


def test_cubin_is_an_elf_without_spills():
    m = _module()
    cubin = compiler.compile_to(m, "cubin")
    assert cubin[:4] == b"\x7fELF"
    _, res = compiler.ptxas(compiler.compile_to(_module(), "ptx"))
    assert res["registers"] > 0 and res["spill_stores"] == 0 and res["spill_loads"] == 0


def test_print_ir_after_all_prints_every_stage():
    import io
    out = io.StringIO()
    compiler.compile_to(_module(), "ptx", print_ir_after_all=True, out=out)
    dumps = [ln for ln in out.getvalue().splitlines() if ln.startswith("// -----// IR Dump After")]
    names = " ".join(dumps)
    for entry in ("tk-verify", "tk-layout-selection", "tk-lower-to-nvvm", "convert-nvvm-to-llvm",
                  "gpu-module-to-binary"):
        assert entry in names


def test_unknown_stage_and_empty_input_are_errors():
    with pytest.raises(TkcError, match="unknown stage"):
        compiler.compile_to(_module(), "sass")
    with pytest.raises(TkcError, match="no kernel"):
        compiler.compile_to(_module("func.func @f() { return }"), "nvvm")


REPORT = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
    24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 512 bytes smem, 368 bytes cmem[0]
"""


def test_parse_resources():
    r = compiler.parse_resources(REPORT)
    assert (r["registers"], r["spill_stores"], r["spill_loads"], r["stack"], r["shared_static"]) == \
        (168, 8, 12, 24, 512)
    assert r["ptxas"] == REPORT.strip()
    assert compiler.parse_resources("")["registers"] == 0


def test_ptxas_reports_static_shared_and_fails_cleanly():
    ptx = (".version 8.0\n.target sm_90a\n.address_size 64\n"
           ".visible .entry z() { .shared .align 4 .b8 buf[64]; .reg .b32 r; "
           "mov.u32 r, buf; st.shared.u32 [r], r; ret; }\n")
    cubin, res = compiler.ptxas(ptx)
    assert cubin[:4] == b"\x7fELF" and res["shared_static"] == 64
    with pytest.raises(TkcError, match="ptxas failed"):
        compiler.ptxas(ptx.replace("ret;", "bogus;"))


def test_compile_kernel_manifest():
    from tkc.runtime.artifact import Artifact
    from tkc.runtime.cache import compiler_hash
    art = compiler.compile_kernel(_module(), key="k123")
    assert isinstance(art, Artifact) and art.name == "roundtrip"
    man = art.manifest
    assert man["warps"] == 2 and man["block"] == [64, 1, 1]
    assert man["grid"] == ["cdiv(a.r, 32)", "1", "1"]
    assert man["shared_bytes"] == 32 * 32 * 2
    a, o = man["params"]
    assert a == {"name": "a", "kind": "gl", "dtype": "bf16", "dims": [1, 1, None, 32],
                 "names": [None] * 4, "divisible": [1, 1, 32, 32], "writes": False}
    assert o["divisible"] == [1, 1, 16, 32] and o["writes"] and man["inplace"] == []
    assert man["resources"]["spill_stores"] == 0 and man["resources"]["registers"] > 0
    assert man["source"]["key"] == "k123" and man["source"]["compiler"] == compiler_hash()
    assert sorted(man["source"]["stages"]) == ["cubin", "ptx"]   # (runtime/reuse.py's index keys)
    assert art.cubin[:4] == b"\x7fELF" and ".entry roundtrip" in art.ptx
    assert "tk.kernel" in art.tile_ir


def test_timed_records_every_phase_of_a_compile():
    """pass_pipeline.timed collects each pipeline entry and ptxas in order
    (tkc.bench.compile_time's account); outside it nothing is kept, and an
    inner block leaves the outer one's record whole."""
    from tkc import pass_pipeline as pp
    pp.note("ptxas", 1.0)                                   # no block open: dropped
    with pp.timed() as outer:
        pp.note("before", 0.5)
        with pp.timed() as record:
            compiler.compile_kernel(_module())
        pp.note("after", 0.25)
    phases = [name for name, _ in record]
    assert phases == [*pp.split_pipeline(compiler.TILE_PIPELINE), compiler.LOWER_PASS,
                      compiler.UPSTREAM_PIPELINE, compiler.TO_PTX_PIPELINE, "ptxas"]
    assert all(0 <= seconds < 60 for _, seconds in record)
    assert outer == [("before", 0.5), ("after", 0.25)]


def test_the_compile_time_report_adds_up():
    from tkc.bench.compile_time import report
    text = report("gemm", [0.5, 0.7, 0.6], {compiler.TO_PTX_PIPELINE: [0.1, 0.2, 0.3], "ptxas": [0.3, 0.3, 0.3]})
    assert text.splitlines() == ["gemm: 600 ms a warm build (median of 3; 500-700)",
                                 "    200.0 ms  LLVM to PTX", "    300.0 ms  ptxas",
                                 "    100.0 ms  tracing, keys, the manifest (the rest)"]


def test_the_library_sample_report_adds_up():
    """sample_report: means over the drawn kernels, each phase's share of
    their sum, the rest what no phase timed."""
    from tkc.bench.compile_time import sample_report
    text = sample_report([0.2, 0.4, 0.6], {compiler.TO_PTX_PIPELINE: [0.1, 0.1, 0.1], "ptxas": [0.1, 0.2, 0.3]})
    assert text.splitlines() == ["library (3 kernels drawn): 400 ms a kernel (mean; median 400, 200-600)",
                                 "    100.0 ms   25%  LLVM to PTX", "    200.0 ms   50%  ptxas",
                                 "    100.0 ms   25%  tracing, keys, the manifest (the rest)"]


def test_the_compile_time_bench_draws_library_kernels(capsys, monkeypatch):
    """--library N: N kernels of the library (the list stubbed to three
    small ones here), each built once; a kernel named beside it is refused."""
    from tkc.bench import compile_time
    from tkc.kernels import layernorm
    import tkc.kernels
    monkeypatch.setattr(tkc.kernels, "library", lambda: [layernorm.layernorm_fwd(D) for D in (1024, 2048, 4096)])
    compile_time.main(["--library", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("library (2 kernels drawn): ")
    assert [line.split("  ")[-1] for line in lines[1:]][-3:] == ["LLVM to PTX", "ptxas",
                                                                 "tracing, keys, the manifest (the rest)"]
    shares = [int(line.split("%")[0].split()[-1]) for line in lines[1:]]
    assert 98 <= sum(shares) <= 102 and min(shares) >= 0
    with pytest.raises(SystemExit):
        compile_time.main(["--library", "2", "gemm"])
    assert "--library draws its kernels: name none" in capsys.readouterr().err


@pytest.mark.parametrize("declared, warned", [(0, True), (64, False), (32, True)])
def test_spill_warning_spares_a_declared_allowance(monkeypatch, capsys, declared, warned):
    """compile_kernel warns of spills beyond what the kernel declares
    (tkc.kernel(spills=N)): a library op's known spills say nothing its user
    can act on; more than declared, or loads with nothing declared, do."""
    real = compiler.ptxas

    def spilling(ptx, arch="sm_90a"):
        cubin, res = real(ptx, arch)
        return cubin, {**res, "spill_stores": 48, "spill_loads": 40}
    monkeypatch.setattr(compiler, "ptxas", spilling)
    art = compiler.compile_kernel(_module(), key="spill", spills=declared)
    err = capsys.readouterr().err
    assert ("spills registers (48 bytes stored, 40 loaded" in err) == warned, err
    assert ("it declares 32" in err) == (declared == 32)
    assert art.manifest["resources"]["spill_stores"] == 48   # recorded either way


def test_emitting_a_cubin_warns_of_spills_as_the_build_does(monkeypatch, capsys):
    """`tkc k.py --emit=cubin` (or sass): a kernel author reading what a change did sees
    the spills the build would report (the CLI's cubin was made silently)."""
    real = compiler.ptxas

    def spilling(ptx, arch="sm_90a"):
        cubin, res = real(ptx, arch)
        return cubin, {**res, "spill_stores": 28, "spill_loads": 40}
    monkeypatch.setattr(compiler, "ptxas", spilling)
    cubin = compiler.compile_to(_module(), "cubin")
    err = capsys.readouterr().err
    assert cubin[:4] == b"\x7fELF"
    assert "kernel 'roundtrip' spills registers (28 bytes stored, 40 loaded)" in err, err


def test_compile_kernel_runs_each_pipeline_once_and_prints_only_tile_ir(monkeypatch):
    """Compile time: every stage's pipeline once, in order (the tile passes
    once: they used to run twice), and no text of the lowered module (a MB
    for a GEMM, 40 ms to print, which nothing reads)."""
    from mlir import ir
    from tkc import pass_pipeline
    ran, printed = [], []
    real_run = pass_pipeline.run_pipeline
    monkeypatch.setattr(pass_pipeline, "run_pipeline",
                        lambda m, p, **kw: (ran.append(p), real_run(m, p, **kw))[1])
    m = _module()
    real_str = type(m).__str__
    monkeypatch.setattr(type(m), "__str__", lambda self: (printed.append(compiler.stage_of(self)),
                                                           real_str(self))[1])
    art = compiler.compile_kernel(m)
    assert ran == [compiler.TILE_PIPELINE, compiler.LOWER_PASS, compiler.UPSTREAM_PIPELINE,
                   compiler.TO_PTX_PIPELINE]
    assert printed == ["tile"] and "tk.kernel" in art.tile_ir
    assert isinstance(m, ir.Module)


def test_advance_moves_a_module_without_printing_it():
    m = _module()
    assert compiler.advance(m, "llvm") is None and compiler.stage_of(m) == "llvm"
    compiler.advance(m, "ptx")
    assert ".entry roundtrip(" in compiler.ptx_of(m)
    with pytest.raises(TkcError, match="already at stage 'ptx'"):
        compiler.advance(m, "nvvm")


def test_compile_kernel_rejects_other_targets():
    with pytest.raises(TkcError, match="unsupported target"):
        compiler.compile_kernel(_module(), target="sm_80")


def test_sass_is_kept_in_the_cache_by_cubin_and_tool(tmp_path, monkeypatch):
    """sass.disassemble runs cuobjdump once per cubin (and cuobjdump), then
    reads the SASS back from <cache>/sass/; another cubin runs it again."""
    import shutil
    import subprocess
    from tkc import sass
    if shutil.which("ptxas") is None or sass.cuobjdump() is None:
        pytest.skip("ptxas or cuobjdump not available")
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry z() { ret; }\n"
    cubin, other = compiler.ptxas(ptx)[0], compiler.ptxas(ptx.replace("z()", "y()"))[0]
    runs = []
    real = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: runs.append(cmd) or real(cmd, **kw))
    first = sass.disassemble(cubin)
    assert "Function : z" in first and "EXIT" in first and len(runs) == 1
    assert sass.disassemble(cubin) == first and len(runs) == 1           # read back
    assert [p.suffix for p in (tmp_path / "sass").iterdir()] == [".txt"]  # one entry, no partial file
    assert "Function : y" in sass.disassemble(other) and len(runs) == 2   # another cubin: cuobjdump again


def test_walk_is_the_pre_order_of_nested_ops():
    """tkc.dialect.walk (an explicit stack, for speed) visits what a recursive
    pre-order does, and lazily (a pass may stop early)."""
    from helpers import nested_ops
    from tkc.dialect import walk
    m = _module(KERNEL.replace('  "tk.sync"() : () -> ()\n', '''  scf.for %i = %c0 to %bx step %bx {
    scf.if %true {
      "tk.sync"() : () -> ()
    }
    %d = arith.addi %i, %i : index
  }
'''.replace("%true", "%t")).replace("  %w = ", "  %t = arith.constant true\n  %w = "))

    names = [op.name for op in walk(m.operation)]
    assert names == [op.name for op in nested_ops(m.operation)]
    assert names.index("scf.for") < names.index("scf.if") < names.index("tk.sync") < names.index("tk.load")
    it = walk(m.operation)
    assert next(it).name == "func.func"


def test_the_compile_time_bench_runs(capsys):
    """python -m tkc.bench.compile_time on one kernel: every phase's line, in
    a cache of its own (the user's is left alone)."""
    import os
    from tkc.bench import compile_time
    before = os.environ.get("TKC_CACHE_DIR")
    compile_time.main(["layer_norm", "--repeats", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("layer_norm: ") and "a warm build" in lines[0]
    assert [line.split("  ")[-1] for line in lines[1:]][-3:] == ["LLVM to PTX", "ptxas",
                                                                 "tracing, keys, the manifest (the rest)"]
    assert os.environ.get("TKC_CACHE_DIR") == before
    with pytest.raises(SystemExit):   # no repeat: no median (as the other commands' counts)
        compile_time.main(["layer_norm", "--repeats", "0"])
    assert "--repeats: must be at least 1, got 0" in capsys.readouterr().err
