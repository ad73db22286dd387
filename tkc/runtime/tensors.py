"""Views of tensor arguments: torch tensors, numpy arrays, any DLPack producer.

A `TensorView` is all the argument checks need: dtype name, shape, byte
strides, data pointer and device. Reading it imports neither torch nor numpy
(the caller's objects come from whichever library is already loaded), and a
torch tensor is read through its own accessors, the fast path for launches.
"""
from __future__ import annotations

import ctypes
import sys
from typing import NamedTuple


class TensorView(NamedTuple):
    dtype: str          # 'bf16' | 'f16' | 'f32' | 'i32' | 'i64' | 'f8e4m3' | 'f8e5m2', or the library's name for anything else
    shape: tuple        # ints
    strides: tuple      # in bytes
    itemsize: int
    ptr: int            # address of element 0
    device: str         # 'cuda', 'cpu' or another device kind
    index: int          # device ordinal


_TORCH_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32",
                 "torch.int32": "i32", "torch.int64": "i64",
                 "torch.float8_e4m3fn": "f8e4m3", "torch.float8_e5m2": "f8e5m2"}
_NUMPY_DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "int32": "i32", "int64": "i64",
                 "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}  # the last two: ml_dtypes' names
# DLPack (code, bits) -> name; codes: 0 int, 1 uint, 2 float, 4 bfloat.
_DL_DTYPES = {(2, 16): "f16", (2, 32): "f32", (4, 16): "bf16", (0, 32): "i32", (0, 64): "i64"}
_DL_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}
# DLPack device types: 1 CPU, 2 CUDA, 3 CUDA pinned host, 13 CUDA managed.
_DL_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 13: "cuda"}


def view(obj, stream: int | None = None) -> TensorView | None:
    """The view of a tensor-like object, or None if obj is not one."""
    if isinstance(obj, TensorView):  # already one (the interpreter's arrays, as on the GPU)
        return obj
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch_view(obj)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, numpy.ndarray):
        return _numpy_view(obj)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _dlpack_view(obj, stream)
    return None


def _torch_view(t) -> TensorView:
    size = t.element_size()
    dev = t.device
    return TensorView(_TORCH_DTYPES.get(str(t.dtype), str(t.dtype).replace("torch.", "")),
                      tuple(t.shape), tuple(s * size for s in t.stride()), size,
                      t.data_ptr(), dev.type, dev.index if dev.index is not None else 0)


_numpy_names: dict = {}  # numpy dtype -> our name (dtype.name is slow to compute)


def _numpy_view(a) -> TensorView:
    name = _numpy_names.get(a.dtype)
    if name is None:
        name = _numpy_names[a.dtype] = _NUMPY_DTYPES.get(a.dtype.name, a.dtype.name)
    return TensorView(name, tuple(a.shape), tuple(a.strides),
                      a.itemsize, a.__array_interface__["data"][0], "cpu", 0)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    # The head of DLManagedTensor (DLPack < 1.0, capsule name "dltensor").
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dlpack_view(obj, stream: int | None) -> TensorView:
    device_type, _ = obj.__dlpack_device__()
    capsule = _export(obj, stream if _DL_DEVICES.get(int(device_type)) == "cuda" else None)
    # The capsule stays unconsumed: its destructor frees the DLManagedTensor,
    # while the data stays owned by obj, which the caller holds for the launch.
    t = _DLTensor.from_address(_get_pointer(capsule, b"dltensor"))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    itemsize = max(1, t.dtype.bits * t.dtype.lanes // 8)
    if t.strides:
        strides = tuple(t.strides[i] * itemsize for i in range(t.ndim))
    else:  # NULL strides: compact row-major
        strides = _row_major(shape, itemsize)
    code, bits = t.dtype.code, t.dtype.bits
    dtype = _DL_DTYPES.get((code, bits)) if t.dtype.lanes == 1 else None
    dtype = dtype or f"{_DL_CODES.get(code, f'code{code}')}{bits}" + (f"x{t.dtype.lanes}" if t.dtype.lanes > 1 else "")
    return TensorView(dtype, shape, strides, itemsize, (t.data or 0) + t.byte_offset,
                      _DL_DEVICES.get(t.device.device_type, f"dlpack device {t.device.device_type}"),
                      t.device.device_id)


def _export(obj, stream: int | None):
    if stream is None:
        return obj.__dlpack__()
    # DLPack reserves 0 (ambiguous); 1 is CUDA's legacy default stream.
    try:
        return obj.__dlpack__(stream=stream or 1)
    except TypeError:  # an older producer without the stream keyword
        return obj.__dlpack__()


def _row_major(shape: tuple, itemsize: int) -> tuple:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))
