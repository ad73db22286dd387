"""8-bit float conversions in registers (docs/tile-ir.md, "8-bit floats").

An f8e4m3 / f8e5m2 element is held as an i8, its bits (hopper/registers.py:
LLVM's NVPTX backend has no 8-bit float). PTX converts them in pairs:
`cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, a, b` rounds a and b to nearest
even, saturates to the finite max (448, 57344; an infinity too) and keeps
NaN, a into d's high byte and b into its low one; `cvt.rn.f16x2.{e4m3x2,
e5m2x2}` widens a pair exactly to f16 and `cvt.f32.f16` to f32 (exact: every
8-bit value is an f16). A conversion is elementwise, so any two values of a
fragment make a pair: a list is converted two at a time, one instruction per
pair (an odd last one with a zero partner). Other float types go through f32
(bf16 and f16 widen exactly, and narrow by one rounding from the f32).

As a wgmma A operand (k_order="lanes", hopper/fp8_lanes.py) four of a
lane's bytes make one b32 register, byte 0 the lowest (`pack_bytes`).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm

from ..dtypes import is_fp8

_PTX = {"f8e4m3": "e4m3x2", "f8e5m2": "e5m2x2"}


def _i(bits: int):
    return ir.IntegerType.get_signless(bits)


def to_fp8(vals: list, dtype: str) -> list:
    """f32 values as `dtype`'s bits (i8), converted two at a time."""
    f32, i16 = ir.F32Type.get(), _i(16)
    text = f"cvt.rn.satfinite.{_PTX[dtype]}.f32 $0, $1, $2;"
    out = []
    for k in range(0, len(vals), 2):
        lo = vals[k]
        hi = vals[k + 1] if k + 1 < len(vals) else arith.constant(f32, 0.0)
        pair = llvm.inline_asm(i16, [hi, lo], text, "=h,f,f")   # a (hi) -> high byte
        out.append(arith.trunci(_i(8), pair))
        if k + 1 < len(vals):
            out.append(arith.trunci(_i(8), arith.shrui(pair, arith.constant(i16, 8))))
    return out


def from_fp8(vals: list, dtype: str) -> list:
    """`dtype`'s bits (i8 values) widened to f32, two at a time."""
    f32, i16 = ir.F32Type.get(), _i(16)
    text = ("{ .reg .b32 tkh; .reg .b16 tklo, tkhi;\n"
            f"cvt.rn.f16x2.{_PTX[dtype]} tkh, $2;\n"
            "mov.b32 {tklo, tkhi}, tkh;\n"
            "cvt.f32.f16 $0, tklo;\ncvt.f32.f16 $1, tkhi; }")
    out = []
    for k in range(0, len(vals), 2):
        pair = arith.extui(i16, vals[k])
        if k + 1 < len(vals):
            hi = arith.shli(arith.extui(i16, vals[k + 1]), arith.constant(i16, 8))
            pair = arith.ori(pair, hi)
        res = llvm.inline_asm(llvm.StructType.get_literal([f32, f32]), [pair], text, "=f,=f,h")
        out.append(llvm.extractvalue(f32, res, [0]))
        if k + 1 < len(vals):
            out.append(llvm.extractvalue(f32, res, [1]))
    return out


def pack_bytes(vals: list):
    """Four i8 values as one b32 register, vals[0] in the lowest byte. Two
    adjacent bytes that one cvt made (to_fp8's pair: the low byte and the
    high one of one i16) join as that i16, so a register of two pairs is a
    `mov.b32 {lo, hi}`, no instruction; other bytes go through a vector<4xi8>."""
    i16, i32 = _i(16), _i(32)
    halves = [_pair(vals[0], vals[1]), _pair(vals[2], vals[3])]
    if all(h is not None for h in halves):
        vec = llvm.mlir_undef(ir.VectorType.get([2], i16))
        for pos, v in enumerate(halves):
            vec = llvm.insertelement(vec, v, arith.constant(i32, pos))
        return llvm.bitcast(i32, vec)
    vec = llvm.mlir_undef(ir.VectorType.get([4], _i(8)))
    for pos, v in enumerate(vals):
        vec = llvm.insertelement(vec, v, arith.constant(i32, pos))
    return llvm.bitcast(i32, vec)


def _pair(lo, hi):
    """The i16 that lo and hi are the low and high byte of (to_fp8's
    trunci(pair), trunci(shrui(pair, 8))), or None."""
    def trunc_of(v):
        op = v.owner if isinstance(v, ir.OpResult) else None
        return op.operands[0] if op is not None and op.name == "arith.trunci" else None
    low, high = trunc_of(lo), trunc_of(hi)
    if low is None or not isinstance(high, ir.OpResult):
        return None
    shifted = high.owner
    return low if shifted.name == "arith.shrui" and shifted.operands[0] == low else None


def convert_all(vals: list, src: str, dst: str, to_f32, from_f32) -> list:
    """vals converted from src to dst where either is an 8-bit float, through
    f32 (to_f32 / from_f32: the other types' widening and rounding, given by
    the caller, compute.py)."""
    if src == dst:
        return list(vals)
    wide = from_fp8(vals, src) if is_fp8(src) else [to_f32(v, src) for v in vals]
    return to_fp8(wide, dst) if is_fp8(dst) else [from_f32(v, dst) for v in wide]
