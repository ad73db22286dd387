"""Element types tkc knows, by name. Imports no MLIR (the runtime uses it)."""

# name -> bytes per element
SIZES = {"bf16": 2, "f16": 2, "f32": 4, "i32": 4, "i64": 8}

DTYPES = ("bf16", "f16", "f32")     # float tiles and vectors, shared and in registers
REG_DTYPES = DTYPES + ("i32",)      # register tiles and vectors: also integers (indices, counts)
GL_DTYPES = REG_DTYPES + ("i64",)   # global layouts: also int64 indices (read one element at a time)
INT_DTYPES = ("i32", "i64")

# The range of an i32 element: neg_infty / pos_infty of an i32 tile, and what
# a float -> i32 conversion saturates to (cvt.rzi.s32.f32).
I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1


def itemsize(dtype: str) -> int:
    return SIZES[dtype]


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES
