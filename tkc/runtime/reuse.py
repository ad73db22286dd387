"""An earlier build's PTX and cubin, reused where a new build would make
the same ones.

An artifact's key hashes the kernel's source and the whole compiler (cache.py),
so any edit to tkc's compiler, a docstring included, gives every kernel a new
key and a full compile. Most of that compile is spent after the kernel is
lowered (LLVM to PTX about a third, ptxas about two fifths: `python -m
tkc.bench.compile_time --library N`), on input that such an edit rarely
changes. So two indexes beside the entries name the artifact that holds a
stage's output, by a hash of that stage's input:

- "ptx": the lowered module (the LLVM dialect's bytecode, its locations
  included; the pipeline that makes PTX of it; which MLIR and LLVM
  libraries run that) -> its PTX;
- "cubin": the PTX (and ptxas: its flags, the arch, which binary) -> its
  cubin and ptxas's report.

An index is a file `<cache>/reuse/<stage>/<key[:2]>/<key>` holding an
artifact key; Kernel.build writes it once it has stored that artifact (from
the manifest's source.stages), and it is read back only while the artifact
still has the files the stage needs (and loads). Both inputs determine their
outputs (LLVM and ptxas are deterministic), so a hit is the output a compile
would make. A forced build (`Kernel.build(force=True)`, what `tkc build
--force` and the compile-time benchmark run) reuses nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

from ..diagnostics import TkcError
from . import cache
from .artifact import CUBIN, MANIFEST, PTX, Artifact

STAGES = {"ptx": (PTX,), "cubin": (CUBIN, MANIFEST)}   # stage -> the files a hit reads
_KEY = re.compile(r"[0-9a-f]{64}")


def key(stage: str, *parts: bytes | str) -> str:
    """The index key of a stage's input (its parts length-prefixed, so no two
    different inputs hash the same bytes)."""
    h = hashlib.sha256(stage.encode())
    for part in parts:
        data = part.encode() if isinstance(part, str) else bytes(part)
        h.update(b"%d:" % len(data))
        h.update(data)
    return h.hexdigest()


def _index(stage: str, stage_key: str) -> Path:
    return cache.cache_dir() / "reuse" / stage / stage_key[:2] / stage_key


def find(stage: str, stage_key: str) -> Path | None:
    """The folder of the artifact an index names for this input, if it still
    holds the stage's files."""
    try:
        named = _index(stage, stage_key).read_text().strip()
    except OSError:
        return None
    if not _KEY.fullmatch(named):
        return None
    entry = cache.entry_dir(named)
    return entry if all((entry / name).is_file() for name in STAGES[stage]) else None


def ptx(stage_key: str) -> str | None:
    """The PTX an earlier build made of this lowered module, or None."""
    entry = find("ptx", stage_key)
    try:
        return None if entry is None else (entry / PTX).read_text()
    except (OSError, UnicodeDecodeError):
        return None


def cubin(stage_key: str) -> tuple[bytes, dict] | None:
    """(cubin, resources) an earlier build assembled of this PTX, or None
    (also where that artifact no longer loads: then this build assembles)."""
    entry = find("cubin", stage_key)
    if entry is None:
        return None
    try:   # the cubin and the (checked) manifest alone: not the PTX and tile IR Artifact.load reads too
        made = Artifact((entry / CUBIN).read_bytes(), json.loads((entry / MANIFEST).read_text()))
    except (OSError, ValueError, TkcError):
        return None
    resources = made.manifest.get("resources")
    return (made.cubin, resources) if resources else None


def note(artifact_key: str, stages: dict) -> None:
    """Index the stored artifact `artifact_key` under each {stage: key}
    (atomically: a reader sees the old name or the new one)."""
    for stage, stage_key in stages.items():
        if stage not in STAGES or not isinstance(stage_key, str) or not _KEY.fullmatch(stage_key):
            continue
        path = _index(stage, stage_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(artifact_key)
        os.replace(tmp, path)


def prune() -> int:
    """Remove the indexes whose artifact is gone: how many."""
    removed = 0
    for path in (cache.cache_dir() / "reuse").glob("*/*/*"):
        try:
            named = path.read_text().strip()
        except OSError:
            continue
        if not _KEY.fullmatch(named) or not cache.entry_dir(named).is_dir():
            path.unlink(missing_ok=True)
            removed += 1
    return removed
