"""func, scf and arith: the scalar and control-flow part of tile IR.

Integers are Python ints wrapped to their type's width after every op
(`index` is 64-bit, i1 is 0/1); floats are numpy float32 scalars (bf16/f16
scalars rounded). scf.for and scf.if are generator steps, since their bodies
may reach a tk.sync.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..diagnostics import error
from .program import Step, execute, handler, run_plain
from .values import int_bits, round_scalar, unsigned, wrap

# ---- constants and conversions


def _float_maker(type_text: str):
    """Make a scalar of float type `type_text` from a Python/numpy number."""
    if type_text == "f64":
        return float
    if type_text == "f32":
        return np.float32
    if type_text in ("bf16", "f16"):
        return lambda v: round_scalar(type_text, v)
    raise ValueError(f"unsupported float type {type_text}")


def _is_float(type_text: str) -> bool:
    return type_text in ("f64", "f32", "f16", "bf16")


_TEXTS: dict = {}  # ir.Type -> its text, as dialect.types.view keeps views


def type_str(t) -> str:
    """A type's text, printed once a type: printing is most of what compiling
    an arith op costs (the fuzz tests compile ~2,000 kernels' closures)."""
    s = _TEXTS.get(t)
    if s is None:
        if len(_TEXTS) >= 4096:   # types of many contexts
            _TEXTS.clear()
        s = _TEXTS[t] = str(t)
    return s


def _result_type(op) -> str:
    return type_str(op.results[0].type)


@handler("arith.constant")
def _constant(c, op):
    t, attr, out = _result_type(op), op.attributes["value"], c.result_slot(op)
    if _is_float(t):
        value = _float_maker(t)(attr.value)
    else:
        try:
            value = wrap(int(attr.value), int_bits(t))
        except (ValueError, AttributeError, TypeError):
            raise error(op, f"arith.constant of type {t} is not supported by the interpreter")

    def step(env, w):
        env[out] = value
    return step


def _map(c, op, f):
    """A step computing `f(*operands)` into the single result."""
    ins, out = c.operand_slots(op), c.result_slot(op)
    if len(ins) == 1:
        (a,) = ins

        def step(env, w):
            env[out] = f(env[a])
    elif len(ins) == 2:
        a, b = ins

        def step(env, w):
            env[out] = f(env[a], env[b])
    else:
        def step(env, w):
            env[out] = f(*[env[i] for i in ins])
    return step


def _tdiv(a: int, b: int) -> int:
    """Division truncating toward zero (C, LLVM sdiv)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


# signed integer ops on Python ints; results wrapped to the type's width
_INT = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divsi": _tdiv,
    "arith.remsi": lambda a, b: a - b * _tdiv(a, b),
    "arith.floordivsi": lambda a, b: a // b,
    "arith.ceildivsi": lambda a, b: -((-a) // b),
    "arith.minsi": min,
    "arith.maxsi": max,
    "arith.andi": lambda a, b: a & b,
    "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b,
    "arith.shli": lambda a, b: a << b,
    "arith.shrsi": lambda a, b: a >> b,
}

# ops that read their operands as unsigned
_UINT = {
    "arith.divui": lambda a, b: a // b,
    "arith.remui": lambda a, b: a % b,
    "arith.minui": min,
    "arith.maxui": max,
    "arith.shrui": lambda a, b: a >> b,
}


# the _INT ops that are one Python operator: their steps call it directly
_OPERATOR = {"arith.addi": operator.add, "arith.subi": operator.sub, "arith.muli": operator.mul,
             "arith.andi": operator.and_, "arith.ori": operator.or_, "arith.xori": operator.xor}


@handler(*_INT)
def _int_binary(c, op):
    f, bits = _INT[op.name], int_bits(_result_type(op))
    if op.name not in _OPERATOR or bits == 1 or len(op.operands) != 2:
        return _map(c, op, lambda a, b: wrap(f(a, b), bits))
    # index arithmetic runs for every op of every loop iteration: one
    # operator call and a range check (wrap only when the value leaves it)
    f, lo, hi = _OPERATOR[op.name], -(1 << (bits - 1)), 1 << (bits - 1)
    (a, b), out = c.operand_slots(op), c.result_slot(op)

    def step(env, w):
        v = f(env[a], env[b])
        env[out] = v if lo <= v < hi else wrap(v, bits)
    return step


@handler(*_UINT)
def _uint_binary(c, op):
    f, bits = _UINT[op.name], int_bits(_result_type(op))
    return _map(c, op, lambda a, b: wrap(f(unsigned(a, bits), unsigned(b, bits)), bits))


_CMPI = (
    lambda a, b, n: a == b, lambda a, b, n: a != b,
    lambda a, b, n: a < b, lambda a, b, n: a <= b,
    lambda a, b, n: a > b, lambda a, b, n: a >= b,
    lambda a, b, n: unsigned(a, n) < unsigned(b, n), lambda a, b, n: unsigned(a, n) <= unsigned(b, n),
    lambda a, b, n: unsigned(a, n) > unsigned(b, n), lambda a, b, n: unsigned(a, n) >= unsigned(b, n),
)


# the signed (and equality) predicates as operators, for cmpi's common steps
_CMPI_OPERATOR = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)


@handler("arith.cmpi")
def _cmpi(c, op):
    p = op.attributes["predicate"].value
    pred = _CMPI[p]
    bits = int_bits(type_str(op.operands[0].type))
    if p >= len(_CMPI_OPERATOR) or len(op.operands) != 2:
        return _map(c, op, lambda a, b: int(pred(a, b, bits)))
    f, (a, b), out = _CMPI_OPERATOR[p], c.operand_slots(op), c.result_slot(op)

    def step(env, w):
        env[out] = 1 if f(env[a], env[b]) else 0
    return step


def _ordered(f):
    return lambda a, b: not (math.isnan(a) or math.isnan(b)) and f(a, b)


def _unordered(f):
    return lambda a, b: math.isnan(a) or math.isnan(b) or f(a, b)


_CMPF = (
    lambda a, b: False,
    _ordered(lambda a, b: a == b), _ordered(lambda a, b: a > b), _ordered(lambda a, b: a >= b),
    _ordered(lambda a, b: a < b), _ordered(lambda a, b: a <= b), _ordered(lambda a, b: a != b),
    _ordered(lambda a, b: True),
    _unordered(lambda a, b: a == b), _unordered(lambda a, b: a > b), _unordered(lambda a, b: a >= b),
    _unordered(lambda a, b: a < b), _unordered(lambda a, b: a <= b), _unordered(lambda a, b: a != b),
    _unordered(lambda a, b: False),
    lambda a, b: True,
)


@handler("arith.cmpf")
def _cmpf(c, op):
    pred = _CMPF[op.attributes["predicate"].value]
    return _map(c, op, lambda a, b: int(pred(float(a), float(b))))


def _fmax_nan(a, b):
    return a if math.isnan(a) else b if math.isnan(b) else max(a, b)


def _fmin_nan(a, b):
    return a if math.isnan(a) else b if math.isnan(b) else min(a, b)


_FLOAT = {
    "arith.addf": lambda a, b: a + b,
    "arith.subf": lambda a, b: a - b,
    "arith.mulf": lambda a, b: a * b,
    "arith.divf": lambda a, b: np.divide(a, b),
    "arith.remf": lambda a, b: np.fmod(a, b),
    "arith.maximumf": _fmax_nan,
    "arith.minimumf": _fmin_nan,
    "arith.maxnumf": np.fmax,
    "arith.minnumf": np.fmin,
}


@handler(*_FLOAT)
def _float_binary(c, op):
    f, make = _FLOAT[op.name], _float_maker(_result_type(op))
    return _map(c, op, lambda a, b: make(f(a, b)))


@handler("arith.negf")
def _negf(c, op):
    make = _float_maker(_result_type(op))
    return _map(c, op, lambda a: make(-a))


@handler("arith.select")
def _select(c, op):
    return _map(c, op, lambda cond, a, b: a if cond else b)


def _int_cast(c, op, read_unsigned: bool):
    src_bits, bits = int_bits(type_str(op.operands[0].type)), int_bits(_result_type(op))
    if read_unsigned:
        return _map(c, op, lambda a: wrap(unsigned(a, src_bits), bits))
    return _map(c, op, lambda a: wrap(a, bits))


@handler("arith.index_cast", "arith.extsi", "arith.trunci")
def _index_cast(c, op):
    return _int_cast(c, op, read_unsigned=False)


@handler("arith.index_castui", "arith.extui")
def _index_castui(c, op):
    return _int_cast(c, op, read_unsigned=True)


@handler("arith.sitofp", "arith.uitofp")
def _int_to_float(c, op):
    make, bits = _float_maker(_result_type(op)), int_bits(type_str(op.operands[0].type))
    if op.name == "arith.uitofp":
        return _map(c, op, lambda a: make(unsigned(a, bits)))
    return _map(c, op, lambda a: make(a))


@handler("arith.fptosi")
def _fptosi(c, op):
    bits = int_bits(_result_type(op))
    return _map(c, op, lambda a: wrap(int(a), bits))  # int() truncates toward zero


@handler("arith.extf", "arith.truncf")
def _float_cast(c, op):
    return _map(c, op, _float_maker(_result_type(op)))


# ---- scf


@handler("scf.for")
def _for(c, op):
    lb, ub, st, *inits = c.operand_slots(op)
    body = c.region(op.regions[0])
    iv, carried = body.arg_slots[0], body.arg_slots[1:]
    results = [c.slot(r) for r in op.results]

    def iterations(env):
        """(the induction variable's values, the carried values' start)."""
        lo, hi, by = env[lb], env[ub], env[st]
        if by <= 0:
            raise error(op, f"scf.for: step must be positive, got {by}")
        return range(lo, hi, by), [env[s] for s in inits]

    def enter(env, i, values):   # iteration i's block arguments
        env[iv] = i
        for s, v in zip(carried, values):
            env[s] = v

    def leave(env, values):      # the loop's results
        for s, v in zip(results, values):
            env[s] = v

    def step(env, w):
        ivs, values = iterations(env)
        for i in ivs:
            enter(env, i, values)
            values = yield from execute(body, env, w)
        leave(env, values)

    def plain(env, w):   # the same, for a body that reaches no barrier: run as a plain call
        ivs, values = iterations(env)
        for i in ivs:
            enter(env, i, values)
            values = run_plain(body, env, w)
        leave(env, values)
    return Step(step, op, gen=True) if body.gen else Step(plain, op)


@handler("scf.if")
def _if(c, op):
    cond = c.slot(op.operands[0])
    then, other = c.region(op.regions[0]), c.region(op.regions[1])
    results = [c.slot(r) for r in op.results]

    def step(env, w):
        block = then if env[cond] else other
        if block is None:
            return
        values = yield from execute(block, env, w)
        for s, v in zip(results, values):
            env[s] = v

    def plain(env, w):   # the same, for branches that reach no barrier
        block = then if env[cond] else other
        if block is None:
            return
        values = run_plain(block, env, w)
        for s, v in zip(results, values):
            env[s] = v
    if any(b is not None and b.gen for b in (then, other)):
        return Step(step, op, gen=True)
    return Step(plain, op)
