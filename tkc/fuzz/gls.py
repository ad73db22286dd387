"""A program's gl arguments, as the generator records them (program.arrays
makes their values)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Arg:
    """A gl argument: its 4-D shape and, for an output, the GPU check's
    tolerance (values.py)."""
    name: str
    dtype: str
    shape: tuple
    output: bool = False
    tol: float = 0.0
    static: bool = False  # its dims are written as ints (else at random)
    ints: tuple = (-100, 100)  # an integer input's values (program.arrays)
    block_rows: int = 0  # an output's rows each block row (by) writes: what a dead ragged item leaves
    block_cols: int = 0  # an output's columns each block column (bx) writes (core.Gen.store_output's)
    values: tuple | None = None  # an input's very elements (a ragged kernel's counts), in order
    pad: int = 0  # a strided gl's (strided=True): the array is a view of [..., cols + pad] (program.arrays)
    bounds: tuple | None = None  # a float output's interval (lo, hi): what the generator's analysis allows
