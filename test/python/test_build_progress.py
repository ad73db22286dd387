"""`tkc build`'s output (tkc/progress.py): a progress line and a summary by
default, warnings grouped at the end, a line per kernel with -v."""
from __future__ import annotations

import io
import sys
import re

from tkc import building, cli
from tkc.progress import Progress, group_warnings, summary, warning_key

from test_cli import FakeKernel, _build

BANKS = "{}/tkc/kernels/norms.py:88:9: warning: 2-way shared-memory bank conflicts: f32 pair of st<f32, 64, 32>"
WGMMA = ("tkc: warning: kernel '{}': ptxas serialises its wgmma instructions (C7514: something "
         "reads an accumulator while its wgmma runs)")
SPILL = "tkc: warning: kernel '{}' spills registers (64 bytes stored, 0 loaded)"


def _kernels(cwd):
    banks = BANKS.format(cwd)
    return [FakeKernel("ln_bwd_8192", warns=[banks]), FakeKernel("ln_bwd_4096", warns=[banks, banks]),
            FakeKernel("gemm", warns=[WGMMA.format("gemm")]), FakeKernel("attn", warns=[WGMMA.format("attn")]),
            FakeKernel("spiller", spills=64, warns=[SPILL.format("spiller")]), FakeKernel("plain")]


def test_warnings_grouped_at_the_end(monkeypatch, capsys, tmp_path):
    """Each distinct warning once, after the summary, with the kernels it came
    from (its file relative to here); none while building; the spill warning
    is the spills' line."""
    monkeypatch.chdir(tmp_path)
    code, out, err = _build(monkeypatch, capsys, tmp_path / "cache", _kernels(tmp_path))
    assert code == 1  # the spill
    assert err == "error: 0 kernel(s) failed, 1 kernel(s) spilled registers, 0 kernel(s) have serialised wgmma\n"
    assert re.fullmatch(
        r"built 6 kernels in \d+\.\d s \(6 compiled, 0 cached\)\n"
        r"spills: 1 kernel, 1 over their allowance \(an error\)\n"
        r"  spiller  64 st\n"
        r"warnings: 2 kinds, from 4 kernels \(each in full: tkc build -v\)\n"
        r"  2-way shared-memory bank conflicts: 2 kernels \(ln_bwd_8192, ln_bwd_4096\)\n"
        r"      at tkc/kernels/norms.py line 88\n"
        r"      \(f32 pair of st<f32, 64, 32>\)\n"
        r"  ptxas serialises its wgmma instructions \(C7514: something reads an accumulator while "
        r"its wgmma runs\): 2 kernels \(gemm, attn\)\n", out), out
    assert out.count("bank conflicts") == 1 and "spills registers" not in out


