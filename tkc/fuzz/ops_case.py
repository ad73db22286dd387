"""A case of `tkc fuzz --ops` (ops.py) and how its dims are drawn: around an
op's documented domain and on both sides of its edges."""
from __future__ import annotations

import dataclasses
import math
import random

HEAD_DIMS = (64, 96, 128, 256)   # tkc.attention's (torchops/attn.py refuses the rest)
NORM_MAX = 16384                 # tkc.layer_norm's and tkc.rms_norm's widest row
GRAD = 0.3                       # the share of cases whose gradients are checked too
OUTSIDE = 0.12                   # the share of cases drawn outside the op's domain


@dataclasses.dataclass
class Case:
    """One op call: `lines` build the inputs and set `out`; `op` and `params`
    say what the reference computes from `args` (the op's tensor arguments,
    by name in the lines' namespace); `grads` the arguments whose gradients
    are checked (empty: the forward alone); `valid`: inside the documented
    domain, so it must be served."""
    seed: int
    index: int
    op: str
    params: dict
    args: tuple
    lines: list
    valid: bool = True
    grads: tuple = ()
    tol: float = 1e-2   # the outputs' relative L2 error (gradients: 3x)

    @property
    def name(self) -> str:
        return f"<tkc-fuzz-ops {self.seed}:{self.index}>"

    def source(self) -> str:
        return "\n".join(self.lines) + "\n"


def size(r: random.Random, hi: int, lo: int = 1) -> int:
    """A dim: log-uniform in lo..hi, or one of the edges tiles make (lo 0: now and then none)."""
    if lo == 0:
        if r.random() < 0.03:
            return 0
        lo = 1
    if r.random() < 0.3:
        edges = [n for n in (1, 2, 7, 8, 15, 16, 17, 63, 64, 65, 127, 128, 129, 192, 255, 256, 257, 777)
                 if lo <= n <= hi]
        if edges:
            return r.choice(edges)
    return int(round(math.exp(r.uniform(math.log(lo), math.log(hi)))))


def rows8(r: random.Random, hi: int, outside: bool) -> int:
    """A dim TMA moves in 16-byte rows (a multiple of 8 bf16), or off by a few when outside."""
    n = 8 * size(r, hi // 8)
    return n + r.choice((1, 2, 4, 5)) if outside else n


def checks_grad(r: random.Random) -> bool:
    return r.random() < GRAD
