"""Reference numerics and fixtures shared by the CPU tests (no test file imports another)."""
from __future__ import annotations

import zlib

import numpy as np

from tkc.runtime.cache import cache_dir

# The machine's artifact cache (TKC_CACHE_DIR, else ~/.cache/tkc) as the run
# starts: conftest.py imports this module before any test can change the
# environment. conftest.py's artifact_cache fixture builds through it.
MACHINE_CACHE = str(cache_dir())


def rng_of(request) -> np.random.Generator:
    """A Generator seeded by the test's id. A module whose tests draw inputs
    from one module-level RNG replaces it with this before each test (an
    autouse fixture): else a test's inputs depend on which tests ran before it
    in its process, which xdist changes from run to run, and an input-dependent
    rounding error fails some runs only."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def ref_bf16(x):
    """Round to nearest-even bf16 in float64 (an independent algorithm):
    bf16 keeps 8 significant bits, so scale by the ulp and np.round (ties to even)."""
    x = np.asarray(x, np.float64)
    _, e = np.frexp(x)  # |x| = m * 2**e, 0.5 <= m < 1
    ulp = np.exp2(np.maximum(e - 8, -133).astype(np.float64))
    r = np.round(x / ulp) * ulp
    r = np.where(np.abs(r) >= 2.0 ** 128, np.copysign(np.inf, x), r)
    return np.where(np.isfinite(x), r, x).astype(np.float32)


# The runtime tests' kernel: a manifest with gl, static/runtime/divisible dims,
# an f32 and an i32 scalar (the i32 feeds the grid), and arguments that fit it.
SCALE_MANIFEST = {
    "version": 1, "kernel": "scale", "target": "sm_90a", "warps": 2, "block": [64, 1, 1],
    "grid": ["cdiv(x.r, 32)", "x.d", "n"], "shared_bytes": 1024,
    "params": [
        {"name": "x", "kind": "gl", "dtype": "f32", "dims": [1, None, None, 64], "divisible": [1, 1, 16, 64]},
        {"name": "y", "kind": "gl", "dtype": "f16", "dims": [1, 1, None, None], "divisible": [1, 1, 1, 8]},
        {"name": "s", "kind": "scalar", "dtype": "f32"},
        {"name": "n", "kind": "scalar", "dtype": "i32"},
    ],
}


def aligned(shape, dtype, align=64):
    """An array of ones whose data starts on an `align`-byte boundary."""
    n, size = int(np.prod(shape)), np.dtype(dtype).itemsize
    raw = np.ones(n + align // size, dtype)
    skip = (-raw.ctypes.data % align) // size
    return raw[skip:skip + n].reshape(shape)


def good_args():
    return [aligned((2, 32, 64), np.float32), aligned((16, 24), np.float16), 0.5, 3]


class Launch:
    """A stand-in for a tkc.Kernel in the torch ops' CPU tests: `run(*args)`
    launches (e.g. through the interpreter), and `prepare(*args)` returns what
    the ops keep per argument signature (the runtime's Prepared), which is
    later called with tensors whose data pointers are those of the prepared
    arguments' views: it re-makes each view (its shape and strides over the
    passed tensor's storage) before running; the `free` ones are passed as
    they come (their dims and strides may change between calls)."""

    def __init__(self, run):
        self.run = run

    def __call__(self, *args):
        self.run(*args)

    def prepare(self, *args, bound=(), free=()):
        import torch
        specs = [(tuple(a.shape), a.stride()) if isinstance(a, torch.Tensor) and i not in free else None
                 for i, a in enumerate(args)]

        def launch(*xs):
            given = iter(xs)  # the bound arguments keep their prepare-time values
            full = [args[i] if i in bound else next(given) for i in range(len(args))]
            self.run(*(_view(x, spec) if spec else x for x, spec in zip(full, specs)))
        return launch


def _view(x, spec):
    """The prepared view's shape and strides over x's memory; x a tensor or a
    tkc.torchops.plans.At (memory at a byte offset into a tensor)."""
    if hasattr(x, "offset"):
        t = x.tensor
        return t.as_strided(*spec, t.storage_offset() + x.offset // t.element_size())
    return x.as_strided(*spec)


def interpreted(kernel) -> Launch:
    """A Launch running `kernel` in the interpreter on float32 / int32 copies
    of torch tensors; what it writes lands in the tensors (only those it
    changed: an input copied back onto itself would count as modified in
    place, which autograd refuses when the input is saved for a backward)."""
    import numpy as np
    import torch

    def run(*args):
        arrays = [a.detach().to(torch.int32 if a.dtype == torch.int32 else torch.float32)
                  .contiguous().numpy().copy() if isinstance(a, torch.Tensor) else a for a in args]
        before = [arr.copy() if isinstance(arr, np.ndarray) else None for arr in arrays]
        kernel.interpret(*arrays)
        with torch.no_grad():
            for a, arr, old in zip(args, arrays, before):
                if isinstance(a, torch.Tensor) and a.dtype != torch.int32 \
                        and not np.array_equal(arr, old, equal_nan=True):
                    a.copy_(torch.from_numpy(arr).view(a.shape))
    return Launch(run)


def attention_qkv(B, Hq, Hkv, Lq, Lk, D, blhd=False, seed=0):
    """Random bf16 q [B, Hq, Lq, D], k and v [B, Hkv, Lk, D] that require
    grad, from a seeded CPU generator; blhd: views of [B, L, H, D] memory
    (FlashAttention's layout)."""
    import torch
    g = torch.Generator().manual_seed(seed)

    def make(H, L):
        t = torch.randn(B, L, H, D, generator=g) if blhd else torch.randn(B, H, L, D, generator=g)
        t = t.bfloat16()
        return (t.transpose(1, 2) if blhd else t).requires_grad_()
    return make(Hq, Lq), make(Hkv, Lk), make(Hkv, Lk)


def grads_match(y, ref, dy, tensors, tol: float) -> bool:
    """y.backward(dy) and ref.backward(dy in float64) give each of tensors
    the same gradient within tol (relative, in the 2-norm)."""
    y.backward(dy)
    got = [t.grad.clone() for t in tensors]
    for t in tensors:
        t.grad = None
    ref.backward(dy.double())
    return all(float((g.double() - t.grad.double()).norm() / t.grad.double().norm()) < tol
               for g, t in zip(got, tensors))


def marker_line(path: str, marker: str) -> int:
    """The number of the line of `path` that ends with `# @marker` (a test
    marks the line an error must point at)."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# @{marker}"):
                return i
    raise AssertionError(marker)


def refused_at(trace, path: str, marker: str, *words):
    """trace() raises a TkcError located at `path`'s line marked `marker`,
    whose message holds each of words; the error."""
    import pytest

    from tkc.diagnostics import TkcError
    with pytest.raises(TkcError) as info:
        trace()
    e = info.value
    assert e.where.startswith(f"{path}:{marker_line(path, marker)}:"), (e.where, e.message)
    for w in words:
        assert w in e.message, e.message
    return e


def staged(kernel):
    """The kernel's tile IR module after the tile pipeline (compile_to "tile")."""
    from tkc.compiler import compile_to
    module = kernel.trace()
    compile_to(module, "tile")
    return module


def refused_here(call, message: str, path: str) -> None:
    """call() raises a TkcError whose message holds `message`, located in the
    test file `path` (the caller's line, not tkc's)."""
    import pytest

    from tkc.diagnostics import TkcError
    with pytest.raises(TkcError) as info:
        call()
    assert message in info.value.message, info.value.message
    assert info.value.where.startswith(path)


def nested_ops(op):
    """Every op nested in op, in program order (a recursive pre-order walk)."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield inner.operation
                yield from nested_ops(inner.operation)


def recording_driver(monkeypatch) -> tuple[list, list]:
    """A driver that launches nothing (every launch recorded as (grid, the
    frame's decoded parameters)) and encodes tensor maps as their address
    repeated (each recorded: its EncodeArgs). Returns (launches, encoded)."""
    from tkc.runtime import driver
    launches, encoded = [], []
    monkeypatch.setattr(driver, "compute_capability", lambda device: (9, 0))
    monkeypatch.setattr(driver, "load", lambda *a: driver.Function("m", "fn", 0))
    monkeypatch.setattr(driver, "context", lambda device: None)
    monkeypatch.setattr(driver, "launch", lambda fn, grid, block, shared, stream, values, cluster,
                        current: launches.append((grid, values.decoded())))
    monkeypatch.setattr("tkc.runtime.tensormap.encode",
                        lambda args: encoded.append(args) or args.address.to_bytes(8, "little") * 16)
    return launches, encoded
