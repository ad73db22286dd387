"""Kernel objects: grid expressions, cache keys, kernels_in_file, and no MLIR at import."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt
from tkc.diagnostics import TkcError
from tkc.frontend import kernels_in_file
from tkc.frontend.ops import store, zero


def _make(n):
    @tkc.kernel(warps=2, grid=lambda a: (a.r // n,))
    def k(a: gl(f32, 1, 1, None, 64)):
        store(a, zero(rt(f32, 16, n)), (0, 0, 0, 0))
    return k


def test_cache_key_is_stable_and_follows_closure_constants():
    a, b, c = _make(32), _make(32), _make(16)
    assert a.cache_key() == a.cache_key() == b.cache_key()
    assert len(a.cache_key()) == 64
    assert a.cache_key() != c.cache_key()


def test_sources_are_read_once_per_code_object_and_files_keep_their_own(tmp_path, monkeypatch):
    """The cache key's sources are kept per code object (inspect tokenizes a
    file each time); two files with equal code but other source text (here
    a comment) keep their own, and a kernel file edited and loaded again
    gets its new source."""
    import inspect
    from tkc.frontend import kernel as kmod
    text = ("import tkc\nfrom tkc import f32, gl\n\n@tkc.kernel(warps=1)\n"
            "def k(a: gl(f32, 1, 1, 16, 16)):\n    pass  # {}\n")
    paths = [tmp_path / "one.py", tmp_path / "two.py"]
    for i, p in enumerate(paths):
        p.write_text(text.format(i))
    one, two = (kernels_in_file(p)[0] for p in paths)
    assert "# 0" in one.source() and "# 1" in two.source()
    reads = []
    real = inspect.getsource
    monkeypatch.setattr(inspect, "getsource", lambda f: (reads.append(f), real(f))[1])
    key = one.cache_key()
    assert one.cache_key() == key and reads == []
    paths[0].write_text(text.format("edited"))
    assert "# edited" in kernels_in_file(paths[0])[0].source() and len(reads) == 1


def test_grid_expressions():
    k = _make(32)
    assert k.grid() == ["a.r // 32", "1", "1"]

    @tkc.kernel(grid=lambda c, n: (tkc.cdiv(c.c, 64) * 2, tkc.min(c.r // 16, n + 1), (c.b + 1) % 3))
    def g(c: gl(bf16, None, 8, None, None), n: tkc.i32):
        pass
    assert g.grid() == ["cdiv(c.c, 64) * 2", "min(c.r // 16, n + 1)", "(c.b + 1) % 3"]

    # by name when the lambda names kernel arguments; static dims are ints
    @tkc.kernel(grid=lambda c: (c.d * 4, c.r))
    def h(n: tkc.i32, c: gl(bf16, None, 8, 128, None)):
        pass
    assert h.grid() == ["32", "128", "1"]
    assert tkc.cdiv(65, 64) == 2 and tkc.min(3, 4) == 3 and tkc.max(3, 4) == 4


def test_grid_errors():
    @tkc.kernel(grid=lambda a: (a.r / 64,))
    def k(a: gl(f32, 1, 1, None, 64)):
        pass
    with pytest.raises(TkcError) as info:
        k.grid()
    assert "//" in info.value.message and info.value.where.startswith(__file__)

    @tkc.kernel(grid=lambda a: (1, 2, 3, 4))
    def k4(a: gl(f32, 1, 1, None, 64)):
        pass
    with pytest.raises(TkcError):
        k4.grid()


KERNEL_FILE = '''
import tkc
from tkc import f32, gl, rt
from tkc.ops import *

D = {d}

def helper(x):
    return {helper}

@tkc.kernel(name="copy_tile")
def k(a: gl(f32, 1, 1, 16, 64)):
    store(a, helper(load(rt(f32, 16, D), a, (0, 0, 0, 0))), (0, 0, 0, 0))

def _make(n):
    @tkc.kernel(name=f"zero_{{n}}")
    def z(a: gl(f32, 1, 1, 16, 64)):
        store(a, zero(rt(f32, 16, n)), (0, 0, 0, 0))
    return z

KERNELS = [_make(16), _make(32)]
'''


def _write(tmp_path, name, d=64, helper="exp(x)"):
    p = tmp_path / name
    p.write_text(KERNEL_FILE.format(d=d, helper=helper))
    return p


def test_kernels_in_file_and_global_constants(tmp_path):
    ks = kernels_in_file(_write(tmp_path, "a.py"))
    assert [k.name for k in ks] == ["copy_tile", "zero_16", "zero_32"]
    again = kernels_in_file(_write(tmp_path, "b.py"))
    assert [k.cache_key() for k in ks] == [k.cache_key() for k in again]
    other_d = kernels_in_file(_write(tmp_path, "c.py", d=32))[0]
    other_helper = kernels_in_file(_write(tmp_path, "d.py", helper="exp2(x)"))[0]
    keys = {ks[0].cache_key(), other_d.cache_key(), other_helper.cache_key()}
    assert len(keys) == 3
    assert ks[1].cache_key() != ks[2].cache_key()
    pytest.importorskip("mlir")
    assert "tk.exp2" in other_helper.tile_ir() and "tk.exp2" not in ks[0].tile_ir()


def test_kernels_in_file_errors(tmp_path):
    with pytest.raises(TkcError):
        kernels_in_file(tmp_path / "missing.py")
    bad = tmp_path / "bad.py"
    bad.write_text("raise ValueError('boom')\n")
    with pytest.raises(TkcError) as info:
        kernels_in_file(bad)
    assert "boom" in info.value.message


def test_interpret_traces_and_passes_a_kernel_once(monkeypatch):
    """Kernel.interpret keeps each kernel's IR after the tile pipeline by its
    cache key (tkc/frontend/interpreted.py): a kernel of the same source and
    specialisation is traced once; another specialisation is its own; after
    forget() it is traced again. Every run still gets its own arguments."""
    from tkc.frontend import interpreted
    from tkc.frontend.kernel import Kernel
    traced = []
    real = Kernel.trace
    monkeypatch.setattr(Kernel, "trace", lambda self: (traced.append(self.name), real(self))[1])
    for k, n in ((_make(32), 32), (_make(32), 32), (_make(16), 16), (_make(16), 16)):
        a = np.ones((64, 64), np.float32)
        k.interpret(a)
        assert (a[:16, :n] == 0).all() and (a[16:] == 1).all() and (a[:, n:] == 1).all()
    assert len(traced) == 2
    interpreted.forget()
    _make(32).interpret(np.ones((32, 64), np.float32))
    assert len(traced) == 3


def test_arg_count_is_checked_before_running():
    k = _make(16)
    with pytest.raises(TkcError) as info:
        k.interpret()
    assert "takes 1 arguments" in info.value.message
    assert info.value.where.startswith(__file__)


NO_MLIR = '''
import sys

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "mlir" or name.startswith("mlir."):
            raise ImportError("MLIR is blocked in this test")
        return None

sys.meta_path.insert(0, Refuse())
import tkc
from tkc import bf16, gl, rt
from tkc.ops import *
from tkc.diagnostics import TkcError

@tkc.kernel(warps=4, grid=lambda a: (tkc.cdiv(a.r, 64),))
def k(a: gl(bf16, 1, 1, None, 64)):
    store(a, zero(rt(bf16, 16, 64)), (0, 0, 0, 0))

print(k.name, k.grid(), k.cache_key())
try:
    k.build()
except TkcError as e:
    print("offline:", e.message)
assert not [m for m in sys.modules if m == "mlir" or m.startswith("mlir.")]
'''


def test_import_and_cache_key_without_mlir(tmp_path):
    script = tmp_path / "no_mlir.py"
    script.write_text(NO_MLIR)
    env = {**os.environ, "TKC_OFFLINE": "1", "TKC_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    name, rest = first.split(" ", 1)
    assert name == "k" and "['cdiv(a.r, 64)', '1', '1']" in rest
    assert len(rest.split()[-1]) == 64
    assert second.startswith("offline:") and second.rstrip().endswith(f"tkc build {script}`")


def test_offline_miss_names_the_library_build_for_library_kernels(tmp_path, monkeypatch):
    from tkc.kernels import gemm_hopper
    monkeypatch.setenv("TKC_OFFLINE", "1")
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    with pytest.raises(TkcError, match=r"tkc build`$"):
        gemm_hopper("bf16").build()


def test_repr_and_params():
    k = _make(16)
    assert repr(k) == "<tkc.Kernel k(gl(f32, 1, 1, None, 64))>"
    assert list(k.params) == ["a"] and k.params["a"].kind == "gl"


def test_build_compiles_once_then_reads_the_cache(tmp_path, monkeypatch):
    pytest.importorskip("mlir")
    if shutil.which("ptxas") is None:
        pytest.skip("needs ptxas")
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TKC_OFFLINE", raising=False)
    art = _make(16).build()
    assert art.name == "k" and art.manifest["source"]["key"] == _make(16).artifact_key()
    assert art.manifest["grid"] == ["a.r // 16", "1", "1"] and art.manifest["warps"] == 2

    import tkc.compiler

    def no_compile(*a, **kw):
        raise AssertionError("compiled although the cache holds the artifact")
    monkeypatch.setattr(tkc.compiler, "compile_kernel", no_compile)
    assert _make(16).build().cubin == art.cubin  # a fresh Kernel object: from disk
    monkeypatch.setenv("TKC_OFFLINE", "1")
    with pytest.raises(TkcError, match="tkc build"):
        _make(32).build()
