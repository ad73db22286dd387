"""The tkc driver as a user runs it: exit codes, stdout/stderr, files, build."""
from __future__ import annotations

import contextlib
import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tkc import cli

KERNEL = '''func.func @k(%g: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>)
    attributes {tk.kernel, tk.warps = 1 : i64, tk.arg_names = ["g"]} {
  %c0 = arith.constant 0 : index
  %s = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 64 : i64, "auto">
  "tk.group_load"(%s, %g, %c0, %c0, %c0, %c0) {warps = 1 : i64} : (!tk.st<bf16, 16 : i64, 64 : i64, "auto">, !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, index, index, index, index) -> ()
  %x = "tk.load"(%s, %c0, %c0) : (!tk.st<bf16, 16 : i64, 64 : i64, "auto">, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
  "tk.store"(%g, %x, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, !tk.rt<bf16, 16 : i64, 64 : i64, "row">, index, index, index, index) -> ()
  return
}
'''
BAD = KERNEL.replace('!tk.rt<bf16, 16 : i64, 64 : i64, "row">', '!tk.rt<bf16, 16 : i64, 48 : i64, "row">')


def tkc(*args, env=None, **kw):
    """Run the tkc driver in a subprocess (as `python -m tkc.cli`)."""
    full_env = {k: v for k, v in os.environ.items() if k != "TKC_DEBUG"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "tkc.cli", *map(str, args)],
                          capture_output=True, text=True, env=full_env, timeout=120, **kw)


def tkc_here(*args):
    """What `tkc args` prints and exits with, from the driver's main() in this
    process: a process of its own costs ~0.5 s of CPU importing Python, MLIR
    and numpy. For what goes through sys.stdout/sys.stderr (text and
    messages); `tkc` above for what needs a process (a traceback printed by
    Python, binary stdout, a terminal, the environment at import)."""
    out, err = io.StringIO(), io.StringIO()
    debug = os.environ.pop("TKC_DEBUG", None)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main([str(a) for a in args])
            except SystemExit as e:  # argparse
                code = e.code
    finally:
        if debug is not None:
            os.environ["TKC_DEBUG"] = debug
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


@pytest.fixture
def kernel_file(tmp_path):
    p = tmp_path / "k.mlir"
    p.write_text(KERNEL)
    return p


def test_default_pipeline_prints_tile_ir(kernel_file):
    r = tkc_here(kernel_file)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert '!tk.st<bf16, 16 : i64, 64 : i64, "128b">' in r.stdout  # layout selection ran
    assert '"auto"' not in r.stdout


def test_output_file(kernel_file, tmp_path):
    out = tmp_path / "out.mlir"
    r = tkc_here(kernel_file, "-o", out, "--pass-pipeline=tk-verify")
    assert r.returncode == 0 and r.stdout == ""
    assert '"auto"' in out.read_text() and "func.func @k" in out.read_text()


def test_verifier_error_is_located_and_exit_1(tmp_path):
    p = tmp_path / "bad.mlir"
    p.write_text(BAD)
    r = tkc_here(p)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"{p}:6:8: error: load: rt<bf16, 16, 48, row> is not a subtile of "
        "st<bf16, 16, 64, 128b> (the st's shape must be a multiple of the rt's)",
        f"{p}:7:3: error: store: gl dim c = 64 is not a multiple of the rt<bf16, 16, 48, row> "
        "extent 48"]


def test_debug_env_shows_the_traceback(tmp_path):
    p = tmp_path / "bad.mlir"
    p.write_text(BAD)
    assert "Traceback" not in tkc(p).stderr
    r = tkc(p, env={"TKC_DEBUG": "1"})
    assert r.returncode == 1 and "Traceback" in r.stderr and "TkcError" in r.stderr


def test_parse_error_is_located(tmp_path):
    p = tmp_path / "syntax.mlir"
    p.write_text("func.func @f() {\n  %0 = \"tk.zero\"() : () -> !tk.rt<f32, 16 : i64>\n  return\n}\n")
    r = tkc_here(p)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"{p}:2:")


@pytest.mark.parametrize("args, message", [
    (["--pass-pipeline=tk-verify,nope"], "error: unknown pass or bad pipeline entry 'nope'"),
    (["--pass-pipeline=cse(", ], "error: unbalanced brackets in pass pipeline"),
])
def test_pipeline_errors(kernel_file, args, message):
    r = tkc_here(kernel_file, *args)
    assert r.returncode == 1 and r.stderr.startswith(message), r.stderr


