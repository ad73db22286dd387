"""tkc.runtime without a GPU: artifacts, manifests, the cache, the grid language,
and the promise that the runtime imports no MLIR."""
import copy
import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

from tkc.diagnostics import TkcError
from tkc.runtime import Artifact, cache, evaluate
from tkc.runtime.artifact import CUBIN, MANIFEST, PTX, TILE_IR

MANIFEST_GEMM = {
    "version": 1, "kernel": "gemm", "target": "sm_90a", "warps": 4, "block": [128, 1, 1],
    "grid": ["cdiv(c.c, 64)", "cdiv(c.r, 64)", "1"], "shared_bytes": 16384,
    "cluster": [1, 1, 1], "tensor_maps": [],
    "params": [
        {"name": "a", "kind": "gl", "dtype": "bf16", "dims": [1, 1, None, None], "divisible": [1, 1, 64, 16]},
        {"name": "c", "kind": "gl", "dtype": "f32", "dims": [1, 1, None, 64], "divisible": [1, 1, 64, 64]},
        {"name": "s", "kind": "scalar", "dtype": "f32"},
    ],
    "resources": {"registers": 96}, "source": {"key": "", "compiler": ""},
}
KEY = "ab" + "0" * 62


def manifest(**changes) -> dict:
    m = copy.deepcopy(MANIFEST_GEMM)
    m.update(changes)
    return m


def artifact(**changes) -> Artifact:
    return Artifact(b"\x7fELF cubin bytes", manifest(**changes), ptx=".version 8.0\n",
                    tile_ir="func.func @gemm() {}\n")


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_warned", set())  # each test sees its own first warning
    return tmp_path / "cache"


# -- artifacts and manifests --------------------------------------------------

def test_artifact_round_trip(tmp_path):
    a = artifact()
    a.save(tmp_path / "art")
    assert sorted(p.name for p in (tmp_path / "art").iterdir()) == sorted([CUBIN, MANIFEST, PTX, TILE_IR])
    b = Artifact.load(tmp_path / "art")
    assert (b.cubin, b.manifest, b.ptx, b.tile_ir, b.name) == (a.cubin, a.manifest, a.ptx, a.tile_ir, "gemm")


def test_artifact_without_optional_text(tmp_path):
    Artifact(b"cubin", manifest()).save(tmp_path)
    b = Artifact.load(tmp_path)
    assert (b.ptx, b.tile_ir) == (None, None)
    assert not (tmp_path / PTX).exists()


def test_manifest_defaults_filled():
    m = manifest()
    for key in ("cluster", "tensor_maps", "resources", "source"):
        del m[key]
    filled = Artifact(b"x", m).manifest
    assert filled["cluster"] == [1, 1, 1] and filled["tensor_maps"] == []


@pytest.mark.parametrize("changes, message", [
    ({"version": 2}, "version 2, this runtime reads version 1"),
    ({"warps": 0}, "'warps' must be 1..32"),
    ({"block": [64, 1, 1]}, "'block' must be [32 * warps, 1, 1] = [128, 1, 1]"),
    ({"grid": ["1", "1"]}, "three expression strings"),
    ({"grid": ["c.c ** 2", "1", "1"]}, "not in the grid language"),
    ({"grid": ["cdiv(z.c, 64)", "1", "1"]}, "uses ['z.c']"),
    ({"grid": ["s", "1", "1"]}, "uses ['s']"),  # an f32 scalar is not a grid name
    ({"shared_bytes": -1}, "'shared_bytes' must be an int >= 0"),
    ({"cluster": [2, 1]}, "'cluster' must be three ints"),
    ({"kernel": "not a name"}, "'kernel' must be a symbol name"),
])
def test_manifest_rejected(changes, message):
    with pytest.raises(TkcError) as info:
        Artifact(b"x", manifest(**changes))
    assert message in str(info.value)


