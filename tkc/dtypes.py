"""Element types tkc knows, by name. Imports no MLIR (the runtime uses it)."""

# name -> bytes per element
SIZES = {"bf16": 2, "f16": 2, "f32": 4, "i32": 4}

DTYPES = ("bf16", "f16", "f32")     # tiles and vectors
GL_DTYPES = DTYPES + ("i32",)       # global layouts: also indices (cumulative sequence offsets)


def itemsize(dtype: str) -> int:
    return SIZES[dtype]