def test_missing_file_and_no_file(tmp_path):
    r = tkc_here(tmp_path / "nope.mlir")
    assert r.returncode == 1 and r.stderr.strip() == f"error: {tmp_path / 'nope.mlir'}: no such file"
    r = tkc_here()
    assert r.returncode == 1 and r.stderr.startswith("error: no input file")


def test_list_passes_names_every_registered_pass():
    from tkc.pass_pipeline import all_passes
    r = tkc_here("--list-passes")
    assert r.returncode == 0
    for name, info in all_passes().items():
        assert re.search(rf"^  {re.escape(name)} +{re.escape(info.description)}$", r.stdout, re.M)
    assert "upstream" in r.stdout.lower()


def test_print_ir_after_all_goes_to_stderr(kernel_file):
    r = tkc(kernel_file, "--print-ir-after-all")
    assert r.returncode == 0
    from tkc.compiler import TILE_PIPELINE
    assert r.stderr.count("// -----// IR Dump After ") == len(TILE_PIPELINE.split(","))
    assert "IR Dump" not in r.stdout


def test_cubin_to_a_pipe_and_a_file(kernel_file, tmp_path):
    out = tmp_path / "k.cubin"
    r = tkc(kernel_file, "--emit=cubin", "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:4] == b"\x7fELF"
    piped = subprocess.run([sys.executable, "-m", "tkc.cli", str(kernel_file), "--emit=cubin"],
                           capture_output=True, timeout=120)
    assert piped.returncode == 0 and piped.stdout == out.read_bytes()


def test_cubin_refuses_a_terminal(kernel_file):
    """Binary to a tty would garble it: an error asking for -o."""
    master, slave = pty.openpty()
    try:
        r = subprocess.run([sys.executable, "-m", "tkc.cli", str(kernel_file), "--emit=cubin"],
                           stdout=slave, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert r.returncode == 1
    assert "a cubin is binary: write it with -o FILE" in r.stderr


def test_python_kernel_file_and_located_python_error(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(
        "import tkc\nfrom tkc import f32, gl, rt\nfrom tkc.frontend.ops import store, zero\n\n"
        "@tkc.kernel\ndef fill0(o: gl(f32, 1, 1, 16, 16)):\n"
        "    store(o, zero(rt(f32, 16, 16)), (0, 0, 0, 0))\n")
    r = tkc_here(good)
    assert r.returncode == 0 and "func.func @fill0" in r.stdout
    bad = tmp_path / "bad.py"
    bad.write_text(good.read_text().replace("(0, 0, 0, 0)", "(0, 0, 1 / 0, 0)"))
    r = tkc_here(bad)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"{bad}:7:") and "ZeroDivisionError" in r.stderr


def test_cli_imports_no_mlir():
    r = subprocess.run([sys.executable, "-c", "import sys, tkc.cli; print('mlir' in sys.modules)"],
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False"


# ---- tkc build ------------------------------------------------------------------

class FakeArtifact:
    def __init__(self, key, registers, spills, loads=0):
        self.manifest = {"shared_bytes": 1024, "source": {"key": key},
                         "resources": {"registers": registers, "spill_stores": spills,
                                       "spill_loads": loads}}


class FakeKernel:
    def __init__(self, name, registers=32, spills=0, error=None, allowed=0, warns=()):
        self.name, self.registers, self.spilled, self.error = name, registers, spills, error
        self.spills = allowed  # tkc.kernel(spills=N): the spill stores it declares
        self.warns = warns  # what its compile writes on stderr
        self.forced = None

    def artifact_key(self):
        return (self.name.encode().hex() * 64)[:64]

    def build(self, force=False):
        from tkc.diagnostics import TkcError
        self.forced = force
        for w in self.warns:
            sys.stderr.write(w + "\n")
        if self.error:
            raise TkcError(self.error, "lib.py:3:1")
        return FakeArtifact(self.artifact_key(), self.registers, self.spilled, getattr(self, "loads", 0))


def _build(monkeypatch, capsys, tmp_path, kernels, *args):
    import tkc.kernels
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tkc.kernels, "library", lambda: kernels)
    code = cli.main(["build", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_build_is_quiet_by_default(monkeypatch, capsys, tmp_path):
    """No line per kernel: (off a terminal, and quick) nothing while it
    builds, then one summary."""
    ks = [FakeKernel("gemm_a", 96), FakeKernel("gemm_b", 128), FakeKernel("attn", 200)]
    code, out, err = _build(monkeypatch, capsys, tmp_path, ks, "--filter", "gemm", "--force")
    assert code == 0 and err == ""
    assert re.fullmatch(r"built 2 kernels in \d+\.\d s \(2 compiled, 0 cached\)\nspills: none\n", out)
    assert ks[0].forced is True and ks[2].forced is None


def test_build_verbose_progress_and_table(monkeypatch, capsys, tmp_path):
    """-v: a progress line per kernel, the table, then the summary."""
    ks = [FakeKernel("gemm_a", 96), FakeKernel("gemm_b", 128), FakeKernel("attn", 200)]
    code, out, err = _build(monkeypatch, capsys, tmp_path, ks, "--filter", "gemm", "--force", "-v")
    assert code == 0
    assert re.fullmatch(r"\[1/2\] gemm_a \.\.\. \d+\.\d s\n\[2/2\] gemm_b \.\.\. \d+\.\d s\n", err)
    lines = out.splitlines()
    assert lines[3].startswith("built 2 kernels") and len(lines) == 5
    lines = lines[:3]
    assert lines[0].split() == ["kernel", "registers", "spills", "wgmma", "shared", "bytes",
                                "cache", "path"]
    assert lines[1].split() == ["gemm_a", "96", "0", "-", "1024",
                                str(tmp_path / ks[0].artifact_key()[:2] / ks[0].artifact_key())]
    assert lines[2].split()[:2] == ["gemm_b", "128"] and len(lines) == 3
    assert ks[0].forced is True and ks[2].forced is None


def test_build_fails_on_spills_and_errors_but_builds_the_rest(monkeypatch, capsys, tmp_path):
    """Quiet: the error in full, the summary names the spilling and the failed kernel."""
    ks = [FakeKernel("a"), FakeKernel("b", spills=64), FakeKernel("c", error="mma_AB: bad"),
          FakeKernel("d")]
    code, out, err = _build(monkeypatch, capsys, tmp_path, ks)
    assert code == 1
    assert err == ("c: FAILED\nlib.py:3:1: error: mma_AB: bad\n"
                   "error: 1 kernel(s) failed, 1 kernel(s) spilled registers, "
                   "0 kernel(s) have serialised wgmma\n")
    assert out.splitlines()[0].startswith("built 3 kernels") and "3 compiled, 0 cached, 1 FAILED" in out
    assert "spills: 1 kernel, 1 over their allowance (an error)\n  b  64 st\n" in out
    assert "failed (errors above): c\n" in out


def test_build_verbose_fails_on_spills_and_errors_but_builds_the_rest(monkeypatch, capsys, tmp_path):
    ks = [FakeKernel("a"), FakeKernel("b", spills=64), FakeKernel("c", error="mma_AB: bad"),
          FakeKernel("d")]
    code, out, err = _build(monkeypatch, capsys, tmp_path, ks, "-v")
    assert code == 1
    assert "[3/4] c ... FAILED\nlib.py:3:1: error: mma_AB: bad\n" in err
    assert err.rstrip().endswith("error: 1 kernel(s) failed, 1 kernel(s) spilled registers, "
                                 "0 kernel(s) have serialised wgmma")
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines()[1:5]}
    assert rows["b"][2] == "64" and rows["c"][1:] == ["-", "-", "-", "-", "FAILED"]
    assert rows["d"][1] == "32"  # built after the failure


def test_build_accepts_a_declared_spill_allowance(monkeypatch, capsys, tmp_path):
    """tkc.kernel(spills=N): up to N bytes of spill stores build; more fail."""
    ks = [FakeKernel("a", spills=64, allowed=64), FakeKernel("b", spills=64, allowed=32)]
    code, out, err = _build(monkeypatch, capsys, tmp_path, ks)
    assert code == 1 and "1 kernel(s) spilled registers" in err
    assert "spills: 2 kernels, 1 over their allowance (an error)\n" in out
    assert "  a  64 st (<= 64 st declared)  (allowed)\n  b  64 st (<= 32 st declared)\n" in out
    code, out, err = _build(monkeypatch, capsys, tmp_path, ks, "-v")
    assert "64 (<= 64 st declared)" in out and "64 (<= 32 st declared)" in out


def test_build_spills_show_stores_and_loads(monkeypatch, capsys, tmp_path):
    """The allowance bounds spill stores; loads are shown apart, not added to them."""
    k = FakeKernel("a", spills=104, allowed=128)
    k.loads = 96
    code, out, _ = _build(monkeypatch, capsys, tmp_path, [k])
    assert code == 0 and "  a  104 st + 96 ld (<= 128 st declared)  (allowed)\n" in out


def test_build_prune_keeps_only_this_builds_entries(monkeypatch, capsys, tmp_path):
    ks = [FakeKernel("a"), FakeKernel("b")]
    for key in [k.artifact_key() for k in ks] + ["f" * 64, "0" * 64]:  # two older builds' entries
        (tmp_path / key[:2] / key).mkdir(parents=True)
        (tmp_path / key[:2] / key / "kernel.cubin").write_bytes(b"x" * 1000)
    (tmp_path / "README").write_text("not an entry")
    code, _, err = _build(monkeypatch, capsys, tmp_path, ks, "--prune")
    assert code == 0 and "pruned 2 older cache entries (0.0 MiB)" in err
    left = sorted(p.name for p in tmp_path.glob("*/*"))
    assert left == sorted(k.artifact_key() for k in ks) and (tmp_path / "README").exists()
    code, _, err = _build(monkeypatch, capsys, tmp_path, ks, "--prune", "--filter", "a")
    assert code == 1 and "--prune keeps only the kernels built now" in err


def test_build_filter_matching_nothing(monkeypatch, capsys, tmp_path):
    code, _, err = _build(monkeypatch, capsys, tmp_path, [FakeKernel("a")], "--filter", "zzz")
    assert code == 1 and err.strip() == "error: no library kernel matches 'zzz'"


def test_build_a_real_library_kernel_then_hit_the_cache(tmp_path):
    """One small library kernel compiled end to end into the cache, then reused."""
    from tkc.kernels import library
    name = min((k.name for k in library()), key=len)
    env = {"TKC_CACHE_DIR": str(tmp_path)}
    first = tkc("build", "--filter", name, "-v", env=env)
    assert first.returncode == 0, first.stderr
    row = [ln for ln in first.stdout.splitlines() if ln.startswith(name)][0].split()
    entry = Path(row[-1])
    assert entry.is_dir() and entry.parent.parent == tmp_path
    assert int(row[1]) > 0 and row[2] == "0"
    n = len(first.stdout.split("\nbuilt ")[0].splitlines()) - 1  # the filter's kernels
    assert f"({n} compiled, 0 cached)" in first.stdout
    again = tkc("build", "--filter", name, "-v", env=env)
    assert again.returncode == 0 and f"{name} ... cached" in again.stderr
    table = lambda out: out.split("\nbuilt ")[0]  # noqa: E731
    assert table(again.stdout) == table(first.stdout)
    quiet = tkc("build", "--filter", name, env=env)  # the default: the summary alone
    assert quiet.returncode == 0 and quiet.stderr == "" and name not in quiet.stdout
    assert re.fullmatch(rf"built {n} kernels? in \d+\.\d s \(0 compiled, {n} cached\)\n"
                        r"spills: none\n", quiet.stdout)


def test_build_in_processes_keeps_the_order(monkeypatch, capsys, tmp_path):
    """Enough uncached kernels: forked workers build them; the progress lines
    and the table keep the library's order, and a failure stays a failure."""
    import concurrent.futures

    import tkc.building
    import tkc.cli
    warn = "k.py:3:9: warning: 2-way shared-memory bank conflicts: f32 pair of st<f32, 64, 32>"
    ks = [FakeKernel(f"k{i}", 32 + i, warns=[warn] if i % 3 == 0 else ()) for i in range(10)] \
        + [FakeKernel("bad", error="no")]
    monkeypatch.setattr(tkc.building, "POOL_AT_LEAST", 4)
    monkeypatch.setattr(tkc.building, "_forkable", lambda: True)  # the fakes use no MLIR
    pools, real = [], concurrent.futures.ProcessPoolExecutor
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor",
                        lambda *a, **kw: pools.append(a) or real(*a, **kw))
    code, out, err = _build(monkeypatch, capsys, tmp_path, ks, "-j", "2", "-v")
    assert pools == [(2,)]
    assert code == 1 and "1 kernel(s) failed" in err
    progress = [ln.split(" ... ")[0] for ln in err.splitlines() if " ... " in ln]
    assert progress == [f"[{i + 1}/11] {k.name}" for i, k in enumerate(ks)]
    assert f"[4/11] k3 ... cached\n{warn}\n" not in err and re.search(
        rf"\[4/11\] k3 \.\.\. \d+\.\d s\n{re.escape(warn)}\n\[5/11\] k4", err)  # the workers' warnings
    rows = [ln.split()[:2] for ln in out.splitlines()[1:12]]
    assert rows == [[f"k{i}", str(32 + i)] for i in range(10)] + [["bad", "-"]]
    # quiet, with the workers' kernels compiled again: their warnings grouped in the summary
    code, out, err = _build(monkeypatch, capsys, tmp_path, ks, "-j", "2", "--force")
    assert code == 1 and err.startswith("bad: FAILED\nlib.py:3:1: error: no\n") and "k1" not in err
    assert out.endswith("warnings: 1 kind, from 4 kernels (each in full: tkc build -v)\n"
                        "  2-way shared-memory bank conflicts: 4 kernels (k0, k3, k6, +1 more)\n"
                        "      at k.py line 3\n      (f32 pair of st<f32, 64, 32>)\n")


def test_build_in_processes_compiles_a_kernel_listed_twice_once(monkeypatch, capsys, tmp_path):
    """Two listings of one kernel (one cache key): the workers get it once;
    the second row is read after them, in its place."""
    import concurrent.futures

    import tkc.building
    ks = [FakeKernel(f"k{i}", 32 + i) for i in range(6)] + [FakeKernel("k2", 34)]
    monkeypatch.setattr(tkc.building, "POOL_AT_LEAST", 4)
    monkeypatch.setattr(tkc.building, "_forkable", lambda: True)  # the fakes use no MLIR
    submitted, real = [], concurrent.futures.ProcessPoolExecutor

    class Pool(real):
        def submit(self, fn, *args):
            submitted.append(args[0])
            return super().submit(fn, *args)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Pool)
    code, out, err = _build(monkeypatch, capsys, tmp_path, ks, "-j", "2", "-v")
    assert code == 0 and sorted(submitted) == list(range(6))
    rows = [ln.split()[:2] for ln in out.splitlines()[1:8]]
    assert rows == [[f"k{i}", str(32 + i)] for i in range(6)] + [["k2", "34"]]


def test_build_in_spawned_processes_makes_the_kernels_again(monkeypatch, capsys, tmp_path):
    """Where forking is unsafe (MLIR or torch loaded), spawned workers make
    the kernel list again from the library and the files, and build by key."""
    import tkc.building
    import tkc.cli
    src = tmp_path / "probes.py"
    src.write_text(
        "import tkc\nfrom tkc import f32, gl, rt\nfrom tkc.ops import load, store\n"
        "def make(n):\n"
        "    @tkc.kernel(warps=1, grid=lambda x, y: (1, 1), name=f'spawn_probe_{n}')\n"
        "    def k(x: gl(f32, 1, 1, 16, 16), y: gl(f32, 1, 1, 16, 16)):\n"
        "        store(y, load(rt(f32, 16, 16), x, (0, 0, 0, 0)) * float(n), (0, 0, 0, 0))\n"
        "    return k\n"
        "KERNELS = [make(n) for n in range(5)]\n")
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tkc.building, "POOL_AT_LEAST", 4)
    monkeypatch.setattr(tkc.building, "_forkable", lambda: False)
    assert tkc.cli.main(["build", "-j", "2", "-v", "--filter", "spawn_probe", str(src)]) == 0
    out, err = capsys.readouterr()
    assert [ln.split(" ... ")[0] for ln in err.splitlines() if " ... " in ln] == \
        [f"[{i + 1}/5] spawn_probe_{i}" for i in range(5)]
    rows = [ln.split() for ln in out.splitlines()[1:6]]
    assert [r[0] for r in rows] == [f"spawn_probe_{i}" for i in range(5)]
    assert all(Path(r[-1]).is_dir() for r in rows)
