"""Element types tkc knows, by name. Imports no MLIR (the runtime uses it)."""

# name -> bytes per element
SIZES = {"bf16": 2, "f16": 2, "f32": 4, "i32": 4, "i64": 8, "f8e4m3": 1, "f8e5m2": 1}

# The two 8-bit floats of Hopper's tensor cores (OCP FP8): e4m3 without
# infinities (MLIR's f8E4M3FN, torch.float8_e4m3fn; finite max 448) and e5m2
# (f8E5M2, torch.float8_e5m2; finite max 57344). Conversions to them round to
# nearest even and saturate to the finite max (cvt.rn.satfinite), NaN staying NaN.
FP8_DTYPES = ("f8e4m3", "f8e5m2")
FP8_MAX = {"f8e4m3": 448.0, "f8e5m2": 57344.0}
# tk dtype name -> the MLIR element type's spelling (the others are their own)
MLIR_NAMES = {"f8e4m3": "f8E4M3FN", "f8e5m2": "f8E5M2"}
_FROM_MLIR = {v: k for k, v in MLIR_NAMES.items()}

FLOAT_DTYPES = ("bf16", "f16", "f32")
DTYPES = FLOAT_DTYPES + FP8_DTYPES  # shared tiles (8-bit ones: TMA and wgmma operands) and rt
VEC_DTYPES = FLOAT_DTYPES           # shared vectors
REG_DTYPES = DTYPES + ("i32",)      # register tiles: also integers (indices, counts), and 8-bit floats (conversions)
GL_DTYPES = REG_DTYPES + ("i64",)   # global layouts: also int64 indices (read one element at a time)
INT_DTYPES = ("i32", "i64")

# The range of an i32 element: neg_infty / pos_infty of an i32 tile, and what
# a float -> i32 conversion saturates to (cvt.rzi.s32.f32).
I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1


def itemsize(dtype: str) -> int:
    return SIZES[dtype]


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def is_fp8(dtype: str) -> bool:
    return dtype in FP8_DTYPES


def mlir_name(dtype: str) -> str:
    """The MLIR element type's text of a tk dtype name (f8e4m3 -> f8E4M3FN)."""
    return MLIR_NAMES.get(dtype, dtype)


def from_mlir(name: str) -> str:
    """The tk dtype name of an MLIR element type's text."""
    return _FROM_MLIR.get(name, name)
