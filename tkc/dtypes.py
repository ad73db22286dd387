"""Element types tkc knows, by name. Imports no MLIR (the runtime uses it)."""

# name -> bytes per element
SIZES = {"bf16": 2, "f16": 2, "f32": 4}

DTYPES = tuple(SIZES)


def itemsize(dtype: str) -> int:
    return SIZES[dtype]
