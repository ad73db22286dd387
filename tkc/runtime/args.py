"""Argument checks: nothing is launched with arguments that do not fit the manifest.

`Signature(manifest).bind(args)` checks every argument against its parameter
(count; for a gl: tensor-like, dtype, rank 1..4 viewed as 4-D by prepending
1s, static dims, divisibility, int32 dims, contiguous row-major, 16-byte
aligned, on a CUDA device, all on one device; dims with one name of one
size; for a scalar: its Python type and range) and returns what the launch
needs: the kernel parameter values in PTX order, the grid environment and the
device. Errors are TkcErrors naming the kernel, the parameter, expected and
found, located at the caller's line.

`Signature.key(args)` is what those checks read, for the launcher's cache of
check results: per tensor its dtype, shape, strides, device and data pointer
modulo 16, or 16 for a null one (read straight from a torch tensor's
attributes; other tensors through their view), and the values of the i32
scalars the grid reads.
Scalars are checked on every call; a key is None when an argument is
unusual (not a tensor, an out-of-range or non-builtin scalar), and the full
checks then run and raise the error, or pass without caching.
"""
from __future__ import annotations

import ctypes
import math
import numbers
import sys
from typing import NamedTuple

from ..diagnostics import TkcError
from ..dtypes import itemsize
from . import driver
from .callsite import caller
from .grid import DIMS, compile_grid
from .peers import MAX_PEERS, Peers
from .tensormap import row_problem
from .tensors import TensorView, view

INT32_MAX = 2**31 - 1
F32_MAX = 3.4028234663852886e38
ALIGN = 16
# A tensor with elements and a null data pointer has no memory: a fake tensor's (what
# FakeTensorMode, torch.compile and torch.export trace with) would launch a kernel on
# address 0, whose fault ends the process's CUDA context.
NO_MEMORY = ("the tensor has no memory (a null data pointer: a fake tensor, as torch.compile, "
             "torch.export and FakeTensorMode trace with); a kernel launches on real tensors: "
             "launch it outside the trace, or call a tkc op (tkc.matmul, tkc.attention, ...), "
             "which traces as a torch custom op")
memory_needed = True   # False within tkc.bench.fake_driver, whose launches are stubs (`tkc tune --dry-run`)


class Bound(NamedTuple):
    values: list     # ctypes objects, one per PTX parameter
    env: dict        # grid names -> ints ("a.r", i32 scalar names)
    device: int | None  # CUDA ordinal of the gl arguments (None: no gl argument)
    views: list = []    # per argument, its TensorView (None for a scalar): for tensor maps


class ArgError(TkcError):
    """A bad launch argument, located at the user's call."""

    def __init__(self, message: str):
        super().__init__(message, caller())


def _shape4(shape: tuple) -> tuple:
    return (1,) * (4 - len(shape)) + tuple(shape)


def strides4(v: TensorView) -> tuple:
    """The byte strides of v viewed as 4-D, a size-1 dim's as if it were
    contiguous (its stride never matters, and torch gives it any value)."""
    return strides_4d(v.shape, v.strides, v.itemsize)


def strides_4d(shape: tuple, strides: tuple, itemsize: int) -> tuple:
    """strides4 of a shape (up to 4-D) and its byte strides."""
    shape = _shape4(shape)
    given = (0,) * (4 - len(strides)) + tuple(strides)
    out, step = [0] * 4, itemsize
    for axis in (3, 2, 1, 0):
        out[axis] = step if shape[axis] == 1 else given[axis]
        step = out[axis] * shape[axis]
    return tuple(out)


def strided_fits(shape: tuple, strides: tuple, itemsize: int, ptr: int) -> bool:
    """Whether a strided gl takes a view of `shape` (up to 4-D) with byte
    `strides` at ptr: elements adjacent along c, the other strides (of dims
    longer than 1) whole ALIGN-byte steps, none negative or zero (TMA's
    strides cannot be; a broadcast), the data ALIGN-byte aligned: what TMA
    and paired accesses need (GlParam._check_strides says which fails)."""
    shape, strides = _shape4(shape), strides_4d(shape, strides, itemsize)
    return (shape[3] == 1 or strides[3] == itemsize) and ptr % ALIGN == 0 and \
        all(n == 1 or (s > 0 and s % ALIGN == 0) for n, s in zip(shape[:3], strides[:3]))


