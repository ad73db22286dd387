"""SASS of a cubin, through cuobjdump (the CUDA toolkit's, or PyPI's
nvidia-cuda-cuobjdump), so HGMMA/UTMALDG can be checked without a GPU."""
from __future__ import annotations

import glob
import shutil
import subprocess
import tempfile
from pathlib import Path

from .diagnostics import TkcError


def cuobjdump() -> str | None:
    """Path of cuobjdump: PATH first, then the nvidia-cuda-cuobjdump wheel."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import nvidia
    except ImportError:
        return None
    hits = sorted(h for p in nvidia.__path__ for h in glob.glob(f"{p}/*/bin/cuobjdump"))
    return hits[-1] if hits else None


def disassemble(cubin: bytes) -> str:
    """The SASS text of a cubin (TkcError when cuobjdump is missing or fails)."""
    tool = cuobjdump()
    if tool is None:
        raise TkcError("cuobjdump not found: install the CUDA toolkit or "
                       "`pip install nvidia-cuda-cuobjdump`")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        r = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        raise TkcError(f"cuobjdump failed: {r.stderr.strip()}")
    return r.stdout


def opcodes(sass: str) -> dict[str, int]:
    """How often each opcode (the mnemonic before the first '.') appears."""
    counts: dict[str, int] = {}
    for line in sass.splitlines():
        if "/*" not in line or ";" not in line:
            continue
        body = line.split("*/", 1)[-1].strip()
        if body.startswith("@"):  # predicate guard
            body = body.split(None, 1)[-1] if " " in body else ""
        op = body.split(" ", 1)[0].split(".", 1)[0].rstrip(";")
        if op.isupper():
            counts[op] = counts.get(op, 0) + 1
    return counts
