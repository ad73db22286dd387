"""Building kernels: one at a time or in parallel processes.

`build_all` builds a list of kernels (the cache's entries first, the rest
compiled) and reports each as a row (kernel, registers, spills, wgmma,
shared bytes, cache path, cached, seconds, error, warnings: tkc.progress
prints them). `tkc build` and the tuner (tkc/tune/measure.py) build through
it; a broken kernel is a row with its error, never an exception.
"""
from __future__ import annotations

import os
import sys
import time

from .diagnostics import TkcError, library_warnings

__all__ = ["build_all", "build_one", "quietly"]

_POOL_KERNELS: list = []  # the kernels a forked build worker compiles (by index)
POOL_AT_LEAST = 8  # uncached kernels below which a pool costs more than it saves


def build_all(kernels: list, force: bool, jobs: int | None, files=(), progress=None) -> list[dict]:
    """Each kernel built and reported to `progress` (tkc.progress); the
    uncached ones in `jobs` processes when there are enough of them
    (compiling is single-threaded Python and ptxas: a process a core). The
    workers are forked while this process has loaded neither MLIR nor torch
    (whose threads a fork would not carry); else spawned, and each makes the
    kernel list again (the library and `files`) and builds kernels by cache
    key. A worker returns its kernel's row; this process reports it."""
    import concurrent.futures
    import multiprocessing
    from .progress import Progress
    from .runtime import cache
    progress = progress or Progress(len(kernels))
    jobs = jobs or os.cpu_count() or 1
    # A kernel listed twice (the library lists two GEMMs again among
    # tkc.matmul's) is compiled once; its second row reads the cache after.
    first: dict[str, int] = {}
    todo, again = [], []
    for i, k in enumerate(kernels):
        key = k.artifact_key()
        if key in first:
            again.append(i)
        else:
            first[key] = i
            if force or not cache.entry_dir(key).is_dir():
                todo.append(i)
    if jobs < 2 or len(todo) < POOL_AT_LEAST:
        rows = []
        for i, k in enumerate(kernels):
            progress.start(i, k.name)
            rows.append(build_one(k, force and i not in again))
            progress.finish(i, rows[-1])
        return rows
    _POOL_KERNELS[:] = kernels
    if _forkable():
        pool = concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"))
        submit = lambda i: pool.submit(_pool_build, i, force)  # noqa: E731
    else:
        pool = concurrent.futures.ProcessPoolExecutor(
            jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_spawned,
            initargs=(list(files),))
        submit = lambda i: pool.submit(_spawn_build, kernels[i].artifact_key(), force)  # noqa: E731
    rows: dict[int, dict] = {}
    with pool:
        futures = {submit(i): i for i in todo}
        progress.show(f"({jobs} processes)")
        for i in sorted(set(range(len(kernels))) - set(todo) - set(again)):  # cached: read here
            rows[i] = _pool_build(i, force)
            progress.finish(i, rows[i])
        for done in concurrent.futures.as_completed(futures):
            i = futures[done]
            rows[i] = done.result()
            progress.finish(i, rows[i])
    for i in again:  # built (or found) under its first listing
        rows[i] = _pool_build(i, False)
        progress.finish(i, rows[i])
    _POOL_KERNELS.clear()
    return [rows[i] for i in range(len(kernels))]


def _forkable() -> bool:
    return hasattr(os, "fork") and not any(m in sys.modules for m in ("mlir._mlir_libs._mlir", "torch"))


def _pool_build(i: int, force: bool) -> dict:
    return build_one(_POOL_KERNELS[i], force)


_BY_KEY: dict = {}  # a spawned worker's kernels by cache key


def _spawned(files: list) -> None:
    """A spawned worker's start: the kernels the parent listed, made again."""
    from .frontend import kernels_in_file
    from .kernels import library
    for k in library() + [k for f in files for k in kernels_in_file(f)]:
        _BY_KEY.setdefault(k.artifact_key(), k)


def _spawn_build(key: str, force: bool) -> dict:
    return build_one(_BY_KEY[key], force)


def quietly(fn, lines: list):
    """fn()'s result; the lines it wrote on stderr (the compiler's warnings)
    added to `lines`, once each, even when it raises. The bank-conflict
    report says a warning once per process: forgetting those said makes
    each kernel report its own."""
    import contextlib
    import io
    banks = sys.modules.get("tkc.passes.banks")
    if banks is not None:
        banks._WARNED.clear()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), library_warnings():   # (the library's notes too: summarised)
            return fn()
    finally:
        lines += dict.fromkeys(ln for ln in err.getvalue().splitlines() if ln.strip())


def build_one(kernel, force: bool) -> dict:
    """Build one kernel: its row (the table's columns, and cached, reused,
    seconds, error, warnings: tkc.progress). Writes nothing: the caller
    reports it."""
    from .pass_pipeline import timed
    from .runtime import cache
    t0 = time.perf_counter()
    warned: list[str] = []
    try:
        cached = not force and cache.entry_dir(kernel.artifact_key()).is_dir()
        with timed() as record:
            art = quietly(lambda: kernel.build(force=force), warned)
    except Exception as e:  # noqa: BLE001  (one broken kernel must not hide the others)
        if os.environ.get("TKC_DEBUG") == "1":
            raise
        what = str(e) if isinstance(e, TkcError) else f"internal error: {type(e).__name__}: {e}"
        return {"kernel": kernel.name, "registers": "-", "spills": "-", "wgmma": "-",
                "shared bytes": "-", "cache path": "FAILED", "over": False, "cached": False,
                "seconds": time.perf_counter() - t0, "error": what, "warnings": warned}
    res = art.manifest.get("resources", {})
    stores, loads = int(res.get("spill_stores", 0)), int(res.get("spill_loads", 0))
    key = art.manifest.get("source", {}).get("key") or kernel.artifact_key()
    serial = "serialised" if res.get("wgmma_serialized") else "-"
    allowed = getattr(kernel, "spills", 0)  # a declared allowance: tkc.kernel(spills=N), of stores
    spills = str(stores) + (f" st + {loads} ld" if loads else "")
    return {"kernel": kernel.name, "registers": str(res.get("registers", "?")),
            "spills": spills + (f" (<= {allowed} st declared)" if allowed and (stores or loads) else ""),
            "wgmma": serial, "shared bytes": str(art.manifest.get("shared_bytes", "?")),
            "cache path": str(cache.entry_dir(key)),
            "over": stores > allowed or ((stores or loads) and not allowed),
            "cached": cached, "seconds": time.perf_counter() - t0, "error": None,
            "warnings": warned,   # compiled without ptxas: an earlier build's cubin (runtime/reuse.py)
            "reused": bool(record) and all(phase != "ptxas" for phase, _ in record)}
