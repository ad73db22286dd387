"""A generated program as a tkc.Kernel, and its arguments.

The source is compiled under the name `tkc-fuzz/<name>.py` and registered in
linecache, so inspect.getsource (the artifact cache's key), tracebacks and
located errors all read it as if it were a file; nothing is written to disk.
The same (seed, index) gives the same text, so the same cache key, on this
machine and on a GPU machine without MLIR.
"""
from __future__ import annotations

import hashlib
import linecache

import numpy as np

from ..interpreter.values import round_f8e4m3, round_f8e5m2   # (numpy only: no MLIR on a GPU machine)
from .core import Program


def kernel_of(p: Program):
    """The tkc.Kernel the program's source defines."""
    lines = p.source.splitlines(True)
    linecache.cache[p.filename] = (len(p.source), None, lines, p.filename)
    scope = {"__name__": f"tkc_fuzz_{p.name}", "__file__": p.filename}
    exec(compile(p.source, p.filename, "exec"), scope)  # noqa: S102 (our own generated text)
    return scope[p.name]


INT_DTYPES = {"i32": np.int32, "i64": np.int64}


def arrays(p: Program) -> list[np.ndarray]:
    """The arguments: inputs uniform in [-1, 1] (bf16 values for a bf16 gl),
    integers uniform in the Arg's `ints` range, or the Arg's `values`; outputs filled with 0.5 (7 for
    an integer gl: what no store reaches keeps it on both sides).
    A pure function of (seed, index)."""
    rng = np.random.default_rng([p.seed, p.index, 7])
    out = []
    for a in p.args:
        if a.values is not None:  # chosen by the generator (ragged.py's counts): no draw
            out.append(np.array(a.values, INT_DTYPES.get(a.dtype, np.float32)).reshape(a.shape))
        elif a.dtype in INT_DTYPES:
            x = (np.full(a.shape, 7) if a.output else rng.integers(a.ints[0], a.ints[1] + 1, a.shape))
            out.append(x.astype(INT_DTYPES[a.dtype]))
        elif a.output:
            out.append(np.full(a.shape, 0.5, np.float32))
        else:
            x = rng.uniform(-1.0, 1.0, a.shape).astype(np.float32)
            out.append(ROUND[a.dtype](x) if a.dtype in ROUND else x)
    return [_padded(p, a, x) if a.pad else x for a, x in zip(p.args, out)]


def _padded(p: Program, a, x: np.ndarray) -> np.ndarray:
    """x as a view of rows a.pad elements wider (a strided gl's argument);
    the pad is random for an input (a read through the wrong pitch gets
    other values), 0.5 for an output (gpu.py checks it stays so). Its own
    rng: the other arrays' draws stay as they were."""
    rng = np.random.default_rng([p.seed, p.index, 11, p.args.index(a)])
    back = rng.uniform(-1.0, 1.0, x.shape[:-1] + (x.shape[-1] + a.pad,)).astype(np.float32)
    if a.output:
        back[:] = 0.5
    elif a.dtype == "bf16":
        back = round_bf16(back)
    back[..., :x.shape[-1]] = x
    return back[..., :x.shape[-1]]


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bf16 (ties to even)."""
    bits = x.astype(np.float32).view(np.uint32)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.view(np.float32)


ROUND = {"bf16": round_bf16, "f8e4m3": round_f8e4m3, "f8e5m2": round_f8e5m2}   # an input's values


def digest(xs: list[np.ndarray]) -> str:
    """A short hash of arrays (so the GPU side knows it regenerated the same inputs)."""
    h = hashlib.sha256()
    for x in xs:
        h.update(np.ascontiguousarray(x).tobytes())
    return h.hexdigest()[:16]


def outputs(p: Program, xs: list) -> list:
    return [x for a, x in zip(p.args, xs) if a.output]
