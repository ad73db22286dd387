"""Tuned tables: which configuration each autotuned kernel runs, per key and GPU.

Results are data, kept as JSON in two places, read in this order:

- this machine's: `$TKC_CACHE_DIR/tuned/<gpu>-<compiler>.json`, written by
  tuning here (measure.py, `tkc tune`), one file per GPU name and compiler
  version (runtime.cache.compiler_hash), since another compiler makes other
  kernels of the same configurations;
- the package's: `tkc/tune/tables/<gpu>.json`, shipped with tkc: the
  library's kernels tuned on that GPU at the commit the file names.

A GPU the package has no table for reads the reference GPU's (the H200's,
tkc's measured GPU); a key in none runs the space's default. The GPU is the current CUDA
device's name; without one (building ahead of time on a CPU machine) it is
$TKC_DEVICE_NAME, else the H200, the GPU tkc's tables are measured on.
File format: {"device", "compiler", "commit", "entries": {name: {key: row}}}
with row = {"config": {...}, "us": best µs, "spread": the best's (max - min) / median over the
rounds (rows tuned since 2026-11-29), "untuned": the configuration the key ran before (rows
tuned since 2026-12-01), "candidates": {config: µs}, "rejected": {config: why}};
keys are the repr of the autotuned key. A machine's table keeps every candidate's time (the
tuning's log); the package's keeps the fastest KEPT and the untuned one's, the evidence of a
pick, since every process that looks a key up reads the whole file (the H200's, with all its
candidates, was 6.7 MB: 0.12 s to parse at a process's first tuned call).
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import tempfile
import time
from pathlib import Path

from ..diagnostics import TkcError

__all__ = ["KEPT", "batched", "device_name", "lookup", "package_path", "record", "ship", "trimmed", "user_path"]

PACKAGE_DIR = Path(__file__).resolve().parent / "tables"
REFERENCE_GPU = "NVIDIA H200"
KEPT = 3   # the candidates' times a package row keeps: the fastest three (and the untuned one's)

_loaded: dict = {}  # path -> (mtime, entries)
_pending: dict = {}  # within batched(): path -> a table's data with rows not yet written
_since: list = []    # within batched(): the time of its last write
WRITE_EVERY = 10.0  # seconds


def device_name() -> str:
    """The GPU the tables are read for (see the module docstring)."""
    env = os.environ.get("TKC_DEVICE_NAME")
    if env:
        return env
    return _driver_name() or REFERENCE_GPU


@functools.cache
def _driver_name() -> str | None:
    try:
        from ..runtime import driver
        return driver.device_name(0)
    except Exception:  # noqa: BLE001  (no driver, no GPU: the reference GPU's tables)
        return None


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def user_path(device: str | None = None) -> Path:
    from ..runtime.cache import cache_dir, compiler_hash
    return cache_dir() / "tuned" / f"{_slug(device or device_name())}-{compiler_hash()[:16]}.json"


def package_path(device: str | None = None) -> Path:
    return PACKAGE_DIR / f"{_slug(device or device_name())}.json"


def _entries(path: Path) -> dict:
    """The file's entries, read again when it changed (another process tuned);
    within batched() with rows not yet written, those of the data to write."""
    if path in _pending:
        return _pending[path]["entries"]
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return {}
    known = _loaded.get(path)
    if known is None or known[0] != mtime:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        known = _loaded[path] = (mtime, data.get("entries", {}))
    return known[1]


def lookup(name: str, key, device: str | None = None) -> dict | None:
    """The tuned configuration of `name` for `key` (this machine's table first), or None."""
    text = repr(key)
    device = device or device_name()
    paths = [user_path(device), package_path(device)]
    if device != REFERENCE_GPU:  # a GPU without its own table: the reference GPU's
        paths.append(package_path(REFERENCE_GPU))
    for path in paths:
        row = _entries(path).get(name, {}).get(text)
        if row is not None:
            return row["config"]
    return None


def record(name: str, key, row: dict, device: str | None = None, path: Path | None = None) -> Path:
    """Write one key's row into this machine's table (or `path`), atomically
    (within `batched`, at most every WRITE_EVERY seconds and at its end)."""
    from ..runtime.cache import compiler_hash
    path = path or user_path(device)
    data = _pending.get(path)
    if data is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
    data.setdefault("device", device or device_name())
    data.setdefault("compiler", compiler_hash())
    data.setdefault("entries", {}).setdefault(name, {})[repr(key)] = row
    if not _since:
        _write(path, _text(data))
        return path
    _pending[path] = data   # (which lookup reads meanwhile)
    if time.monotonic() - _since[0] >= WRITE_EVERY:
        _flush()
    return path


@contextlib.contextmanager
def batched():
    """record() within it writes each table at most every WRITE_EVERY seconds
    and at the end: a write is the whole file (a machine's table keeps every
    candidate's time, ~3.5 KB a tkc.matmul key), so `tkc tune` writing it at
    each key spent ~0.1 s a key at 500 keys (8% of tuning small keys on the
    H200, 12-01) and would spend ~1 s at the library's ~4,700."""
    _since[:] = [time.monotonic()]
    try:
        yield
    finally:
        _flush()
        _since.clear()


def _flush() -> None:
    while _pending:
        path, data = _pending.popitem()
        _write(path, _text(data))
    _since[:] = [time.monotonic()]


def _text(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True)


def _write(path: Path, text: str) -> None:
    """path's new text, atomically: a process reading the table meanwhile
    (lookup) sees the old file or the new, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tuned-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)   # as a file written plainly (mkstemp's is the owner's alone)
    os.replace(tmp, path)
    _loaded.pop(path, None)


def ship(src: Path, source: str | None = None, only: str = "") -> tuple[Path, int, int, list]:
    """Copy a machine's tuned rows (its table, as `tkc tune` writes it) into
    the package's table of that GPU: (the package file, rows copied, rows it
    already held, the copied rows' gains: their untuned configuration's time
    over their pick's, less 1, where a row names it). Each row replaces its
    key's or joins the end of its space (the file's order kept, so a diff
    shows what changed), trimmed (`trimmed`), with `source` (how it was
    tuned) where given; `only`: spaces whose name contains it. A row
    the table holds as it is (but its source) is left as it is: a machine's
    file keeps the rows of its earlier runs, which an earlier --ship copied
    with their own source."""
    try:
        data = json.loads(Path(src).read_text())
    except (OSError, ValueError) as e:
        raise TkcError(f"tkc tune --ship: {src} is not a tuned table ({type(e).__name__}: {e})") from None
    device = data.get("device") or device_name()
    path = package_path(device)
    try:
        package = json.loads(path.read_text())
    except OSError:
        package = {"device": device, "entries": {}}
    count, held, gains = 0, 0, []
    for name, rows in data.get("entries", {}).items():
        if only not in name:
            continue
        space = package.setdefault("entries", {}).setdefault(name, {})
        for key, row in rows.items():
            row = trimmed(row)
            if _unsourced(space.get(key)) == _unsourced(row):
                held += 1
                continue
            space[key] = dict(row, source=source) if source else row
            count += 1
            untuned = row.get("candidates", {}).get(row.get("untuned"))
            if untuned and row.get("us"):
                gains.append(untuned / row["us"] - 1)
    _write(path, json.dumps(package, indent=1) + "\n")
    return path, count, held, gains


def trimmed(row: dict, default: str | None = None) -> dict:
    """The row as the package keeps it: the times of its KEPT fastest
    candidates and of the untuned configuration (the row's `untuned`;
    a row tuned before rows named it: `default`, its space's), not every one's."""
    times = row.get("candidates")
    if not times:
        return row
    kept = set(sorted(times, key=times.get)[:KEPT]) | {row.get("untuned", default)}
    return dict(row, candidates={t: us for t, us in times.items() if t in kept})


def _unsourced(row: dict | None) -> dict | None:
    return None if row is None else {k: v for k, v in row.items() if k != "source"}
