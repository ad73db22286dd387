"""Values of the interpreter: element rounding and scalar integer widths.

Register tiles and vectors are float32 numpy arrays of the type's shape whose
elements are always representable in the type's dtype (an op producing a
bf16/f16 value rounds to nearest even from f32, an 8-bit float's also
saturates to its finite max, as docs/tile-ir.md says).
Layouts never change values, so they have no representation here. Shared
tiles are float32 arrays too, rounded on every write by the st's dtype.

An i32 tile or vector is an int32 array (numpy's int32 arithmetic wraps
modulo 2^32, as the GPU's); ROUND["i32"] makes any array one: integers wrap
to their low 32 bits, floats truncate toward zero and saturate, NaN giving 0
(cvt.rzi.s32.f32). An i64 gl is an int64 array.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import FP8_MAX

_HIGH_HALF = np.uint32(0xFFFF0000)
_HALF_ULP, _ONE, _SIXTEEN = np.uint32(0x7FFF), np.uint32(1), np.uint32(16)


def round_bf16(x) -> np.ndarray:
    """float32 -> nearest bf16 (ties to even), returned as float32.

    bf16 is the top half of a float32: add 0x7FFF plus the lowest kept bit
    and truncate (in place on one temporary: the interpreter rounds every
    bf16 tile it makes). NaNs are kept as they are (the add could turn a NaN
    payload into an infinity).
    """
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    t = u >> _SIXTEEN
    t &= _ONE
    t += _HALF_ULP
    t += u
    t &= _HIGH_HALF
    out = np.asarray(t).view(np.float32).reshape(x.shape)
    nan = np.isnan(x)
    return np.where(nan, x, out) if nan.any() else out


def round_f16(x) -> np.ndarray:
    """float32 -> nearest f16 (numpy's cast rounds to nearest even), as float32."""
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def _round_float(x, mantissa: int, emin: int, finite_max: float) -> np.ndarray:
    """float32 -> the nearest value with `mantissa` stored bits and least
    normal exponent `emin` (ties to even, subnormals kept), saturated to
    +-finite_max, NaN kept: PTX's cvt.rn.satfinite to an 8-bit float. The
    spacing of the grid at x is 2^(max(exponent(x), emin) - mantissa); x
    scaled by it is exact in float64, and np.rint rounds half to even."""
    with np.errstate(invalid="ignore"):        # NaNs (signalling ones too) stay NaN
        d = np.asarray(x, dtype=np.float32).astype(np.float64)
        _, e = np.frexp(d)                     # |d| = m 2^e, m in [0.5, 1)
        step = np.maximum(e - 1, emin) - mantissa
        r = np.ldexp(np.rint(np.ldexp(d, -step)), step)
    return np.clip(r, -finite_max, finite_max).astype(np.float32)


def round_f8e4m3(x) -> np.ndarray:
    """float32 -> e4m3 (3 mantissa bits, normals from 2^-6, no infinities:
    saturates to +-448), as float32."""
    return _round_float(x, 3, -6, FP8_MAX["f8e4m3"])


def round_f8e5m2(x) -> np.ndarray:
    """float32 -> e5m2 (2 mantissa bits, normals from 2^-14; saturates to
    +-57344 where a plain cast would give an infinity), as float32."""
    return _round_float(x, 2, -14, FP8_MAX["f8e5m2"])


def as_f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def as_i32(x) -> np.ndarray:
    """Any array as int32: a float truncated toward zero and saturated (NaN
    -> 0), an integer wrapped to its low 32 bits (a C cast)."""
    x = np.asarray(x)
    if x.dtype.kind == "f":
        x = np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0)
        return np.clip(x, -2.0 ** 31, 2.0 ** 31 - 1).astype(np.int32)
    return x.astype(np.int64).astype(np.int32)


def as_i64(x) -> np.ndarray:
    return np.asarray(x).astype(np.int64)


ROUND = {"bf16": round_bf16, "f16": round_f16, "f32": as_f32, "i32": as_i32, "i64": as_i64,
         "f8e4m3": round_f8e4m3, "f8e5m2": round_f8e5m2}
NUMPY = {"bf16": np.float32, "f16": np.float32, "f32": np.float32, "i32": np.int32, "i64": np.int64,
         "f8e4m3": np.float32, "f8e5m2": np.float32}


def rounder(dtype: str):
    """The function that makes an array representable in `dtype` (float32
    arrays for the float types, int32 for i32)."""
    return ROUND[dtype]


def round_scalar(dtype: str, v) -> np.float32:
    return np.float32(ROUND[dtype](np.float32(v)))


# ---- integers: arith works on index (64-bit), i32, i1 and friends

def int_bits(type_text: str) -> int:
    """Bit width of an integer type's text (`index` is 64-bit)."""
    if type_text == "index":
        return 64
    if type_text.startswith("i") and type_text[1:].isdigit():
        return int(type_text[1:])
    raise ValueError(f"not an integer type: {type_text}")


def wrap(v: int, bits: int) -> int:
    """Two's-complement wrap of a Python int to a signed `bits`-bit value."""
    if bits == 1:
        return v & 1  # i1 is a boolean: 0 or 1
    half = 1 << (bits - 1)
    return ((v + half) & ((1 << bits) - 1)) - half


def unsigned(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)