def test_verbose_shows_each_kernel_and_its_warnings(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = _build(monkeypatch, capsys, tmp_path / "cache", _kernels(tmp_path), "--verbose")
    lines = err.splitlines()
    assert re.fullmatch(r"\[1/6\] ln_bwd_8192 \.\.\. \d+\.\d s", lines[0])
    assert lines[1] == BANKS.format(tmp_path)
    assert re.fullmatch(r"\[2/6\] ln_bwd_4096 \.\.\. \d+\.\d s", lines[2])
    assert lines[3] == BANKS.format(tmp_path) and lines[4].startswith("[3/6] gemm ... ")
    assert SPILL.format("spiller") in lines
    assert [ln.split()[0] for ln in out.splitlines()[1:7]] == \
        ["ln_bwd_8192", "ln_bwd_4096", "gemm", "attn", "spiller", "plain"]  # the table
    assert out.splitlines()[7].startswith("built 6 kernels")
    assert out.endswith("warnings: 2 kinds, from 4 kernels (above)\n")


def test_a_cached_build_says_so(monkeypatch, capsys, tmp_path):
    ks = [FakeKernel("a"), FakeKernel("b")]
    (tmp_path / ks[0].artifact_key()[:2] / ks[0].artifact_key()).mkdir(parents=True)
    code, out, err = _build(monkeypatch, capsys, tmp_path, ks)
    assert code == 0 and err == ""
    assert re.fullmatch(r"built 2 kernels in \d+\.\d s \(1 compiled, 1 cached\)\nspills: none\n", out)


def test_the_terminal_line_is_redrawn_in_place():
    out = io.StringIO()
    p = Progress(3, tty=True, out=out)
    for i, name in enumerate(["a", "b", "c"]):
        p.start(i, name)
        p.finish(i, {"kernel": name, "error": "x.py:1:1: error: no" if name == "b" else None})
    p.close()
    text = out.getvalue()
    assert "\n" not in text.replace("b: FAILED\nx.py:1:1: error: no\n", "")  # one line, redrawn
    assert "\r\x1b[Kbuilding 0/3 kernels  a" in text and "\r\x1b[Kbuilding 3/3 kernels  c" in text
    assert "\r\x1b[Kb: FAILED\nx.py:1:1: error: no\n\r\x1b[Kbuilding 2/3 kernels  b" in text
    assert text.endswith("\r\x1b[K")  # cleared for the summary


def test_a_log_gets_a_line_each_tenth_at_most():
    out = io.StringIO()
    p = Progress(211, out=out, tty=False, every_s=0)
    for i in range(211):
        p.start(i, f"k{i}")
        p.finish(i, {"kernel": f"k{i}", "error": None})
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 9 and lines[0].startswith("building 22/211 kernels (")
    assert lines[-1].startswith("building 198/211 kernels (")


def _row(name, spills="0", over=False, wgmma="-", error=None, cached=False, warnings=()):
    return {"kernel": name, "spills": spills, "over": over, "wgmma": wgmma, "error": error,
            "cached": cached, "warnings": list(warnings)}


def test_summary_names_the_spilling_serialised_and_failed_kernels():
    rows = [_row("fine"), _row("cached_one", cached=True), _row("over", "128", True),
            _row("within", "104 st + 96 ld (<= 128 st declared)"), _row("serial", wgmma="serialised"),
            _row("broken", "-", error="e")]
    assert summary(rows, 12.34) == (
        "built 5 kernels in 12.3 s (4 compiled, 1 cached, 1 FAILED)\n"
        "spills: 2 kernels, 1 over their allowance (an error)\n"
        "  over    128 st\n"
        "  within  104 st + 96 ld (<= 128 st declared)  (allowed)\n"
        "serialised wgmma (an error): serial\n"
        "failed (errors above): broken\n")


def test_summary_counts_the_compiles_that_reused_an_earlier_cubin():
    """(runtime/reuse.py: compiled anew, under a new key, ptxas skipped)"""
    rows = [_row("fresh"), {**_row("again"), "reused": True}, _row("kept", cached=True)]
    assert summary(rows, 1.0).splitlines()[0] == \
        "built 3 kernels in 1.0 s (2 compiled (1 with an earlier build's cubin), 1 cached)"


def test_a_warning_from_many_kernels_names_a_few():
    """One kind of warning from many kernels, lines and details: a few lines."""
    rows = [_row(f"k{i}", warnings=[f"k.py:{10 + i % 2}:2: warning: 4-way shared-memory bank "
                                    f"conflicts: group copy of st<bf16, {64 * (1 + i % 4)}, 64>",
                                    "k.py:10:2: warning: 4-way shared-memory bank conflicts: group copy "
                                    "of st<bf16, 64, 64>"]) for i in range(12)]
    rows.append(_row("odd", warnings=["stray output", "/abs/j.py:1:1: warning: odd"]))
    assert [(g.kind, len(g.kernels)) for g in group_warnings(rows)] == \
        [("4-way shared-memory bank conflicts", 12), ("stray output", 1), ("odd", 1)]
    assert summary(rows, 1.0).split("\n", 2)[2] == (
        "warnings: 3 kinds, from 13 kernels (each in full: tkc build -v)\n"
        "  4-way shared-memory bank conflicts: 12 kernels (k0, k1, k2, +9 more)\n"
        "      at k.py lines 10, 11\n"
        "      (group copy of st<bf16, 64, 64>, group copy of st<bf16, 128, 64>, "
        "group copy of st<bf16, 192, 64>, +1 more)\n"
        "  stray output: 1 kernel (odd)\n"
        "  odd: 1 kernel (odd)\n"
        "      at /abs/j.py line 1\n")
    assert warning_key(WGMMA.format("x")) == warning_key(WGMMA.format("y"))
    assert warning_key(SPILL.format("x")) is None


def test_each_kernel_reports_its_own_bank_conflicts():
    """The bank report warns once per process; a build forgets that per kernel."""
    from tkc.passes import banks
    banks._WARNED.add(("k.py:1:1", "an access"))
    lines = []
    assert building.quietly(lambda: print("warning: x", file=sys.stderr) or 7, lines) == 7
    assert lines == ["warning: x"] and not banks._WARNED
