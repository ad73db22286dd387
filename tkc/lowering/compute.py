"""Elementwise register-tile rules: initialisers, copy, unary and binary maps.

Everything is per thread and unrolled: a tile's op is the same scalar op on
each of the thread's fragment values (fragments.py), because elementwise ops
do not care which element a value is. bf16/f16 values compute in f32 and
round back to nearest even (docs/tile-ir.md: a 16-bit tile's values are
always representable in its type).

Fast hardware paths, as ThunderKittens uses them: exp(x) = ex2.approx(x *
log2 e), exp2 = ex2.approx, log(x) = lg2.approx(x) * ln 2, log2 = lg2.approx
(all .ftz.f32); sqrt, rsqrt, rcp are the .approx.ftz.f32 instructions, tanh is
tanh.approx.f32, sigmoid(x) = rcp(1 + ex2(-x log2 e)), silu(x) = x sigmoid(x),
erf is Abramowitz & Stegun 7.1.26 (a degree-5 polynomial in 1 / (1 + p|x|)
times exp(-x^2)), gelu its erf form and gelu_tanh the tanh form; fma is
fma.rn.f32 (tk.fma's rule is in reduce.py, beside the row broadcast its
vector operand needs). div is div.full.f32 (2 ulp, full range) unless the op says
`ieee`: then div.rn.f32. docs/tile-ir.md ("Math") gives each one's error.

An i32 tile computes in i32 (to_f32 / from_f32 pass its values through:
i32 is its own compute type): add, sub, mul wrap modulo 2^32, max and min are
signed, abs / neg / relu exact (abs and neg of -2^31 wrap to -2^31, as abs.s32).
A float -> i32 copy truncates toward zero and saturates, NaN giving 0
(cvt.rzi.s32.f32); i32 -> float rounds to nearest (cvt.rn.f32.s32), to a
16-bit type through f32.
"""
from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, llvm

from ..diagnostics import error
from ..dialect.types import RT, RV, view
from ..dtypes import I32_MAX, I32_MIN, is_fp8
from ..hopper.registers import frag_len, scalar_type
from . import fp8
from .core import Frag, rule

F32, I32 = "f32", "i32"


# ---------------------------------------------------------------- scalar helpers

def f32_type() -> ir.Type:
    return ir.F32Type.get()


def to_f32(v: ir.Value, dtype: str) -> ir.Value:
    """An element of `dtype` widened to f32 (exact), its compute type; an i32
    passes through (i32 computes in i32)."""
    return v if dtype in (F32, I32) else arith.extf(f32_type(), v)


def from_f32(v: ir.Value, dtype: str) -> ir.Value:
    """An f32 rounded to `dtype` (nearest even: cvt.rn.bf16.f32 / cvt.rn.f16.f32);
    an i32 result passes through (computed in i32)."""
    return v if dtype in (F32, I32) else arith.truncf(scalar_type(dtype), v)


def convert(v: ir.Value, src: str, dst: str) -> ir.Value:
    """An element converted between tk dtypes (through f32 when both are
    16-bit, or one is i32: the module docstring says how)."""
    if src == dst:
        return v
    if dst == I32:
        return llvm.inline_asm(scalar_type(I32), [to_f32(v, src)], "cvt.rzi.s32.f32 $0, $1;", "=r,f")
    if src == I32:
        v, src = arith.sitofp(f32_type(), v), F32
    return from_f32(to_f32(v, src), dst)


def ptx_f32(op: str, x: ir.Value) -> ir.Value:
    """A one-operand f32 PTX instruction (e.g. "ex2.approx.ftz.f32") on x."""
    return llvm.inline_asm(f32_type(), [x], f"{op} $0, $1;", "=f,f")


def ex2(x):
    return ptx_f32("ex2.approx.ftz.f32", x)


def lg2(x):
    return ptx_f32("lg2.approx.ftz.f32", x)


