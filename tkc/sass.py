"""SASS of a cubin, through cuobjdump (the CUDA toolkit's, or PyPI's
nvidia-cuda-cuobjdump), so HGMMA/UTMALDG can be checked without a GPU."""
from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .diagnostics import TkcError
from .runtime.cache import cache_dir


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
    """The SASS text of a cubin (TkcError when cuobjdump is missing or fails).
    Kept in the artifact cache (<cache>/sass/), keyed by the cubin and the
    tool: cuobjdump's nvdisasm takes ~0.5 s of CPU even for a tiny cubin, and
    the tests read the SASS of the same cached cubins run after run."""
    tool = cuobjdump()
    if tool is None:
        raise TkcError("cuobjdump not found: install the CUDA toolkit or "
                       "`pip install nvidia-cuda-cuobjdump`")
    info = os.stat(tool)
    key = hashlib.sha256(cubin + f"{tool}:{info.st_size}:{info.st_mtime_ns}".encode()).hexdigest()
    kept = cache_dir() / "sass" / f"{key}.txt"
    if kept.is_file():
        return kept.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        r = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        raise TkcError(f"cuobjdump failed: {r.stderr.strip()}")
    try:  # written aside and renamed: a reader never sees half of it
        kept.parent.mkdir(parents=True, exist_ok=True)
        fd, part = tempfile.mkstemp(dir=kept.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            f.write(r.stdout)
        os.replace(part, kept)
    except OSError:  # a read-only cache: the SASS is still right
        pass
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


def _instructions(sass: str):
    """(opcode with its modifiers, operands) per instruction, in order."""
    for line in sass.splitlines():
        if "/*" not in line or ";" not in line:
            continue
        body = line.split("*/", 1)[-1].split(";", 1)[0].strip()
        if body.startswith("@"):  # predicate guard
            body = body.split(None, 1)[-1] if " " in body else ""
        if not body:
            continue
        op, _, rest = body.partition(" ")
        yield op, [x.strip() for x in rest.split(",")] if rest else []


def unset_descriptor_registers(sass: str) -> list[str]:
    """HGMMAs that read a uniform register of their descriptors that no
    earlier instruction (in address order) writes: `gdesc[URn]` is A's
    descriptor in URn, URn+1 and B's in URn+2, URn+3 (A from registers: B's
    alone). ptxas 12.9 / 13.0 left the high words unset where a descriptor
    was one 64-bit add of a constant (tkc/lowering/wgmma.py); such a wgmma
    reads with a stale SBO and swizzle. Address order is the straight-line
    order of the code before a kernel's first loop, where the descriptors of
    the first wgmmas are built: a check for them, not a data-flow analysis."""
    written, out = set(), []
    for op, args in _instructions(sass):
        if op.startswith("HGMMA"):
            m = next((re.fullmatch(r"gdesc\[UR(\d+)\](?:\.\w+)*", a) for a in args
                      if a.startswith("gdesc[")), None)
            if m:
                n = int(m[1])
                regs_a = args[1].startswith("R")   # HGMMA d, a registers, gdesc[...]
                need = [n + 2, n + 3] if regs_a else [n, n + 1, n + 2, n + 3]
                missing = [f"UR{r}" for r in need if r not in written]
                if missing:
                    out.append(f"{op} {', '.join(args)}: {', '.join(missing)} never written before it")
        if args and re.fullmatch(r"UR\d+", args[0]):
            r = int(args[0][2:])
            mods = op.split(".")[1:]
            written.update({r, r + 1} if "64" in mods or "WIDE" in mods else {r})
    return out