@pytest.mark.parametrize("param, message", [
    ({"name": "a", "kind": "gl", "dtype": "f64", "dims": [1, 1, 1, 1]}, "dtype must be one of"),
    ({"name": "a", "kind": "gl", "dtype": "f32", "dims": [1, 1, 1]}, "'dims' must be 4 entries"),
    ({"name": "a", "kind": "gl", "dtype": "f32", "dims": [1, 1, 0, 1]}, "'dims' must be 4 entries"),
    ({"name": "a", "kind": "gl", "dtype": "f32", "dims": [1, 1, 1, 1], "divisible": [1, 1, 0, 1]}, "'divisible'"),
    ({"name": "a", "kind": "gl", "dtype": "f32", "dims": [1, 1, None, 1], "names": [None, None, "M"]},
     "'names' must be 4 entries"),
    ({"name": "a", "kind": "gl", "dtype": "f32", "dims": [1, 1, None, 1], "names": [None, None, "", None]},
     "'names' must be 4 entries"),
    ({"name": "a", "kind": "gl", "dtype": "f32", "dims": [1, 1, None, 8], "names": [None, None, "M", "K"]},
     "dim c is static (8) but named 'K'"),
    ({"name": "a", "kind": "scalar", "dtype": "bf16"}, "dtype must be one of ('f32', 'i32')"),
    ({"name": "a", "kind": "tensor", "dtype": "f32"}, "kind must be 'gl' or 'scalar'"),
    ({"kind": "scalar", "dtype": "f32"}, "must be a dict with a 'name'"),
])
def test_manifest_param_rejected(param, message):
    with pytest.raises(TkcError) as info:
        Artifact(b"x", manifest(params=[param], grid=["1", "1", "1"]))
    assert message in str(info.value)


def test_manifest_duplicate_param():
    p = {"name": "s", "kind": "scalar", "dtype": "f32"}
    with pytest.raises(TkcError, match="'s' appears twice"):
        Artifact(b"x", manifest(params=[p, p], grid=["1", "1", "1"]))