# exp2 off the MUFU (FlashAttention-4's emulation, for the `fma` share of
# exp / exp2): 2^x = 2^floor(x) * 2^f, f in [0, 1), and floor(x) added into
# the exponent field of 2^f's bits (one LEA). x is clamped to [-127, 128]
# first by one saturating FFMA: u = (x + 127) / 255 in [0, 1] (x moves by up
# to 1.5e-5, 2^x by 1e-5; at -127 the sum of bits is exactly +0, so -inf and
# anything below give 0, as ex2.approx.ftz's flush, and NaN too; at 128
# exactly inf). floor(x) by one FFMA rounding down, t = 255 u + (1.5 * 2^23
# - 127): at that magnitude the unit is 1, so t = floor(x) + 1.5 * 2^23 with
# floor(x) in its low mantissa bits; f = 255 u - (t - (1.5 * 2^23 - 127))
# (one FADD, exact, and one FFMA); 2^f by a degree-3 polynomial with p(0) = 1
# (minimax relative error 8.6e-5 on [0, 1), below bf16's 2^-9). Where x is
# itself a fma or a product (the softmax's s c - m c, the attention
# backward's s c), the clamp takes its operands: one instruction fewer
# again. So all but the LEA run on the FMA pipe, beside the MUFU's ex2 of
# the other elements, and the ALU (the row maxima, masks) is left alone: 8
# instructions an element, the fma of x included.
EX2_ROUND = 1.5 * 2 ** 23
EX2_POLY = (0.6951165199279785, 0.2276460975408554, 0.07706602662801743)  # f, f^2, f^3


def ex2_fma(lw, x):
    """2^x without the MUFU (EX2_POLY's comment)."""
    i32 = ir.IntegerType.get_signless(32)
    a, b, c, big, one = _f(lw, 1 / 255, 127 / 255, 255.0, EX2_ROUND - 127, 1.0)
    product = _product_of(x)
    if product is not None:          # x = p q [+ r]: u = p (q / 255) + (r + 127) / 255
        p, q, r = product
        x, a, b = p, arith.mulf(q, a), b if r is None else llvm.intr_fma(r, a, b)
    u = llvm.inline_asm(f32_type(), [x, a, b], "fma.rn.sat.f32 $0, $1, $2, $3;", "=f,f,f,f")
    t = llvm.inline_asm(f32_type(), [u, c, big], "fma.rm.f32 $0, $1, $2, $3;", "=f,f,f,f")
    f = llvm.intr_fma(u, c, arith.subf(big, t))                 # in [0, 1)
    p = const(lw, EX2_POLY[-1])
    for k in reversed(EX2_POLY[:-1]):
        p = llvm.intr_fma(p, f, const(lw, k))
    p = llvm.intr_fma(p, f, one)
    bits = arith.addi(arith.shli(arith.bitcast(i32, t), arith.constant(i32, 23)), arith.bitcast(i32, p))
    return arith.bitcast(f32_type(), bits)


def _product_of(x):
    """(p, q, r) where x = fma(p, q, r), (p, q, None) where x = p * q (f32
    values), else None."""
    if not isinstance(x.owner, (ir.Operation, ir.OpView)):
        return None                  # a block argument
    op = x.owner.operation
    if op.name == "llvm.intr.fma":
        return tuple(op.operands)
    return (*op.operands, None) if op.name == "arith.mulf" else None


def fma_picks(n: int, share: float) -> list[bool]:
    """Which of n values go to ex2_fma for a `share` of them, spread evenly
    (value i iff floor((i + 1) share) > floor(i share))."""
    return [math.floor((i + 1) * share + 1e-9) > math.floor(i * share + 1e-9) for i in range(n)]


def const(lw, x: float) -> ir.Value:
    return lw.const_f32(x)


def _f(lw, *xs):
    return [const(lw, x) for x in xs]


def sigmoid(lw, x):
    one, k = _f(lw, 1.0, -math.log2(math.e))
    return ptx_f32("rcp.approx.ftz.f32", arith.addf(one, ex2(arith.mulf(x, k))))


# Abramowitz & Stegun 7.1.26: erf(a) = 1 - t (a1 + t (a2 + ...)) exp(-a^2), t = 1/(1 + p a)
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf(lw, x):
    a = llvm.intr_fabs(x)
    one, p = _f(lw, 1.0, _ERF_P)
    t = ptx_f32("rcp.approx.ftz.f32", arith.addf(one, arith.mulf(p, a)))
    poly = const(lw, _ERF_A[-1])
    for c in reversed(_ERF_A[:-1]):
        poly = llvm.intr_fma(poly, t, const(lw, c))
    poly = arith.mulf(poly, t)
    e = ex2(arith.mulf(arith.mulf(a, a), const(lw, -math.log2(math.e))))
    return llvm.intr_copysign(arith.subf(one, arith.mulf(poly, e)), x)


def gelu(lw, x):
    half, one, k = _f(lw, 0.5, 1.0, 1 / math.sqrt(2))
    return arith.mulf(arith.mulf(half, x), arith.addf(one, erf(lw, arith.mulf(x, k))))


def gelu_tanh(lw, x):
    half, one, k, c = _f(lw, 0.5, 1.0, math.sqrt(2 / math.pi), 0.044715)
    inner = arith.mulf(k, llvm.intr_fma(arith.mulf(c, arith.mulf(x, x)), x, x))
    return arith.mulf(arith.mulf(half, x), arith.addf(one, ptx_f32("tanh.approx.f32", inner)))


