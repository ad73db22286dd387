"""The content-addressed artifact cache.

key = sha256 of (kernel source, specialisation, target, compiler hash), so a
change to the kernel or to any part of tkc gives a new key and a stale
artifact is never picked up (a new key's compile still reuses an earlier
build's PTX and cubin where its lowered module or its PTX is the same:
reuse.py). Layout: `<cache>/<key[:2]>/<key>/` holding an
artifact folder. Entries are written into a temporary folder in the cache
root and renamed into place, so no reader ever sees a half-written entry and
two processes storing the same key both succeed.

`tkc build` fills the cache on a machine with MLIR; a GPU machine without it
runs from the cache with TKC_OFFLINE=1, where a miss is `missing(...)`.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import warnings
from pathlib import Path

from ..diagnostics import TkcError
from .artifact import Artifact
from .callsite import caller

_KEY = re.compile(r"[0-9a-f]{64}")
_TMP_PREFIX = ".tmp-"
_STALE_TMP_SECONDS = 3600
_warned: set[str] = set()


def cache_dir() -> Path:
    """$TKC_CACHE_DIR, else ~/.cache/tkc."""
    env = os.environ.get("TKC_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tkc"


def offline() -> bool:
    """TKC_OFFLINE=1: run only from the cache, never compile."""
    return os.environ.get("TKC_OFFLINE", "").strip().lower() in ("1", "true", "yes")


# What decides a cubin: the dialect, the frontend, the passes, the lowering,
# the compiler driver, the library kernels (whose helpers a kernel may call).
# The runtime, the interpreter, the CLI and the benchmarks do not, so editing
# them keeps the cache valid.
COMPILER_PARTS = ("dialect", "frontend", "passes", "lowering", "kernels", "dsl.py",
                  "compiler.py", "dtypes.py", "diagnostics.py", "ops.py", "__init__.py")


@functools.cache
def compiler_hash() -> str:
    """sha256 over the compiler's sources, COMPILER_PARTS of tkc/ (*.py and the
    dialect's *.mlir; sorted path + content)."""
    root = Path(__file__).resolve().parent.parent
    found = []
    for part in COMPILER_PARTS:
        p = root / part
        found += [p] if p.is_file() else [*p.rglob("*.py"), *p.rglob("*.mlir")]
    files = sorted(found, key=lambda p: p.relative_to(root).as_posix())
    h = hashlib.sha256()
    for path in files:
        data = path.read_bytes()
        # Length-prefix each part so no two different trees hash the same bytes.
        rel = path.relative_to(root).as_posix().encode()
        h.update(b"%d:%s%d:" % (len(rel), rel, len(data)))
        h.update(data)
    return h.hexdigest()


def make_key(source: str, specialisation: str, target: str = "sm_90a") -> str:
    """The cache key of one specialised kernel for one target."""
    blob = json.dumps({"source": source, "specialisation": specialisation, "target": target,
                       "compiler": compiler_hash()}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def entry_dir(key: str) -> Path:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise TkcError(f"bad cache key {key!r}: expected 64 lower-case hex digits")
    return cache_dir() / key[:2] / key


def lookup(key: str) -> Artifact | None:
    """The cached artifact for key, or None if there is none (or it is corrupt)."""
    path = entry_dir(key)
    if not path.is_dir():
        return None
    try:
        artifact = Artifact.load(path)
    except TkcError as e:
        _warn_once(key, f"ignoring corrupt tkc cache entry {path}: {e.message}")
        return None
    recorded = artifact.manifest["source"].get("key")
    if recorded and recorded != key:
        _warn_once(key, f"ignoring tkc cache entry {path}: its manifest is for key {recorded}")
        return None
    return artifact


def prune(keep: set[str]) -> tuple[int, int]:
    """Remove every entry whose key is not in keep: (entries, bytes) removed.
    The cache keeps every build's artifacts (a key changes with the compiler),
    so it only grows; what a GPU machine is sent should be only today's."""
    removed, size = 0, 0
    for entry in cache_dir().glob("*/*"):
        if entry.is_dir() and _KEY.fullmatch(entry.name) and entry.name not in keep:
            size += sum(f.stat().st_size for f in entry.rglob("*") if f.is_file())
            shutil.rmtree(entry)
            removed += 1
    return removed, size


def store(key: str, artifact: Artifact) -> Path:
    """Write artifact under key atomically; returns the entry's folder."""
    dest = entry_dir(key)
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_tmp(root)
    tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=root))
    try:
        artifact.save(tmp)
        dest.parent.mkdir(exist_ok=True)
        _publish(tmp, dest, key)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already if the rename won
    return dest


def _publish(tmp: Path, dest: Path, key: str) -> None:
    """Rename tmp to dest. An existing good entry wins (same key, same content);
    an existing corrupt one is moved aside and replaced."""
    for _ in range(2):
        try:
            os.rename(tmp, dest)
            return
        except OSError:
            if not dest.exists():
                raise
        if lookup(key) is not None:
            return
        trash = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=cache_dir()))
        try:
            os.rename(dest, trash / "old")
        except OSError:
            pass  # another process replaced it first: retry the rename
        shutil.rmtree(trash, ignore_errors=True)
    raise TkcError(f"cannot store the artifact for key {key} in {dest}")


def _remove_stale_tmp(root: Path) -> None:
    """Temp folders left by a killed store (never entries: lookups ignore them)."""
    now = time.time()
    for tmp in root.glob(_TMP_PREFIX + "*"):
        try:
            if now - tmp.stat().st_mtime > _STALE_TMP_SECONDS:
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            pass


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


class MissingArtifact(TkcError):
    """A cache miss where TKC_OFFLINE=1 forbids compiling: `command` is the
    build command (a torch op replaces it with the one for its own call)."""

    def __init__(self, message: str, where: str, command: str):
        super().__init__(f"{message}`{command}`", where)
        self.reason, self.command = message, command


def missing(name: str, key: str, source: str | None = None, no_mlir: ImportError | None = None) -> TkcError:
    """The error for a cache miss when TKC_OFFLINE=1 forbids compiling, or
    (no_mlir: the import's error) where MLIR's Python bindings, which
    compiling needs, do not import. The build command names the kernel's file
    unless it is the library's own (`tkc build` builds the library; `tkc
    build FILE.py` a file's kernels too)."""
    root = cache_dir()
    here = Path(__file__).resolve().parent.parent  # the tkc package
    path = Path(source).resolve() if source else None
    target = "" if path is None or here in path.parents else f" {_shown(path)}"
    why = " and TKC_OFFLINE=1 forbids compiling here; build it on a machine with MLIR: " if no_mlir is None else \
        (f", and compiling it needs MLIR's Python bindings, which do not import here ({no_mlir}): install "
         f"tkc's dependencies, or build it on a machine with MLIR and run with TKC_OFFLINE=1: ")
    return MissingArtifact(f"no artifact for kernel '{name}' (key {key[:12]}...) in {root}{why}", caller(),
                           f"TKC_CACHE_DIR={root} tkc build{target}")


def _shown(path: Path) -> str:
    """path relative to the working directory when it is below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
