"""What the generator knows about each value of a program it writes: its type,
an interval holding every element, and a bound on how far the GPU's value may
lie from the interpreter's.

The interval keeps programs well-defined (exp only of what cannot overflow, log
and rcp only of what is positive, divisions by what is away from zero), so
inf and NaN never appear and every result is finite. The error bound `err` is
the tolerance of the GPU check: the interpreter and the GPU compute the same
IEEE float32 operations except where the GPU uses approximations (ex2.approx,
tanh.approx, rcp/div.approx: 2^-11 relative at worst) or rounds to bf16 on
another side of a tie; each op adds EPS of its dtype times its result's bound
and passes its operands' errors on through its Lipschitz constant. Values
whose err is 0 are bit-exact on both sides (loads, max/min/abs of them,
iota): only they may feed a comparison, since a flipped mask would change a
where's result by a whole operand's range.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

# relative error one op may add on the GPU, times its result's bound
EPS = {"f32": 2.0 ** -10, "bf16": 2.0 ** -7, "i32": 0.0}
I32 = (-2.0 ** 31, 2.0 ** 31 - 1)  # an i32 value past these has wrapped: any i32
BOUND = 1.0e4       # no value may exceed this in magnitude
MAX_REL_ERR = 0.05  # nor carry an error bound above this share of its bound


@dataclass(frozen=True)
class Val:
    """A value of the generated program (bound to the Python name `name`).

    kind: "rt" (shape (rows, cols), layout "row"/"col"), "rv" (shape
    (length,), layout = the vector kind "col"/"row"), "f32" (an F32 scalar)
    or "index" (an Index scalar). dtype "i32" tiles and vectors wrap modulo
    2^32 on both sides: their interval is then all of i32 (wrap), err 0."""
    name: str
    kind: str
    dtype: str
    shape: tuple
    layout: str
    lo: float
    hi: float
    err: float = 0.0

    @property
    def bound(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    @property
    def exact(self) -> bool:
        return self.err == 0.0

    def same_type(self, o: "Val") -> bool:
        return (self.kind, self.dtype, self.shape, self.layout) == (o.kind, o.dtype, o.shape, o.layout)

    def type_text(self) -> str:
        """The DSL constructor of a handle of this type."""
        if self.kind == "rt":
            return f"rt({self.dtype}, {self.shape[0]}, {self.shape[1]}, {self.layout!r})"
        return f"rv({self.dtype}, {self.shape[0]}, {self.layout!r})"

    def derive(self, name: str, lo: float, hi: float, err: float, exact_op: bool = False, **kw) -> "Val":
        """A result of this type (or with kw changed): err plus the op's own rounding."""
        v = replace(self, name=name, lo=float(lo), hi=float(hi), **kw)
        if v.dtype == "i32":
            return wrap(replace(v, err=0.0))
        if not exact_op:
            err += EPS[v.dtype] * v.bound + 1e-30
        return replace(v, err=float(err))

    @property
    def integer(self) -> bool:
        return self.dtype == "i32" or self.kind == "index"

    def sane(self) -> bool:
        """Within the generator's limits (finite, bounded, error small);
        integers are exact and may have wrapped."""
        if self.integer:
            return True
        return (math.isfinite(self.lo) and math.isfinite(self.hi) and self.bound <= BOUND
                and self.err <= MAX_REL_ERR * max(self.bound, 1.0))


def wrap(v: Val) -> Val:
    """An i32 value whose interval left i32's range has wrapped: it may be any i32."""
    if v.dtype == "i32" and (v.lo < I32[0] or v.hi > I32[1]):
        return replace(v, lo=I32[0], hi=I32[1])
    return v


# ---------------------------------------------------------------- unary maps
# name -> (domain check(lo, hi), image(lo, hi), Lipschitz constant on [lo, hi])

def _mono(f):
    return lambda lo, hi: (f(lo), f(hi))


def _sigmoid(x):
    return 0.5 * (1.0 + math.tanh(0.5 * x))  # no overflow for any x


def _silu(x):
    return x * _sigmoid(x)