# f32 -> f32 scalar functions of the unary ops
UNARY = {
    "tk.exp": lambda lw, x: ex2(arith.mulf(x, const(lw, math.log2(math.e)))),
    "tk.exp2": lambda lw, x: ex2(x),
    "tk.log": lambda lw, x: arith.mulf(lg2(x), const(lw, math.log(2.0))),
    "tk.log2": lambda lw, x: lg2(x),
    "tk.abs": lambda lw, x: llvm.intr_fabs(x),
    "tk.relu": lambda lw, x: arith.maxnumf(x, const(lw, 0.0)),
    "tk.neg": lambda lw, x: arith.negf(x),
    "tk.sqrt": lambda lw, x: ptx_f32("sqrt.approx.ftz.f32", x),
    "tk.rsqrt": lambda lw, x: ptx_f32("rsqrt.approx.ftz.f32", x),
    "tk.rcp": lambda lw, x: ptx_f32("rcp.approx.ftz.f32", x),
    "tk.tanh": lambda lw, x: ptx_f32("tanh.approx.f32", x),
    "tk.sigmoid": sigmoid,
    "tk.silu": lambda lw, x: arith.mulf(x, sigmoid(lw, x)),
    "tk.erf": erf,
    "tk.gelu": gelu,
    "tk.gelu_tanh": gelu_tanh,
}


def fast_div(a, b):
    """a / b to within 2 ulp over the full range (no IEEE slow path)."""
    return llvm.inline_asm(f32_type(), [a, b], "div.full.f32 $0, $1, $2;", "=f,f,f")

# (f32, f32) -> f32 scalar functions of the binary ops (also used by reduce.py)
BINARY = {
    "add": arith.addf,
    "sub": arith.subf,
    "mul": arith.mulf,
    "div": arith.divf,
    "max": arith.maxnumf,
    "min": arith.minnumf,
}

# (i32, i32) -> i32: an i32 tile's (no div: tk-verify refuses it)
INT_BINARY = {"add": arith.addi, "sub": arith.subi, "mul": arith.muli, "max": arith.maxsi, "min": arith.minsi}


def binary_fn(name: str, dtype: str):
    """The scalar function of binary op `name` for a tile of `dtype`."""
    return INT_BINARY[name] if dtype == I32 else BINARY[name]


# i32 -> i32 maps of an i32 tile
INT_UNARY = {
    "tk.abs": lambda lw, x: llvm.intr_abs(x.type, x, False),
    "tk.neg": lambda lw, x: arith.subi(lw.const_i32(0), x),
    "tk.relu": lambda lw, x: arith.maxsi(x, lw.const_i32(0)),
}


def map_frag(x: Frag, out_view, fn) -> Frag:
    """Frag of `out_view` whose value i is fn(f32 value i of x), rounded back."""
    return Frag(out_view, [from_f32(fn(to_f32(v, x.view.dtype)), out_view.dtype) for v in x.vals])


def result_view(op):
    v = view(op.results[0].type)
    if not isinstance(v, (RT, RV)):
        raise error(op, f"{op.name} must give an rt or rv, found {op.results[0].type}")
    return v


def same_shape(op, a, b) -> None:
    """a and b (views) have the same shape and layout/kind, else a located error."""
    if a.with_(dtype=b.dtype) != b:
        raise error(op, f"{op.name}: operand {a.text()} and result {b.text()} differ in shape or layout")


def frag_arg(op, x, pos: int = 0) -> Frag:
    if not isinstance(x, Frag):
        raise error(op, f"{op.name}: operand {pos} must be an rt or rv, found {op.operands[pos].type}")
    return x


# ---------------------------------------------------------------- rules

_INIT_VALUES = {"tk.zero": 0.0, "tk.ones": 1.0, "tk.neg_infty": -math.inf, "tk.pos_infty": math.inf}
_INT_INIT = {"tk.zero": 0, "tk.ones": 1, "tk.neg_infty": I32_MIN, "tk.pos_infty": I32_MAX}  # i32's range


@rule(*_INIT_VALUES)
def _init(lw, op, args):
    v = result_view(op)
    c = arith.constant(scalar_type(v.dtype), (_INT_INIT if v.dtype == I32 else _INIT_VALUES)[op.name])
    return [Frag(v, [c] * frag_len(v))]  # one constant serves every element


@rule("tk.fill")
def _fill(lw, op, args):
    v = result_view(op)
    c = from_f32(args[0], v.dtype)
    return [Frag(v, [c] * frag_len(v))]


