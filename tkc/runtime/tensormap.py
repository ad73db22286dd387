"""TMA tensor maps: encode a manifest's `tensor_maps` entry for an argument tensor.

A tensor map (CUtensorMap) is a 128-byte descriptor the kernel receives by
value after its regular parameters (docs/tile-ir.md, "Hopper ops"). The
kernel's gl is a row-major 4-D tensor (b, d, r, c); TMA lists dims innermost
first, so globalDim is (c, r, d, b), globalStrides are the byte strides of
r, d, b, and the box is (box cols, box rows, 1, 1). Out-of-bounds elements
read as zero (oobFill NONE) and are skipped by stores.

`arguments` computes the cuTensorMapEncodeTiled arguments as plain values
and checks TMA's rules with clear errors (a pure function: tested without a
GPU); `encode` calls the driver. `TensorMaps` keeps one encoded map per
(data pointer, shape, entry), since encoding costs microseconds per launch.
"""
from __future__ import annotations

import ctypes
from typing import NamedTuple

from ..diagnostics import TkcError
from ..dtypes import SIZES, itemsize
from . import driver
from .callsite import caller

MAP_BYTES, MAP_ALIGN = 128, 64  # a CUtensorMap: its bytes, and the alignment a kernel parameter of it needs
BOX_LIMIT = 256
SWIZZLE_SPAN = {"32b": 32, "64b": 64, "128b": 128}
# TMA moves 8-bit floats as bytes: it never converts, so UINT8 describes them
_DTYPES = {"bf16": "BFLOAT16", "f16": "FLOAT16", "f32": "FLOAT32", "f8e4m3": "UINT8", "f8e5m2": "UINT8"}
_SWIZZLES = {"none": "NONE", "32b": "32B", "64b": "64B", "128b": "128B"}


class EncodeArgs(NamedTuple):
    """The cuTensorMapEncodeTiled arguments (besides the enums' fixed choices)."""
    dtype: str             # CU_TENSOR_MAP_DATA_TYPE_<dtype>
    address: int
    global_dim: tuple      # (c, r, d, b) elements
    global_strides: tuple  # bytes of one step along r, d, b
    box: tuple             # (cols, rows, 1, 1) elements
    element_strides: tuple
    swizzle: str           # CU_TENSOR_MAP_SWIZZLE_<swizzle>


def _shape4(shape) -> tuple:
    return (1,) * (4 - len(shape)) + tuple(shape)


def row_problem(dtype: str, c: int) -> str | None:
    """Why TMA cannot describe rows of c elements of dtype (None: it can)."""
    if (c * itemsize(dtype)) % 16:
        return (f"TMA needs rows of a multiple of 16 bytes: dim c = {c} of {dtype} is "
                f"{c * itemsize(dtype)} bytes (pad the last dim)")
    return None


def arguments(kernel: str, entry: dict, ptr: int, shape, strides=None) -> EncodeArgs:
    """The encode arguments for a tensor of `shape` at `ptr`, contiguous or
    (a strided gl's) of 4-D byte `strides`; a TkcError naming the kernel and
    argument when TMA cannot describe it. (Every rule in one test first, the
    messages after: a growing KV cache's step runs this twice.)"""
    e = SIZES[entry["dtype"]]
    b, d, r, c = shape if len(shape) == 4 else _shape4(shape)
    rows, cols = entry["box"]
    strides = (c * e, r * c * e, d * r * c * e) if strides is None else (strides[2], strides[1], strides[0])
    span = SWIZZLE_SPAN.get(entry["swizzle"])
    s0, s1, s2 = strides
    if ptr % 16 or c * e % 16 or not (1 <= rows <= BOX_LIMIT and 1 <= cols <= BOX_LIMIT) or cols * e % 16 \
            or span is not None and cols * e > span or min(b, d, r, c) < 1 or max(b, d, r, c) > 2**32 \
            or (s0 | s1 | s2) % 16 or max(s0, s1, s2) >= 2**40:
        _refuse(kernel, entry, ptr, (b, d, r, c), strides, e, span)
    return EncodeArgs(_DTYPES[entry["dtype"]], ptr, (c, r, d, b), strides,
                      (cols, rows, 1, 1), (1, 1, 1, 1), _SWIZZLES[entry["swizzle"]])


def _refuse(kernel: str, entry: dict, ptr: int, shape: tuple, strides: tuple, e: int, span) -> None:
    """arguments' error: the first rule the tensor breaks."""
    def bad(what: str) -> TkcError:
        return TkcError(f"kernel '{kernel}': argument {entry['param']} '{entry['name']}' "
                        f"(tensor map {entry['box'][0]}x{entry['box'][1]} {entry['swizzle']}): "
                        f"{what}", caller())

    b, d, r, c = shape
    rows, cols = entry["box"]
    if not min(shape):   # (cuTensorMapEncodeTiled takes dims of 1 element or more)
        raise bad(f"TMA cannot map a tensor without elements, found dims {shape}: a kernel that "
                  f"moves this argument by TMA takes it with elements")
    if ptr % 16:
        raise bad(f"TMA needs a 16-byte aligned data pointer, found {ptr:#x}")
    if row_problem(entry["dtype"], c):
        raise bad(row_problem(entry["dtype"], c))
    if not (1 <= rows <= BOX_LIMIT and 1 <= cols <= BOX_LIMIT) or (cols * e) % 16:
        raise bad(f"box {rows}x{cols} must be at most {BOX_LIMIT} per dim with rows "
                  f"of a multiple of 16 bytes")
    if span is not None and cols * e > span:
        raise bad(f"a {entry['swizzle']} swizzle allows box rows of at most {span} bytes, "
                  f"found {cols * e}")
    if max(b, d, r, c) > 2**32:
        raise bad(f"dims {(b, d, r, c)} exceed TMA's 2^32 elements per dim")
    raise bad(f"TMA needs strides of a multiple of 16 bytes below 2^40, found {strides} (c, r, d order)")