def _gelu(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


UNARY = {
    "exp": (lambda lo, hi: hi <= 5.0, _mono(math.exp), lambda lo, hi: math.exp(hi)),
    "exp2": (lambda lo, hi: hi <= 7.0, _mono(lambda x: 2.0 ** x), lambda lo, hi: math.log(2) * 2.0 ** hi),
    "log": (lambda lo, hi: lo >= 0.25, _mono(math.log), lambda lo, hi: 1.0 / lo),
    "log2": (lambda lo, hi: lo >= 0.25, _mono(math.log2), lambda lo, hi: 1.0 / (lo * math.log(2))),
    "abs": (lambda lo, hi: True,
            lambda lo, hi: (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi))),
            lambda lo, hi: 1.0),
    "relu": (lambda lo, hi: True, _mono(lambda x: max(x, 0.0)), lambda lo, hi: 1.0),
    "neg": (lambda lo, hi: True, lambda lo, hi: (-hi, -lo), lambda lo, hi: 1.0),
    "sqrt": (lambda lo, hi: lo >= 0.25, _mono(math.sqrt), lambda lo, hi: 0.5 / math.sqrt(lo)),
    "rsqrt": (lambda lo, hi: lo >= 0.25, lambda lo, hi: (hi ** -0.5, lo ** -0.5),
              lambda lo, hi: 0.5 * lo ** -1.5),
    "rcp": (lambda lo, hi: lo >= 0.25, lambda lo, hi: (1.0 / hi, 1.0 / lo), lambda lo, hi: lo ** -2),
    "sigmoid": (lambda lo, hi: True, _mono(_sigmoid), lambda lo, hi: 0.25),
    "silu": (lambda lo, hi: hi <= 50,
             lambda lo, hi: (-0.2785 if lo < 0 else _silu(lo), max(_silu(hi), 0.0)), lambda lo, hi: 1.1),
    "tanh": (lambda lo, hi: True, _mono(math.tanh), lambda lo, hi: 1.0),
    "erf": (lambda lo, hi: True, _mono(math.erf), lambda lo, hi: 1.13),
    "gelu": (lambda lo, hi: True,
             lambda lo, hi: (-0.17 if lo < 0 else _gelu(lo), max(_gelu(hi), 0.0)), lambda lo, hi: 1.13),
    "gelu_tanh": (lambda lo, hi: True,
                  lambda lo, hi: (-0.17 if lo < 0 else _gelu(lo) - 1e-3, max(_gelu(hi), 0.0) + 1e-3),
                  lambda lo, hi: 1.13),
}
# ops whose result is exactly the same float on both sides (no approximation)
EXACT_UNARY = {"abs", "relu", "neg"}


def unary(op: str, x: Val, name: str) -> Val | None:
    ok, image, lip = UNARY[op]
    if not ok(x.lo, x.hi):
        return None
    lo, hi = image(x.lo, x.hi)
    return x.derive(name, lo, hi, lip(x.lo, x.hi) * x.err, exact_op=op in EXACT_UNARY)


def product(a: tuple, b: tuple) -> tuple:
    """The interval of x * y for x in a, y in b."""
    ps = [x * y for x in a for y in b]
    return min(ps), max(ps)


def binary(op: str, a: Val, b: Val | float, name: str) -> Val | None:
    """a op b for a tile/vector a and a same-typed value or scalar b (a Val of
    kind f32 or a Python float)."""
    blo, bhi, berr = (b, b, 0.0) if isinstance(b, float) else (b.lo, b.hi, b.err)
    if op == "add":
        return a.derive(name, a.lo + blo, a.hi + bhi, a.err + berr)
    if op == "sub":
        return a.derive(name, a.lo - bhi, a.hi - blo, a.err + berr)
    if op == "mul":
        lo, hi = product((a.lo, a.hi), (blo, bhi))
        return a.derive(name, lo, hi, a.err * max(abs(blo), abs(bhi)) + berr * a.bound)
    if op == "div":
        if blo < 0.5:  # divisions only by what is positive and away from zero
            return None
        lo, hi = product((a.lo, a.hi), (1.0 / bhi, 1.0 / blo))
        return a.derive(name, lo, hi, a.err / blo + berr * a.bound / blo ** 2)
    if op in ("max", "min"):
        f = max if op == "max" else min
        return a.derive(name, f(a.lo, blo), f(a.hi, bhi), max(a.err, berr), exact_op=True)
    raise ValueError(op)


def union(name: str, a: Val, b: Val) -> Val:  # noqa: D103
    """A value that is a's or b's (a where, a branch): a's type."""
    return replace(a, name=name, lo=min(a.lo, b.lo), hi=max(a.hi, b.hi), err=max(a.err, b.err))


def accumulated(a: Val, step: Val, n: int, name: str | None = None) -> Val:
    """a after n iterations of a += (a value in step), some maybe skipped."""
    lo, hi = a.lo + n * min(step.lo, 0.0), a.hi + n * max(step.hi, 0.0)
    err = a.err + n * (step.err + EPS[a.dtype] * max(abs(lo), abs(hi)))
    return wrap(replace(a, name=name or a.name, lo=lo, hi=hi, err=err))
