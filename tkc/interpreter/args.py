"""The kernel's signature: finding it in a module, checking and binding arguments.

gl arguments are numpy arrays of 1-4 dims, viewed as 4-D by prepending 1s
(a view, so stores land in the caller's array). bf16 has no numpy dtype, so a
bf16 gl takes a float32 array holding bf16 values (writes are rounded to
bf16), an 8-bit float gl (f8e4m3, f8e5m2) likewise; f16 takes float16 or float32; f32 takes float32. Scalars are Python
numbers. Dims named alike (tk.dim_names) must have one size.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..diagnostics import TkcError, error
from ..dialect.types import GL, view
from ..dialect.kernel import arg_names, dim_names

ARRAY_DTYPES = {"bf16": ("float32",), "f16": ("float16", "float32"), "f32": ("float32",),
                "i32": ("int32",), "i64": ("int64",), "f8e4m3": ("float32",), "f8e5m2": ("float32",)}
SCALARS = ("f32", "i32")


@dataclass
class Signature:
    func: object  # the func.func op
    name: str
    warps: int
    grid: list[str]
    arg_names: list[str]
    arg_types: list  # GL views, or "f32" / "i32"
    dim_names: list  # per argument, its dims' names (None = unnamed; [] for a scalar)
    # the runtime's launch rules for these params (bind), made on the first
    # bind: reading them off the IR walks the kernel (a prepared Program's
    # runs, and run_ranks's ranks, share one)
    launch: object = None


def find_kernel(module, name: str | None):
    """The func.func with tk.kernel named `name` (default: the only one)."""
    ops = [op.operation for op in module.body.operations]
    kernels = [op for op in ops if op.name == "func.func" and "tk.kernel" in op.attributes]
    if name is not None:
        kernels = [k for k in kernels if k.attributes["sym_name"].value == name]
    if len(kernels) != 1:
        names = [k.attributes["sym_name"].value for k in kernels]
        what = f"named '{name}'" if name is not None else "(pass kernel=)"
        raise TkcError(f"expected one tk.kernel function {what}, found {len(kernels)}"
                       + (f": {', '.join(names)}" if names else ""))
    return kernels[0]


def signature(func) -> Signature:
    attrs = func.attributes
    types = [a.type for a in func.regions[0].blocks[0].arguments]
    arg_types = []
    for i, t in enumerate(types):
        v = view(t)
        if not isinstance(v, GL) and str(t) not in SCALARS:
            raise error(func, f"kernel argument {i} has type {t}: expected a !tk.gl, f32 or i32")
        arg_types.append(v if v is not None else str(t))
    names = arg_names(func)
    grid = [a.value for a in attrs["tk.grid"]] if "tk.grid" in attrs else ["1", "1", "1"]
    warps = attrs["tk.warps"].value if "tk.warps" in attrs else 1
    if warps < 1:
        raise error(func, f"tk.warps must be positive, got {warps}")
    return Signature(func, attrs["sym_name"].value, warps, grid, names, arg_types,
                     dim_names(func))


def bind(sig: Signature, args: list) -> tuple[list, dict[str, int]]:
    """Checked argument values, and the grid environment ("a.r" -> 128, "n" -> 5).

    The launch rules are the runtime's own (tkc.runtime.args.Signature, on the
    manifest's params that the lowering also writes): count, dtypes, static
    dims, divisibility, contiguity, 16-byte alignment, one size per dim name,
    TMA rows of 16 bytes, scalar ranges. Each array is checked as it would
    lie in GPU memory (in its gl's dtype); only what is numpy's own (the
    array dtypes a bf16 gl accepts, writability) is checked here."""
    from ..lowering.requirements import inplace, multiples, params, tma_params
    from ..runtime.args import Signature as Launch
    if len(args) != len(sig.arg_types):
        raise error(sig.func, f"kernel '{sig.name}' takes {len(sig.arg_types)} arguments "
                              f"({', '.join(sig.arg_names)}), got {len(args)}")
    from ..dialect.kernel import parallel_args
    from ..runtime.peers import Peers
    values, on_gpu, parallel = [], [], parallel_args(sig.func)
    for i, (name, t, a) in enumerate(zip(sig.arg_names, sig.arg_types, args)):
        if isinstance(t, GL):
            values.append(_bind_gl(sig, name, t, a))
            v = _as_on_gpu(t, a)
            on_gpu.append(Peers(v, (v.ptr,), 0) if i in parallel else v)   # the peers: ranks.py
        else:
            values.append(None)
            on_gpu.append(a)
    if sig.launch is None:
        sig.launch = Launch({"kernel": sig.name, "grid": sig.grid, "params": params(sig.func, sig.arg_names),
                             "tensor_maps": [{"param": i} for i in sorted(tma_params(sig.func))],
                             "inplace": inplace(sig.func), "multiples": multiples(sig.func)})
    env = sig.launch.bind(on_gpu, host_ok=True).env
    for i, (t, a) in enumerate(zip(sig.arg_types, args)):
        if not isinstance(t, GL):
            values[i] = np.float32(a) if t == "f32" else int(a)
    return values, env


def _as_on_gpu(t: GL, a: np.ndarray):
    """The TensorView of array `a` as the gl's tensor would lie in GPU memory:
    its dtype, element strides and element offset from the allocation's start
    (an allocation is aligned), whatever numpy type holds the values. Its
    address is the allocation's (rounded down to 16 bytes) plus that offset:
    inside the allocation, so arrays overlap there exactly when they share
    elements."""
    from ..dtypes import itemsize
    from ..runtime.tensors import TensorView
    base = a
    while isinstance(base.base, np.ndarray):
        base = base.base
    offset = (a.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // a.itemsize
    e = itemsize(t.dtype)
    start = base.__array_interface__["data"][0] & ~15
    return TensorView(t.dtype, tuple(a.shape), tuple(s // a.itemsize * e for s in a.strides), e,
                      start + offset * e, "cpu", 0)


def _bind_gl(sig, name: str, t: GL, a) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise error(sig.func, f"argument '{name}' ({t.text()}) must be a numpy array, "
                              f"got {type(a).__name__}")
    if a.dtype.name not in ARRAY_DTYPES[t.dtype]:
        raise error(sig.func, f"argument '{name}' ({t.dtype} gl) must be a "
                              f"{' or '.join(ARRAY_DTYPES[t.dtype])} array, got {a.dtype.name}")
    if not a.flags.writeable:
        raise error(sig.func, f"argument '{name}' is a read-only array")
    return a[(None,) * max(0, 4 - a.ndim)]  # a view: stores reach the caller's array