_FIXED: dict = {}   # (id of the bindings, dtype, swizzle, box, element strides) -> (bindings, fixed arguments)


def _fixed(cu, args: EncodeArgs) -> tuple:
    """The arguments an entry fixes (the enums, the box), made once: a decode
    step over a growing cache encodes its k and v maps at every step. (Calling
    libcuda's function through ctypes instead measured no faster: 3.45
    against the bindings' 3.26 µs a map, H200 host, 12-01.)"""
    key = (id(cu), args.dtype, args.swizzle, args.box, args.element_strides)   # (a fake module: a namespace)
    kept = _FIXED.get(key)
    if kept is None or kept[0] is not cu:
        u32 = cu.cuuint32_t
        kept = _FIXED[key] = (cu, (
            getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{args.dtype}"),
            [u32(n) for n in args.box], [u32(n) for n in args.element_strides],
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{args.swizzle}"),
            cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
    return kept


def encode(args: EncodeArgs) -> bytes:
    """The 128 bytes of the CUtensorMap (cuTensorMapEncodeTiled, through cuda-bindings),
    read while `tmap` holds the object: it owns the storage at getPtr() (its bytes
    read at a dropped temporary's address were freed memory: illegal instructions on
    the H200, now and then)."""
    cu = driver.api()
    dtype, box, element_strides, interleave, swizzle, l2, oob = _fixed(cu, args)[1]
    u64 = cu.cuuint64_t
    tmap = driver.call("cuTensorMapEncodeTiled", dtype, 4, args.address, list(map(u64, args.global_dim)),
                       list(map(u64, args.global_strides)), box, element_strides, interleave, swizzle, l2, oob)
    return ctypes.string_at(tmap.getPtr(), MAP_BYTES)


def param(data: bytes):
    """A 64-byte aligned ctypes buffer holding one map (a kernel parameter value)."""
    raw = ctypes.create_string_buffer(MAP_BYTES + MAP_ALIGN)
    pad = -ctypes.addressof(raw) % MAP_ALIGN
    buf = (ctypes.c_ubyte * MAP_BYTES).from_buffer(raw, pad)  # keeps `raw` alive
    ctypes.memmove(buf, data, MAP_BYTES)
    return buf


def entry_problem(entry, params: list) -> str | None:
    """What is wrong with a manifest `tensor_maps` entry (None when nothing)."""
    if not isinstance(entry, dict):
        return "is not a dict"
    i = entry.get("param")
    if type(i) is not int or not 0 <= i < len(params) or params[i].get("kind") != "gl":
        return "must name a gl parameter by its index in 'param'"
    if entry.get("dtype") != params[i].get("dtype") or entry.get("name") != params[i].get("name"):
        return f"must have the name and dtype of parameter {i}"
    box = entry.get("box")
    if not (isinstance(box, list) and len(box) == 2 and all(type(n) is int and n >= 1 for n in box)):
        return "needs 'box': [rows, cols], two ints >= 1"
    if entry.get("swizzle") not in _SWIZZLES:
        return f"needs 'swizzle' in {list(_SWIZZLES)}"
    if "peer" in entry and not (params[i].get("peers") and type(entry["peer"]) is int
                                and 0 <= entry["peer"] < 8):
        return "has a 'peer' (0..7) only for a pgl parameter"
    return None


class TensorMaps:
    """A kernel's tensor-map parameters, encoded per argument tensor and cached."""

    CACHE_LIMIT = 8192  # distinct (pointer, shape) pairs kept per kernel (128 bytes each: a model's
                        # weights and activations over every call site, as launch.py's frames)

    def __init__(self, kernel: str, entries: list, params: list, encoder=None):
        self.kernel, self.entries, self.encoder = kernel, list(entries), encoder
        for i, entry in enumerate(self.entries):
            problem = entry_problem(entry, params)
            if problem:
                raise TkcError(f"kernel '{kernel}' uses TMA tensor maps, but its manifest's "
                               f"entry {i} ({entry!r}) {problem}", caller())
        self.params = [entry["param"] for entry in self.entries]  # the gl argument of each
        # where its pointer is among the argument's parameter values: the gl's
        # own (0), or a pgl's peer k (after the pointer and runtime dims)
        self.offsets = [0 if "peer" not in e else
                        1 + sum(d is None for d in params[e["param"]]["dims"]) + e["peer"]
                        for e in self.entries]
        self._cache: dict = {}

    def map(self, n: int, ptr: int, shape, strides=None):
        """Entry n's map for a tensor at ptr of shape (and a strided gl's byte
        strides; checked already): a 64-byte aligned 128-byte buffer, encoded
        on the first launch with this tensor."""
        encoder = self.encoder or encode  # looked up late: tests replace it
        key = (n, ptr, tuple(shape), strides)
        buf = self._cache.get(key)
        if buf is None:
            data = encoder(arguments(self.kernel, self.entries[n], ptr, shape, strides))
            if len(self._cache) >= self.CACHE_LIMIT:
                self._cache.clear()
            buf = self._cache[key] = param(data)
        return buf

    def write(self, n: int, address: int, ptr: int, shape, strides=None) -> None:
        """Entry n's map for this tensor encoded into the 128 bytes at address
        (a frame's slot) and not kept: a tensor not seen again (a growing KV
        cache's, in new memory at each step)."""
        encoder = self.encoder or encode
        ctypes.memmove(address, encoder(arguments(self.kernel, self.entries[n], ptr, shape, strides)), MAP_BYTES)