@rule("tk.copy")
def _copy(lw, op, args):
    x, v = frag_arg(op, args[0]), result_view(op)
    same_shape(op, x.view, v)
    if is_fp8(x.view.dtype) or is_fp8(v.dtype):
        if I32 in (x.view.dtype, v.dtype):
            raise error(op, f"copy: an 8-bit float tile converts to and from float tiles, not i32")
        return [Frag(v, fp8.convert_all(x.vals, x.view.dtype, v.dtype, to_f32, from_f32))]
    if x.view.dtype == F32 and v.dtype in ("bf16", "f16") and len(x.vals) % 2 == 0:
        return [Frag(v, narrow_pairs(x.vals, v.dtype))]
    return [Frag(v, [convert(e, x.view.dtype, v.dtype) for e in x.vals])]


def narrow_pairs(vals: list, dtype: str) -> list:
    """f32 values rounded to a 16-bit dtype two at a time: one packed
    cvt.rn.bf16x2.f32 (f16x2) per pair, half the instructions of scalar
    cvts, and the form ptxas expects next to wgmma: scalar cvts reading
    wgmma accumulators make it serialise every wgmma of the kernel (C7514)."""
    i32, t = ir.IntegerType.get_signless(32), scalar_type(dtype)
    out = []
    for lo, hi in zip(vals[0::2], vals[1::2]):
        vec = llvm.mlir_undef(ir.VectorType.get([2], f32_type()))
        for pos, e in enumerate((lo, hi)):
            vec = llvm.insertelement(vec, e, arith.constant(i32, pos))
        half = arith.truncf(ir.VectorType.get([2], t), vec)
        out += [llvm.extractelement(half, arith.constant(i32, pos)) for pos in (0, 1)]
    return out


def scalars(args) -> bool:
    """Math on f32 scalars (every operand an f32 Value)."""
    return all(isinstance(a, ir.Value) and str(a.type) == "f32" for a in args)


# the exponent of 2 that exp / exp2 hand to ex2 (for their `fma` share)
EX2_OF = {"tk.exp": lambda lw, x: arith.mulf(x, const(lw, math.log2(math.e))), "tk.exp2": lambda lw, x: x}


@rule(*UNARY)
def _unary(lw, op, args):
    if op.name != "tk.copy" and scalars(args):
        return [UNARY[op.name](lw, args[0])]
    x, v = frag_arg(op, args[0]), result_view(op)
    same_shape(op, x.view, v)
    if x.view.dtype == I32:
        if op.name not in INT_UNARY:
            raise error(op, f"{op.name} computes on float tiles, found {op.operands[0].type}")
        return [Frag(v, [INT_UNARY[op.name](lw, e) for e in x.vals])]
    fn = UNARY[op.name]
    if "fma" not in op.attributes:
        return [map_frag(x, v, lambda e: fn(lw, e))]
    picks = fma_picks(len(x.vals), ir.FloatAttr(op.attributes["fma"]).value)
    ins = [to_f32(e, x.view.dtype) for e in x.vals]
    return [Frag(v, [from_f32(ex2_fma(lw, EX2_OF[op.name](lw, e)) if pick else fn(lw, e), v.dtype)
                     for e, pick in zip(ins, picks)])]


@rule(*(f"tk.{n}" for n in BINARY))
def _binary(lw, op, args):
    x, y, v = frag_arg(op, args[0]), args[1], result_view(op)
    same_shape(op, x.view, v)
    ints = x.view.dtype == I32
    if ints and op.name == "tk.div":
        raise error(op, f"tk.div computes on float tiles, found {op.operands[0].type}")
    fn = binary_fn(op.name[3:], x.view.dtype)
    if op.name == "tk.div" and "ieee" not in op.attributes:
        fn = fast_div
    scalar = I32 if ints else F32
    if isinstance(y, Frag):
        if y.view != x.view:
            raise error(op, f"{op.name}: operands {x.view.text()} and {y.view.text()} differ")
        ys = [to_f32(e, y.view.dtype) for e in y.vals]
    elif isinstance(y, ir.Value) and str(y.type) == scalar:
        ys = [y] * len(x.vals)  # tile op scalar: the scalar applies to every element
    else:
        raise error(op, f"{op.name}: second operand must be {x.view.text()} or {scalar}, found "
                        f"{op.operands[1].type}")
    xs = [to_f32(e, x.view.dtype) for e in x.vals]
    return [Frag(v, [from_f32(fn(a, b), v.dtype) for a, b in zip(xs, ys)])]
