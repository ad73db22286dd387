"""An earlier build's PTX and cubin reused (tkc/runtime/reuse.py): where the
lowered module is the same, both; where only the PTX is, the cubin; a
forced build, another ptxas, a pruned artifact or a different kernel:
nothing. The phases that ran are read from pass_pipeline.timed."""
from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest

pytest.importorskip("mlir")

from tkc import compiler  # noqa: E402
from tkc.pass_pipeline import timed  # noqa: E402
from tkc.runtime import cache, reuse  # noqa: E402

SOURCE = '''
import tkc
from tkc import f32, gl, rt
from tkc.ops import load, store
{above}
@tkc.kernel(warps=1, grid=lambda x, y: (tkc.cdiv(x.r, 16),), name="reuse_scale")
def scale(x: gl(f32, 1, 1, "N", 64), y: gl(f32, 1, 1, "N", 64)):
    t = load(rt(f32, 16, 64), x, (0, 0, tkc.block_idx.x, 0))  {comment}
    store(y, t * {factor}, (0, 0, tkc.block_idx.x, 0))
'''


@pytest.fixture
def kernel_file(tmp_path, monkeypatch):
    """kernel_file(name, above=, comment=, factor=) -> the kernel of a file
    written and imported afresh, in a cache of the test's own."""
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TKC_OFFLINE", raising=False)
    # no .pyc: a file rewritten within its second at the same size ("2.0" -> "3.0") would import
    # the old one's code (Python checks a .pyc by its source's mtime and size)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)

    def make(name: str, above: str = "", comment: str = "", factor: str = "2.0"):
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(SOURCE.format(above=above, comment=comment, factor=factor)))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.scale
    return make


def phases(kernel, force: bool = False) -> set[str]:
    with timed() as record:
        kernel.build(force=force)
    return {name for name, _ in record}


def test_the_same_lowered_module_reuses_its_ptx_and_cubin(kernel_file):
    """A comment in the kernel changes its artifact key (its source) but not
    its lowered module (same file, same lines): neither LLVM nor ptxas runs."""
    first = kernel_file("k")
    assert {compiler.TO_PTX_PIPELINE, "ptxas"} <= phases(first)
    again = kernel_file("k", comment="# a comment")
    assert again.artifact_key() != first.artifact_key()
    ran = phases(again)
    assert compiler.TO_PTX_PIPELINE not in ran and "ptxas" not in ran and compiler.LOWER_PASS in ran
    a, b = first.build(), again.build()
    assert a.cubin == b.cubin and a.ptx == b.ptx and a.manifest["resources"] == b.manifest["resources"]
    assert cache.lookup(again.artifact_key()).cubin == a.cubin   # stored under its own key


def test_the_same_ptx_reuses_its_cubin(kernel_file):
    """Lines above the kernel move its locations (another lowered module) but
    not its PTX: LLVM runs, ptxas does not."""
    kernel_file("k").build()
    moved = kernel_file("k", above="\n\n# two lines down\n", comment="# and a comment")
    ran = phases(moved)
    assert compiler.TO_PTX_PIPELINE in ran and "ptxas" not in ran


def test_what_differs_or_is_forced_is_compiled(kernel_file, monkeypatch):
    first = kernel_file("k")
    first.build()
    other = kernel_file("k", factor="3.0")                 # other code: other PTX
    assert {compiler.TO_PTX_PIPELINE, "ptxas"} <= phases(other)
    assert other.build().cubin != first.build().cubin
    assert {compiler.TO_PTX_PIPELINE, "ptxas"} <= phases(first, force=True)   # force: compile it all
    mlir = compiler.mlir_identity
    monkeypatch.setattr(compiler, "mlir_identity", lambda: "another LLVM")
    ran = phases(kernel_file("k", comment="# another LLVM"))
    assert compiler.TO_PTX_PIPELINE in ran and "ptxas" not in ran   # lowered anew, the same PTX's cubin
    monkeypatch.setattr(compiler, "mlir_identity", mlir)
    monkeypatch.setattr(compiler, "ptxas_identity", lambda: "another ptxas")
    ran = phases(kernel_file("k", comment="# another ptxas"))
    assert compiler.TO_PTX_PIPELINE not in ran and "ptxas" in ran   # the PTX reused, the cubin not


def test_an_index_whose_artifact_is_gone_is_a_miss_and_pruned(kernel_file):
    first = kernel_file("k")
    first.build()
    stages = first.build().manifest["source"]["stages"]
    assert reuse.find("ptx", stages["ptx"]) == cache.entry_dir(first.artifact_key())
    (cache.entry_dir(first.artifact_key()) / "kernel.ptx").unlink()   # (trimmed for carrying)
    assert reuse.find("ptx", stages["ptx"]) is None and reuse.find("cubin", stages["cubin"]) is not None
    assert reuse.prune() == 0
    cache.prune(set())
    assert reuse.find("cubin", stages["cubin"]) is None
    assert reuse.prune() == 2
    assert {compiler.TO_PTX_PIPELINE, "ptxas"} <= phases(kernel_file("k", comment="# again"))


def test_keys_separate_their_parts():
    assert reuse.key("ptx", "ab", "c") != reuse.key("ptx", "a", "bc") != reuse.key("cubin", "a", "bc")
    assert reuse.key("ptx", b"x") == reuse.key("ptx", "x")


def test_tkc_build_counts_what_it_reused(kernel_file):
    """building.build_one's row: reused where the build ran no ptxas."""
    from tkc.building import build_one
    first = kernel_file("k")
    assert build_one(first, False)["reused"] is False
    again = kernel_file("k", comment="# again")
    row = build_one(again, False)
    assert row["reused"] is True and not row["cached"]
    assert build_one(again, False)["reused"] is False   # (now cached)


def test_an_earlier_artifact_that_no_longer_loads_is_compiled_past(kernel_file):
    """A corrupt entry an index names: this build assembles its own cubin."""
    first = kernel_file("k")
    first.build()
    (cache.entry_dir(first.artifact_key()) / "manifest.json").write_text("{not json")
    again = kernel_file("k", above="\n# a line down\n", comment="# a new key")
    assert "ptxas" in phases(again)
    assert again.build().manifest["resources"]["registers"] > 0