def test_manifest_missing_keys_on_load(tmp_path):
    artifact().save(tmp_path)
    m = json.loads((tmp_path / MANIFEST).read_text())
    del m["params"], m["grid"]
    (tmp_path / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(TkcError) as info:
        Artifact.load(tmp_path)
    assert f"bad artifact in {tmp_path}" in str(info.value) and "missing keys ['grid', 'params']" in str(info.value)


def test_load_reports_missing_and_bad_files(tmp_path):
    with pytest.raises(TkcError, match="cannot load the artifact"):
        Artifact.load(tmp_path / "nothing")
    artifact().save(tmp_path)
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(TkcError, match="cannot load the artifact"):
        Artifact.load(tmp_path)


# -- the cache ----------------------------------------------------------------

def test_cache_dir_default_and_env(monkeypatch, tmp_path):
    monkeypatch.delenv("TKC_CACHE_DIR", raising=False)
    assert cache.cache_dir() == cache.Path.home() / ".cache" / "tkc"
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    assert cache.cache_dir() == tmp_path


def test_compiler_hash_is_memoized_hex():
    h = cache.compiler_hash()
    assert len(h) == 64 and int(h, 16) >= 0
    assert cache.compiler_hash() is h


def test_compiler_hash_covers_tkc_sources(tmp_path, monkeypatch):
    """Hash snapshots of tkc/ (the live tree may be edited meanwhile): equal
    for equal files wherever they live, different after any edit of the
    compiler's sources, unchanged by edits of the runtime or interpreter."""
    import shutil
    import tkc
    src = os.path.dirname(tkc.__file__)
    copy_root = tmp_path / "tkc"
    shutil.copytree(src, copy_root, ignore=shutil.ignore_patterns("__pycache__"))
    script = textwrap.dedent("""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("tkc", sys.argv[1] + "/__init__.py",
                                                      submodule_search_locations=[sys.argv[1]])
        sys.modules["tkc"] = importlib.util.module_from_spec(spec)
        import tkc.runtime.cache as c
        print(c.compiler_hash())
    """)
    def hash_of_copy(root=copy_root):
        out = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()
    first = hash_of_copy()
    shutil.copytree(copy_root, tmp_path / "elsewhere" / "tkc")
    assert hash_of_copy(tmp_path / "elsewhere" / "tkc") == first
    with open(copy_root / "dialect" / "tk.irdl.mlir", "a") as f:
        f.write("\n// edited\n")
    second = hash_of_copy()
    (copy_root / "lowering" / "new_module.py").write_text("x = 1\n")
    third = hash_of_copy()
    assert len({first, second, third}) == 3
    # the runtime, interpreter and CLI do not decide a cubin: editing them keeps the cache
    (copy_root / "runtime" / "new_module.py").write_text("x = 1\n")
    with open(copy_root / "interpreter" / "machine.py", "a") as f:
        f.write("\n# edited\n")
    assert hash_of_copy() == third


def test_make_key_stable_and_sensitive(monkeypatch):
    k = cache.make_key("def f(): pass", "M=64", "sm_90a")
    assert k == cache.make_key("def f(): pass", "M=64", "sm_90a") and len(k) == 64
    others = {cache.make_key("def f(): pass ", "M=64", "sm_90a"),
              cache.make_key("def f(): pass", "M=128", "sm_90a"),
              cache.make_key("def f(): pass", "M=64", "sm_100a"),
              cache.make_key("def f(): pass", "M=64")}
    assert cache.make_key("def f(): pass", "M=64") == k  # target defaults to sm_90a
    assert len(others - {k}) == 3
    monkeypatch.setattr(cache, "compiler_hash", lambda: "another compiler")
    assert cache.make_key("def f(): pass", "M=64", "sm_90a") != k


def test_store_then_lookup(cache_root):
    assert cache.lookup(KEY) is None
    path = cache.store(KEY, artifact())
    assert path == cache_root / KEY[:2] / KEY
    found = cache.lookup(KEY)
    assert found.cubin == artifact().cubin and found.manifest == artifact().manifest
    assert [p.name for p in cache_root.iterdir()] == [KEY[:2]]  # no temp folder left


def test_store_same_key_twice_keeps_first(cache_root):
    cache.store(KEY, artifact())
    cache.store(KEY, Artifact(b"other bytes", manifest()))
    assert cache.lookup(KEY).cubin == artifact().cubin
    assert [p.name for p in cache_root.iterdir()] == [KEY[:2]]


def test_stale_temp_dir_is_not_an_entry(cache_root):
    cache_root.mkdir(parents=True)
    stale = cache_root / ".tmp-crashed"
    artifact().save(stale)  # a store killed before its rename
    assert cache.lookup(KEY) is None
    old = 0  # make it look hours old: the next store removes it
    os.utime(stale, (old, old))
    cache.store(KEY, artifact())
    assert not stale.exists() and cache.lookup(KEY) is not None


def test_corrupt_entry_warns_once_and_is_replaced(cache_root):
    entry = cache_root / KEY[:2] / KEY
    entry.mkdir(parents=True)
    (entry / MANIFEST).write_text("{}")
    with pytest.warns(RuntimeWarning, match="corrupt tkc cache entry"):
        assert cache.lookup(KEY) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.lookup(KEY) is None  # no second warning
    cache.store(KEY, artifact())
    assert cache.lookup(KEY).cubin == artifact().cubin


def test_entry_for_another_key_is_ignored(cache_root):
    other = "cd" + "1" * 62
    artifact(source={"key": other, "compiler": ""}).save(cache_root / KEY[:2] / KEY)
    with pytest.warns(RuntimeWarning, match=f"manifest is for key {other}"):
        assert cache.lookup(KEY) is None


@pytest.mark.parametrize("key", ["../../etc", "AB" + "0" * 62, "abc", 12])
def test_bad_keys_rejected(cache_root, key):
    with pytest.raises(TkcError, match="bad cache key"):
        cache.lookup(key)


def test_offline(monkeypatch):
    monkeypatch.delenv("TKC_OFFLINE", raising=False)
    assert not cache.offline()
    monkeypatch.setenv("TKC_OFFLINE", "1")
    assert cache.offline()
    monkeypatch.setenv("TKC_OFFLINE", "0")
    assert not cache.offline()


def test_missing_error_names_build_command(cache_root):
    err = cache.missing("gemm", KEY)  # the line the error must point at
    line = sys._getframe().f_lineno - 1
    assert isinstance(err, TkcError)
    assert err.message == (
        f"no artifact for kernel 'gemm' (key {KEY[:12]}...) in {cache_root} and TKC_OFFLINE=1 "
        f"forbids compiling here; build it on a machine with MLIR: "
        f"`TKC_CACHE_DIR={cache_root} tkc build`")
    assert err.where == f"{__file__}:{line}"


def test_missing_error_without_mlir_says_so(cache_root):
    """A miss on a machine whose MLIR bindings do not import: why it cannot
    compile (the import's error), the two ways out, and the build command."""
    err = cache.missing("gemm", KEY, no_mlir=ModuleNotFoundError("No module named 'mlir'"))
    assert err.message == (
        f"no artifact for kernel 'gemm' (key {KEY[:12]}...) in {cache_root}, and compiling it needs MLIR's "
        f"Python bindings, which do not import here (No module named 'mlir'): install tkc's dependencies, "
        f"or build it on a machine with MLIR and run with TKC_OFFLINE=1: `TKC_CACHE_DIR={cache_root} tkc build`")


# -- the grid language ----------------------------------------------------------

ENV = {"c.c": 130, "c.r": 64, "q.d": 0, "n": 7}


@pytest.mark.parametrize("exprs, expected", [
    (["1", "1", "1"], (1, 1, 1)),
    (["cdiv(c.c, 64)", "cdiv(c.r, 64)", "n"], (3, 1, 7)),
    (["c.c // 64 % 2 + 1", "(c.r - 1) * 2", "-(-n)"], (1, 126, 7)),
    (["min(c.c, 4)", "max(c.r, n) - 60", "cdiv(n * c.c, 1000)"], (4, 4, 1)),
    (["whole(c.c, 2)", "whole(c.r, 64) * 3", "1"], (65, 3, 1)),
])
def test_grid_evaluates(exprs, expected):
    assert evaluate(exprs, ENV) == expected


@pytest.mark.parametrize("exprs, message", [
    (["c.c ** 2", "1", "1"], "grid x 'c.c ** 2': 'c.c ** 2' is not in the grid language"),
    (["1", "c.c / 2", "1"], "grid y 'c.c / 2': 'c.c / 2' is not in the grid language"),
    (["1", "1", "abs(n)"], "grid z 'abs(n)'"),
    (["__import__('os')", "1", "1"], "is not in the grid language"),
    (["c.x", "1", "1"], "'c.x' is not in the grid language"),
    (["c.c.c", "1", "1"], "is not in the grid language"),
    (["2.5", "1", "1"], "'2.5' is not in the grid language"),
    (["True", "1", "1"], "'True' is not in the grid language"),
    (["n if n else 1", "1", "1"], "is not in the grid language"),
    (["min(n, 1, 2)", "1", "1"], "is not in the grid language"),
    (["cdiv(", "1", "1"], "grid x 'cdiv(': cannot parse it"),
    (["m.c", "1", "1"], "unknown name 'm.c'"),
    (["q.d", "1", "1"], "grid x = 0 from 'q.d': empty launch"),
    (["1", "q.d - 3", "1"], "grid y = -3 from 'q.d - 3': empty launch"),
    (["1", "70000", "1"], "grid y = 70000 from '70000': exceeds CUDA's limit of 65535"),
    (["n // q.d", "1", "1"], "grid x 'n // q.d': division by zero"),
    (["cdiv(n, q.d)", "1", "1"], "division by zero"),
    (["whole(c.c, 4)", "1", "1"], "grid x 'whole(c.c, 4)': 130 is not a multiple of 4"),
    (["whole(n, q.d)", "1", "1"], "division by zero"),
    (["1", "1"], "three expression strings"),
])
def test_grid_rejects(exprs, message):
    with pytest.raises(TkcError) as info:
        evaluate(exprs, ENV)
    assert message in str(info.value)


# -- no MLIR in the runtime -----------------------------------------------------

def test_runtime_imports_no_mlir(tmp_path):
    """Import tkc.runtime and use it with `mlir` (and cuda-bindings) unimportable."""
    script = textwrap.dedent(f"""
        import json, sys
        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("mlir", "cuda"):
                    raise ImportError("refused: " + name)
        sys.meta_path.insert(0, Refuse())
        import numpy as np
        import tkc.runtime as rt
        from tkc.diagnostics import TkcError
        from tkc.runtime.args import Signature
        a = rt.Artifact(b"cubin", json.loads({json.dumps(MANIFEST_GEMM)!r}))
        a.save({str(tmp_path)!r})
        a = rt.Artifact.load({str(tmp_path)!r})
        f32 = np.zeros((128, 64), np.float32)
        m = dict(a.manifest, params=[dict(p, dtype="f32") if p["kind"] == "gl" else p
                                     for p in a.manifest["params"]])
        env = Signature(m).bind([f32, f32, 2.0], host_ok=True).env
        assert rt.evaluate(a.manifest["grid"], env) == (1, 2, 1), env
        rt.make_key("src", "spec")
        try:
            rt.launch(a, [f32, f32, 1.0])
            raise SystemExit("launch accepted f32 for a bf16 parameter")
        except TkcError as e:
            assert "expected dtype bf16, found f32" in str(e), e
        bad = [m for m in sys.modules if m.split(".")[0] in ("mlir", "cuda")]
        assert not bad, bad
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr + out.stdout