def _gl_text(dtype: str, dims) -> str:
    return f"gl<{dtype}, {', '.join('-1' if d is None else str(d) for d in dims)}>"


class GlParam:
    def __init__(self, kernel: str, index: int, p: dict, tma: bool = False):
        self.name, self.dtype, self.dims = p["name"], p["dtype"], p["dims"]
        self.tma = tma  # a tensor map describes it: rows of a multiple of 16 bytes
        self.divisible = p.get("divisible", [1, 1, 1, 1])
        self.writes = p.get("writes", False)
        self.itemsize = itemsize(self.dtype)
        self.dim_names = p.get("names", [None] * 4)
        self.peers = bool(p.get("peers"))   # a pgl: takes a runtime.peers.Peers
        self.strided = bool(p.get("strided"))   # any view with adjacent c: b, d, r strides passed
        self.runtime_axes = [i for i, d in enumerate(self.dims) if d is None]
        self.env_names = [f"{self.name}.{d}" for d in DIMS]
        self.text = _gl_text(self.dtype, self.dims)
        self._prefix = f"kernel '{kernel}': argument {index} '{self.name}' ({self.text})"

    def error(self, what: str) -> ArgError:
        return ArgError(f"{self._prefix}: {what}")

    def check(self, obj, stream: int | None) -> TensorView:
        if self.peers:
            if not isinstance(obj, Peers):
                raise self.error(f"a pgl takes a symmetric buffer (tkc.runtime.peers.Peers, e.g. from "
                                 f"tkc.torchops.symm.buffer), found {type(obj).__name__}")
            obj = obj.tensor
        elif type(obj).__name__ == "Peers":
            raise self.error("a symmetric buffer (Peers) for a gl parameter: declare it pgl(...)")
        v = view(obj, stream)
        if v is None:
            raise self.error(f"expected a tensor (torch.Tensor or a DLPack object), "
                             f"found {type(obj).__name__}")
        if v.dtype != self.dtype:
            raise self.error(f"expected dtype {self.dtype}, found {v.dtype}")
        if not 1 <= len(v.shape) <= 4:
            raise self.error(f"expected rank 1 to 4, found rank {len(v.shape)} (shape {v.shape})")
        self._check_dims(v)
        self._check_layout(v)
        problem = row_problem(self.dtype, _shape4(v.shape)[3]) if self.tma else None
        if problem:
            raise self.error(problem)
        return v

    def _check_dims(self, v: TensorView) -> None:
        for axis, (n, want, div) in enumerate(zip(_shape4(v.shape), self.dims, self.divisible)):
            if (want is not None and n != want) or n % div or n > INT32_MAX:
                raise self._dim_error(v, axis, n)

    def _dim_error(self, v: TensorView, axis: int, n: int) -> ArgError:
        want, div = self.dims[axis], self.divisible[axis]
        dim = f"dim {DIMS[axis]} (axis {axis} of the 4-D view of shape {v.shape})"
        if want is not None and n != want:
            return self.error(f"{dim} must be {want}, found {n}")
        if n % div:
            return self.error(f"{dim} = {n} must be a multiple of {div} "
                              f"(the kernel's tiles, or its aligned accesses, along {DIMS[axis]})")
        return self.error(f"{dim} = {n} does not fit int32")

    def _check_layout(self, v: TensorView) -> None:
        if self.strided:
            return self._check_strides(v)
        step = v.itemsize
        for n, stride in zip(reversed(v.shape), reversed(v.strides)):
            if n > 1 and stride != step:  # a size-1 (or empty) dim's stride never matters
                raise self.error(f"expected a contiguous row-major tensor, found shape {v.shape} "
                                 f"with strides {tuple(s // v.itemsize for s in v.strides)} "
                                 f"(in elements); call .contiguous()")
            step *= n
        if v.ptr % ALIGN:
            raise self.error(f"data pointer {v.ptr:#x} is not {ALIGN}-byte aligned "
                             f"(a slice starting mid-row?); copy it with .contiguous()/.clone()")

    def _check_strides(self, v: TensorView) -> None:
        """strided_fits, or an error naming what fails."""
        if strided_fits(v.shape, v.strides, v.itemsize, v.ptr):
            return
        shape, strides = _shape4(v.shape), strides4(v)
        if shape[3] != 1 and strides[3] != v.itemsize:
            raise self.error(f"the last dim's elements must be adjacent (stride 1), found shape {v.shape} "
                             f"with strides {tuple(s // v.itemsize for s in v.strides)} (in elements)")
        if any(n != 1 and (s <= 0 or s % ALIGN) for n, s in zip(shape[:3], strides[:3])):
            raise self.error(f"strides {tuple(s // v.itemsize for s in v.strides)} (in elements) of shape "
                             f"{v.shape} must be positive multiples of {ALIGN} bytes "
                             f"({ALIGN // v.itemsize} elements); call .contiguous()")
        if v.ptr % ALIGN:
            raise self.error(f"data pointer {v.ptr:#x} is not {ALIGN}-byte aligned; copy it with .contiguous()")

    def pack(self, v: TensorView, values: list, env: dict, peers=None) -> None:
        values.append(ctypes.c_uint64(_address(v)))
        shape = _shape4(v.shape)
        for axis in self.runtime_axes:
            values.append(ctypes.c_uint32(shape[axis]))
        if self.strided:
            values += [ctypes.c_uint64(s // v.itemsize) for s in strides4(v)[:3]]
        for name, n in zip(self.env_names, shape):
            env[name] = n
        if self.peers:   # the peers' pointers, rank, world size (lowering/peers.py)
            values += [ctypes.c_uint64(p) for p in peers.slots()]
            values += [ctypes.c_uint32(peers.rank), ctypes.c_uint32(peers.world)]


def _address(v: TensorView) -> int:
    """The pointer a kernel gets: the tensor's, or for an empty device tensor
    (a null pointer) driver.zeros', which its filled loads may read."""
    return v.ptr or _empty(v.device, v.index, v.shape)


def _empty(device: str, index, shape) -> int:
    """driver.zeros for a null pointer of a CUDA tensor without elements; 0 for
    any other (one with elements, e.g. a fake tensor's, the checks refuse)."""
    return driver.zeros(index or 0) if device == "cuda" and not math.prod(shape) else 0


class ScalarParam:
    def __init__(self, kernel: str, index: int, p: dict, grid_names=()):
        self.name, self.dtype = p["name"], p["dtype"]
        self.in_grid = self.name in grid_names  # its value decides the grid
        self._prefix = f"kernel '{kernel}': argument {index} '{self.name}' ({self.dtype})"

    def error(self, what: str) -> ArgError:
        return ArgError(f"{self._prefix}: {what}")

    def pack(self, x, values: list, env: dict) -> None:
        if self.dtype == "f32":
            values.append(ctypes.c_float(self._real(x)))
        else:
            values.append(ctypes.c_int32(self._int32(x)))
            env[self.name] = int(x)

    def fast(self, x):
        """x when it is a builtin int or float that passes the checks, else None
        (the full checks decide). Two type tests and a range test per launch."""
        if type(x) is int:
            if self.dtype == "i32":
                return x if -INT32_MAX - 1 <= x <= INT32_MAX else None
            return x if -F32_MAX <= x <= F32_MAX else None
        if type(x) is float and self.dtype == "f32":  # inf and nan pass, as in _real
            return x if -F32_MAX <= x <= F32_MAX or not math.isfinite(x) else None
        return None

    def _real(self, x) -> float:
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise self.error(f"expected a real number, found {type(x).__name__}")
        try:
            x = float(x)
        except OverflowError:  # an int beyond any float
            raise self.error(f"{x} does not fit f32") from None
        if math.isfinite(x) and abs(x) > F32_MAX:
            raise self.error(f"{x} does not fit f32")
        return x

    def _int32(self, x) -> int:
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise self.error(f"expected an int, found {type(x).__name__} {x!r}")
        if not -INT32_MAX - 1 <= x <= INT32_MAX:
            raise self.error(f"{x} does not fit int32")
        return int(x)


class Signature:
    """A kernel's parameter list, prepared once per artifact."""

    def __init__(self, manifest: dict):
        self.kernel = manifest["kernel"]
        grid_names = compile_grid(tuple(manifest["grid"])).names
        tma = {m["param"] for m in manifest.get("tensor_maps", ())}
        self.params = [GlParam(self.kernel, i, p, i in tma) if p["kind"] == "gl"
                       else ScalarParam(self.kernel, i, p, grid_names)
                       for i, p in enumerate(manifest["params"])]
        self.names = ", ".join(p.name for p in self.params)
        # (written, other) gl argument pairs that must not overlap, and those
        # declared in-place (which may also be the very same tensor)
        gls = [i for i, p in enumerate(self.params) if isinstance(p, GlParam)]
        self.inplace = {tuple(pair) for pair in manifest.get("inplace", ())}
        self.multiples = [tuple(pair) for pair in manifest.get("multiples", ())]
        self.overlaps = [(i, j) for i in gls if self.params[i].writes for j in gls
                         if j != i and not (self.params[j].writes and j < i)]
        # The PTX parameters ('u64' pointer and 'u32' runtime dims per gl,
        # 'f32'/'i32' per scalar) and each argument's first one.
        self.kinds, self.slots = [], []
        for param in self.params:
            self.slots.append(len(self.kinds))
            if isinstance(param, GlParam):
                self.kinds += ["u64"] + ["u32"] * len(param.runtime_axes) + ["u64"] * 3 * param.strided
                if param.peers:
                    self.kinds += ["u64"] * MAX_PEERS + ["u32", "u32"]
            else:
                self.kinds.append(param.dtype)

    def key(self, args, stream: int | None = None):
        """(key, per argument its data pointer or scalar value), or None: see
        the module's doc. Costs a few attribute reads per torch tensor."""
        if len(args) != len(self.params):
            return None
        torch = sys.modules.get("torch")
        tensor = torch.Tensor if torch is not None else ()
        parts, values = [], []
        for param, arg in zip(self.params, args):
            if isinstance(param, ScalarParam):
                x = param.fast(arg)
                if x is None:
                    return None
                if param.in_grid:
                    parts.append(x)
                values.append(x)
            elif isinstance(arg, tensor):  # what _torch_view reads, unconverted
                ptr = arg.data_ptr()   # (null: its own key, whose checks refuse a tensor with elements)
                parts.append((arg.dtype, arg.shape, arg.stride(), arg.device, ptr % ALIGN if ptr else ALIGN))
                values.append(ptr or _empty(arg.device.type, arg.device.index, arg.shape))
            elif isinstance(arg, Peers) and isinstance(arg.tensor, tensor):
                # the peers' pointers and the rank are in the plan's values
                # (and its tensor maps), so the key holds them as they are
                t = arg.tensor
                ptr = t.data_ptr()
                parts.append((t.dtype, t.shape, t.stride(), t.device, ptr % ALIGN if ptr else ALIGN,
                              arg.ptrs, arg.rank))
                values.append(ptr)
            else:
                v = view(arg, stream)
                if v is None:
                    return None
                parts.append(v._replace(ptr=v.ptr % ALIGN if v.ptr else ALIGN))
                values.append(_address(v))
        return tuple(parts), values

    def bind(self, args, *, stream: int | None = None, host_ok: bool = False) -> Bound:
        """Check args and pack them. host_ok accepts CPU memory (the interpreter's
        arrays, and tests of the other checks); a launch never sets it."""
        if len(args) != len(self.params):
            raise ArgError(f"kernel '{self.kernel}' takes {len(self.params)} arguments "
                           f"({self.names}), got {len(args)}")
        values, env, device, views = [], {}, None, []
        named: dict[str, tuple] = {}
        for index, (param, arg) in enumerate(zip(self.params, args)):
            if isinstance(param, GlParam):
                v = param.check(arg, stream)
                device = self._device(param, v, device, host_ok)
                self._same_names(index, param, _shape4(v.shape), named)
                param.pack(v, values, env, arg if param.peers else None)
                views.append(v)
            else:
                param.pack(arg, values, env)
                views.append(None)
        self._check_multiples(named)
        self.check_aliasing([v.ptr if v is not None else None for v in views], self.spans(views))
        return Bound(values, env, device, views)

    def spans(self, views: list) -> list:
        """Per argument, the bytes from its first element to past its last
        (None for a scalar): a strided view's reach, holes included."""
        out = []
        for param, v in zip(self.params, views):
            if v is None:
                out.append(None)
            elif param.strided and math.prod(v.shape):
                out.append(sum((n - 1) * s for n, s in zip(_shape4(v.shape), strides4(v))) + v.itemsize)
            else:
                out.append(math.prod(v.shape) * v.itemsize)
        return out

    def check_aliasing(self, ptrs: list, spans: list) -> None:
        """No written argument may overlap another argument in memory (the
        kernel would read what it already wrote), except the very same tensor
        as a declared in-place partner. A null pointer is no memory (an empty
        tensor's): it overlaps nothing. Per launch: a few comparisons."""
        for i, j in self.overlaps:
            if not (ptrs[i] and ptrs[j]):
                continue
            a, b = (ptrs[i], ptrs[i] + spans[i]), (ptrs[j], ptrs[j] + spans[j])
            if a[0] < b[1] and b[0] < a[1]:
                if a == b and ((i, j) in self.inplace or (j, i) in self.inplace):
                    continue
                self._alias_error(i, j, a == b)

    def _alias_error(self, i: int, j: int, same: bool):
        pi, pj = self.params[i], self.params[j]
        what = "is the same tensor as" if same else "overlaps"
        hint = (f"if writing each element of '{pi.name}' right after reading it from '{pj.name}' "
                f"is intended, declare tkc.kernel(inplace={{'{pi.name}': '{pj.name}'}})"
                if same else "pass separate tensors")
        raise ArgError(f"kernel '{self.kernel}': argument {i} '{pi.name}', which the kernel "
                       f"writes, {what} argument {j} '{pj.name}' in memory: {hint}")

    def _same_names(self, index: int, param: GlParam, shape: tuple, named: dict) -> None:
        """Dims with one name must have one size: the kernel covers one of them
        and trusts the others (a larger one would be left partly unwritten)."""
        for axis, (name, n) in enumerate(zip(param.dim_names, shape)):
            if name is None:
                continue
            first = named.setdefault(name, (index, param, axis, n))
            if first[3] != n:
                i0, p0, a0, n0 = first
                raise ArgError(
                    f"kernel '{self.kernel}': dim {DIMS[axis]} of argument {index} "
                    f"'{param.name}' is {n}, but dim {DIMS[a0]} of argument {i0} '{p0.name}' "
                    f"is {n0}: both are named {name!r} and must have one size")

    def _check_multiples(self, named: dict) -> None:
        """Declared relations: dim `name`'s size a multiple of dim `of`'s
        (tkc.kernel(divisible={"Hq": "Hkv"}): query heads in groups per KV head)."""
        for name, of in self.multiples:
            (i, p, axis, n), (j, q, axis2, m) = named[name], named[of]
            if m == 0 or n % m:
                raise ArgError(
                    f"kernel '{self.kernel}': dim {DIMS[axis]} of argument {i} '{p.name}' "
                    f"({name} = {n}) must be a multiple of dim {DIMS[axis2]} of argument {j} "
                    f"'{q.name}' ({of} = {m})")

    @staticmethod
    def _device(param: GlParam, v: TensorView, device, host_ok: bool):
        if v.device != "cuda":
            if host_ok:
                return device
            where = "on the CPU" if v.device == "cpu" else f"in {v.device} memory"
            raise param.error(f"the tensor is {where}; tkc kernels need CUDA device memory "
                              f"(e.g. tensor.cuda())")
        if device is not None and v.index != device:
            raise param.error(f"the tensor is on cuda:{v.index}, the arguments before it "
                              f"on cuda:{device}; all tensors must be on one device")
        if not v.ptr and memory_needed and math.prod(v.shape):
            raise param.error(NO_MEMORY)
        return v.index
