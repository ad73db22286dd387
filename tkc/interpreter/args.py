"""The kernel's signature: finding it in a module, checking and binding arguments.

gl arguments are numpy arrays of 1-4 dims, viewed as 4-D by prepending 1s
(a view, so stores land in the caller's array). bf16 has no numpy dtype, so a
bf16 gl takes a float32 array holding bf16 values (writes are rounded to
bf16); f16 takes float16 or float32; f32 takes float32. Scalars are Python
numbers. Dims named alike (tk.dim_names) must have one size.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..diagnostics import TkcError, error
from ..dialect.types import GL, view
from ..passes.verify import arg_names, dim_names

ARRAY_DTYPES = {"bf16": ("float32",), "f16": ("float16", "float32"), "f32": ("float32",)}
SCALARS = ("f32", "i32")
I32_RANGE = (-(1 << 31), (1 << 31) - 1)


@dataclass
class Signature:
    func: object  # the func.func op
    name: str
    warps: int
    grid: list[str]
    arg_names: list[str]
    arg_types: list  # GL views, or "f32" / "i32"
    dim_names: list  # per argument, its dims' names (None = unnamed; [] for a scalar)


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
    """Checked argument values, and the grid environment ("a.r" -> 128, "n" -> 5)."""
    if len(args) != len(sig.arg_types):
        raise error(sig.func, f"kernel '{sig.name}' takes {len(sig.arg_types)} arguments "
                              f"({', '.join(sig.arg_names)}), got {len(args)}")
    values, env, named = [], {}, {}
    for name, t, a, dims in zip(sig.arg_names, sig.arg_types, args, sig.dim_names):
        if isinstance(t, GL):
            arr = _bind_gl(sig, name, t, a)
            env.update({f"{name}.{d}": n for d, n in zip("bdrc", arr.shape)})
            _same_names(sig, name, arr.shape, dims, named)
        else:
            arr = _bind_scalar(sig, name, t, a)
            if t == "i32":
                env[name] = arr
        values.append(arr)
    _divisible(sig, values)
    return values, env


def _divisible(sig, values) -> None:
    """Each gl dim a multiple of what the kernel's tiles need (as at launch:
    the manifest's `divisible`), so a ragged shape is refused, not cut short."""
    from ..lowering.requirements import divisible
    for i, div in divisible(sig.func).items():
        for axis, n, d in zip("bdrc", values[i].shape, div):
            if n % d:
                raise error(sig.func, f"argument '{sig.arg_names[i]}': dim {axis} = {n} is not a "
                                      f"multiple of {d} (the kernel works on whole tiles)")


def _bind_gl(sig, name: str, t: GL, a) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise error(sig.func, f"argument '{name}' ({t.text()}) must be a numpy array, "
                              f"got {type(a).__name__}")
    if a.dtype.name not in ARRAY_DTYPES[t.dtype]:
        raise error(sig.func, f"argument '{name}' ({t.dtype} gl) must be a "
                              f"{' or '.join(ARRAY_DTYPES[t.dtype])} array, got {a.dtype.name}")
    if not 1 <= a.ndim <= 4:
        raise error(sig.func, f"argument '{name}' must have 1 to 4 dims, got {a.ndim}")
    if not a.flags.writeable:
        raise error(sig.func, f"argument '{name}' is a read-only array")
    arr = a[(None,) * (4 - a.ndim)]  # a view: stores reach the caller's array
    for axis, want, got in zip("bdrc", t.dims, arr.shape):
        if want != -1 and want != got:
            raise error(sig.func, f"argument '{name}' has shape {a.shape} (as 4-D {arr.shape}): "
                                  f"dim {axis} must be {want}, got {got}")
    return arr


def _same_names(sig, name: str, shape, dims, named: dict) -> None:
    """Dims with one name must have one size (as at launch, tkc.runtime.args)."""
    for axis, dim_name, n in zip("bdrc", dims, shape):
        if dim_name is None:
            continue
        first = named.setdefault(dim_name, (name, axis, n))
        if first[2] != n:
            raise error(sig.func, f"dim {axis} of argument '{name}' is {n}, but dim {first[1]} "
                                  f"of argument '{first[0]}' is {first[2]}: both are named "
                                  f"{dim_name!r} and must have one size")


def _bind_scalar(sig, name: str, t: str, a):
    if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, float, np.integer, np.floating)):
        raise error(sig.func, f"argument '{name}' ({t}) must be a number, got {type(a).__name__}")
    if t == "f32":
        return np.float32(a)
    if (isinstance(a, (float, np.floating)) and not float(a).is_integer()) \
            or not I32_RANGE[0] <= int(a) <= I32_RANGE[1]:
        raise error(sig.func, f"argument '{name}' (i32) must be a 32-bit integer, got {a}")
    return int(a)
