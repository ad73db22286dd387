"""Program `index` of seed `seed`: a pure function of the two (docs/fuzz.md).

A fifth are warpgroup programs (warpgroup.py), the rest core programs
(core.py); both are well-typed DSL source text.
"""
from __future__ import annotations

from .core import Program, rng_of
from .core import core as _core
from .warpgroup import generate as _warpgroup

WARPGROUP_SHARE = 0.2


def generate(seed: int, index: int) -> Program:
    rng = rng_of(seed, index)
    name = f"fuzz_{seed}_{index}"
    make = _warpgroup if rng.random() < WARPGROUP_SHARE else _core
    return make(rng, name, seed, index)
