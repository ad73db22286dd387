"""Complex tiles: ThunderKittens' crt, crv, cst and cgl.

A complex tile is its real and imaginary parts, two tiles of one type:

    x = tkc.crt(f32, 16, 64)          # register tile  (x.re, x.im: rt<f32, 16, 64>)
    f = tkc.cst(bf16, 64, 64)         # shared tile    (f.re, f.im: st<bf16, 64, 64>)
    u = tkc.cgl(u_re, u_im)           # a complex gl from two kernel arguments
    load(x, u, (b, d, 0, 0)); store(u, x, ...); zero(x)      # part by part
    y = x * w + x.conj() * 2.0        # elementwise complex arithmetic
    warpgroup.mma_AB(acc, x.to(bf16), f.conj())              # complex wgmma

Why pairs and not a complex element type in the IR: the tensor cores have no
complex mma, so a complex product is real products of the parts whatever the
IR says, and everything that makes real tiles fast (layout selection, the
pipeline staging, the race checker, the lowering) then applies to the parts
unchanged. The one thing the hardware gives for free is the sign: a
warpgroup mma can negate its product (`negate=True`, wgmma's imm-scale-a),
so a.re b.re - a.im b.im is two wgmmas into one accumulator and no negation
of data; and a conjugate is lazy (`conj()` flips a sign that the arithmetic
and the mma read), which makes conj(F) of a shared DFT matrix cost nothing.
Ops that move data (load, store, zero, subtile, TMA, group copies) act on
each part: they accept complex tiles wherever they accept real ones, both
sides complex.
"""
from __future__ import annotations

import functools

from .elementwise import fma
from .tiles import GLHandle, Reg, Shared, rt, rv, st
from .trace import fail

__all__ = ["Complex", "crt", "crv", "cst", "cgl", "partwise"]


class Complex:
    """re + sign * i * im: a pair of register tiles, vectors, shared tiles or
    gls of one type (sign -1: a conjugate, not yet materialised)."""

    def __init__(self, re, im, sign: int = 1):
        if type(re) is not type(im) or getattr(re, "view", None) != getattr(im, "view", None):
            raise fail(f"a complex tile's parts must have one type, got {_name(re)} and {_name(im)}")
        self.re, self.im, self.sign = re, im, sign

    def __repr__(self):
        return f"<complex {_name(self.re)}{' conj' if self.sign < 0 else ''}>"

    view = property(lambda self: self.re.view)
    dtype = property(lambda self: self.re.dtype)
    registers = property(lambda self: isinstance(self.re, Reg))

    def conj(self) -> "Complex":
        """The conjugate: a view (the sign is applied where it is read)."""
        return Complex(self.re, self.im, -self.sign)

    def resolved(self) -> "Complex":
        """The same number with sign +1 (negates the imaginary registers)."""
        if self.sign > 0:
            return self
        if not self.registers:
            raise fail(f"the conjugate of {_name(self.re)} can only be read by an mma or by "
                       "complex arithmetic: conjugate a register tile to store it")
        return Complex(self.re, -self.im)

    def to(self, dtype) -> "Complex":
        x = self._regs("to")
        return Complex(x.re.to(dtype), x.im.to(dtype), x.sign)

    # -- elementwise arithmetic (register tiles and vectors)
    def _regs(self, op: str) -> "Complex":
        if not self.registers:
            raise fail(f"complex {op} acts on register tiles and vectors, got {_name(self.re)}")
        return self

    def __add__(self, o):
        x = self._regs("+").resolved()
        if isinstance(o, Complex):
            o = o._regs("+").resolved()
            return Complex(x.re + o.re, x.im + o.im)
        return Complex(x.re + o, x.im)

    __radd__ = __add__

    def __sub__(self, o):
        return self + (-o)

    def __rsub__(self, o):
        return (-self) + o

    def __neg__(self):
        x = self._regs("-")
        return Complex(-x.re, -x.im, x.sign)

    def __mul__(self, o):
        """Complex times complex: (a + ib)(c + id) = (ac - bd) + i(ad + bc),
        the conjugates' signs folded in, each part one FMUL and one FFMA;
        times a real tile or number: each part."""
        x = self._regs("*")
        if not isinstance(o, Complex):
            return Complex(x.re * o, x.im * o, x.sign)
        o = o._regs("*")
        a, b, c, d = x.re, x.im, o.re, o.im
        re = _madd(a, c, b * d, -x.sign * o.sign)               # ac -+ bd
        if o.sign > 0:
            im = _madd(a, d, b * c, x.sign)                      # ad +- bc
        else:
            im = _madd(b, c, a * d, -1) if x.sign > 0 else -_madd(a, d, b * c, 1)
        return Complex(re, im)

    __rmul__ = __mul__


def _madd(p, q, r, sign: int):
    """p * q + sign * r, one fma (a mul and an add would round twice and
    take two instructions: the lowering keeps them apart)."""
    return fma(p, q, r if sign > 0 else -r)


def _name(x) -> str:
    if isinstance(x, Complex):
        return repr(x)
    if isinstance(x, (Reg, Shared)):
        return x.view.text().replace("!tk.", "").replace(" : i64", "")
    return x.name if isinstance(x, GLHandle) else type(x).__name__


def crt(dtype, rows: int, cols: int, layout: str = "row") -> Complex:
    """A complex register tile: two rt<dtype, rows, cols, layout>."""
    return Complex(rt(dtype, rows, cols, layout), rt(dtype, rows, cols, layout))


def crv(dtype, length: int, kind: str = "col") -> Complex:
    """A complex register vector: two rv<dtype, length, kind>."""
    return Complex(rv(dtype, length, kind), rv(dtype, length, kind))


def cst(dtype, rows: int, cols: int, swizzle: str = "auto") -> Complex:
    """A complex shared tile: two st<dtype, rows, cols> (two allocations)."""
    return Complex(st(dtype, rows, cols, swizzle), st(dtype, rows, cols, swizzle))


def cgl(re: GLHandle, im: GLHandle) -> Complex:
    """A complex gl from two gl arguments of one type (planar: real parts in
    one tensor, imaginary in the other, as ThunderKittens' cgl)."""
    for x in (re, im):
        if not isinstance(x, GLHandle):
            raise fail(f"cgl(re, im) takes two gl kernel arguments, got {_name(x)}")
    if re.spec != im.spec:
        raise fail(f"cgl: the parts must have one type, got {re.spec} and {im.spec}")
    return Complex(re, im)


def partwise(fn):
    """fn, extended to complex tiles: with a Complex argument it runs once on
    the real parts and once on the imaginary parts (the other arguments, such
    as coordinates, go to both) and returns their results as a Complex."""
    @functools.wraps(fn)
    def op(*args, **kw):
        if not any(isinstance(a, Complex) for a in args):
            return fn(*args, **kw)
        for a in args:
            if isinstance(a, (Reg, Shared, GLHandle)):
                raise fail(f"{fn.__name__}: {_name(a)} is real while another operand is complex: "
                           "give both sides as complex tiles (tkc.crt, tkc.cst, tkc.cgl)")
        args = [a.resolved() if isinstance(a, Complex) else a for a in args]
        out = [fn(*(getattr(a, part) if isinstance(a, Complex) else a for a in args), **kw)
               for part in ("re", "im")]
        return None if out[0] is None else Complex(*out)
    return op
