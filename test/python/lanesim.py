"""A 32-lane simulator of lowered IR, and helpers to build and run
single-warp kernels through it (shared by the lowering tests).

`simulate` runs the nvvm-stage IR that lower_module produces on one warp in
numpy: every SSA value is an array over the 32 lanes, shuffles gather across
lanes, and mma.sync / movmatrix follow the PTX ISA's fragment tables (written
here from the ISA, independently of tkc/hopper/fragments.py). So the
tests check the emitted IR itself, not a second model of it. Kernels in
these tests move tiles with test-only load/store rules (`lane_major_io`): a
gl buffer holds a fragment lane-major, value i of lane l at i * 32 + l.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from tkc.dialect import context, ops
from tkc.dialect.types import GL, RT, view
from tkc.hopper import fragments
from tkc.interpreter.structured import type_str  # one cache of types' texts
from tkc.lowering import lower_module

mlir = pytest.importorskip("mlir")
from mlir import ir  # noqa: E402
from mlir.dialects import func, llvm  # noqa: E402

LANES = np.arange(32)
G, T = LANES // 4, LANES % 4


# ---------------------------------------------------------------- numerics

def bf16(x):
    """Round float32 to bf16 (nearest even), kept as float32."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def round_to(x, dtype):
    x = np.asarray(x, np.float32)
    return {"f32": lambda v: v, "bf16": bf16, "f16": lambda v: v.astype(np.float16).astype(np.float32)}[dtype](x)


def _dtype_of(t) -> str:
    """The element dtype of a scalar or vector type (vector<2xbf16>: packed pairs)."""
    s = type_str(t)
    if s.startswith("vector<"):
        s = s.rstrip(">").split("x")[-1]
    return {"bf16": "bf16", "f16": "f16", "f32": "f32"}.get(s, "f32")


# ---------------------------------------------------------------- PTX fragment tables

def _mma(a_regs, b_regs, c):
    """mma.sync.m16n8k16.row.col per the PTX ISA: A 16x16 from a0..a3, B 16x8 from b0, b1."""
    A, Bm, C = np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8))
    for r, (dr, dc) in enumerate(((0, 0), (8, 0), (0, 8), (8, 8))):
        for h in range(2):
            A[G + dr, 2 * T + h + dc] = a_regs[r][:, h]
    for r, dk in enumerate((0, 8)):
        for h in range(2):
            Bm[2 * T + h + dk, G] = b_regs[r][:, h]
    for r, (dr, dc) in enumerate(((0, 0), (0, 1), (8, 0), (8, 1))):
        C[G + dr, 2 * T + dc] = c[r]
    D = (A @ Bm + C).astype(np.float32)
    return [D[G + dr, 2 * T + dc] for dr, dc in ((0, 0), (0, 1), (8, 0), (8, 1))]


def _movmatrix(reg):
    """movmatrix.m8n8.trans.b16: lane (g, t) holds row g, cols 2t, 2t+1, before and after."""
    M = np.zeros((8, 8), np.float32)
    for h in range(2):
        M[G, 2 * T + h] = reg[:, h]
    Mt = M.T
    return np.stack([Mt[G, 2 * T], Mt[G, 2 * T + 1]], axis=1)


# ---------------------------------------------------------------- the simulator

class _Return(Exception):
    pass


class Warp:
    """Runs a lowered llvm.func for warp 0 (lanes 0..31) over numpy buffers."""

    def __init__(self, buffers):
        self.buffers = buffers
        self.env = {}
        self.active = np.ones(32, bool)  # lanes inside every enclosing lane-dependent scf.if

    def run(self, llvm_func, args):
        entry = llvm_func.regions[0].blocks[0]
        for a, v in zip(entry.arguments, args):
            self.env[a] = v
        block = entry
        try:
            while block is not None:
                block = self.block(block)
        except _Return:
            pass

    def block(self, block):
        """Run a block; returns the next block (llvm.br) or None."""
        for op in block.operations:
            op = op.operation
            if op.name == "llvm.br":
                return op.successors[0]
            out = self.op(op)
            if out is not None:
                return out
        return None

    def get(self, v):
        return self.env[v]

    def op(self, op):
        name = op.name
        ins = [self.get(v) for v in op.operands]
        res = None
        if name == "scf.for":
            res = self._for(op, ins)
        elif name == "scf.if":
            res = self._if(op, ins)
        elif name == "scf.yield":
            raise _Yield(ins)
        elif name == "llvm.return":
            raise _Return()
        elif name == "nvvm.barrier0":  # one warp: nothing to wait for
            return None
        elif name == "llvm.inline_asm" and \
                ir.StringAttr(op.attributes["asm_string"]).value.startswith("red.global.add."):
            self._red(ins)   # f32 reduce-adds (one, a pair or four): a lane's consecutive elements
            return None
        elif name == "llvm.store":
            buf, off = _words(*ins[1], op.operands[0].type)
            val, on = np.asarray(ins[0]), self.active
            if val.dtype.kind == "i":  # an integer: the buffer holds its signed value
                val = s32(val)
            off = np.broadcast_to(np.asarray(off), (32,))
            _in_bounds(self.buffers[buf], off[on], val.shape[1] if val.ndim == 2 else 1)
            if val.ndim == 2:  # a vector store: n consecutive elements a lane
                self.buffers[buf][off[on][:, None] + np.arange(val.shape[1])] = val[on]
            else:
                self.buffers[buf][off[on]] = np.broadcast_to(val, (32,))[on]
            return None
        else:
            res = _pure(op, ins)
        res = res if isinstance(res, list) else [res]
        for r, v in zip(op.results, res, strict=True):
            self.env[r] = v
        return None

    def _red(self, ins) -> None:
        """red.global.add.[v2.|v4.]f32 [ptr], values: each active lane adds its
        values to consecutive elements (lanes meeting at an element all add)."""
        (buf, off), vals = ins[0], [np.broadcast_to(np.asarray(v, np.float32), (32,)) for v in ins[1:]]
        on = self.active
        off = np.broadcast_to(np.asarray(off), (32,))
        _in_bounds(self.buffers[buf], off[on], len(vals))
        for k, v in enumerate(vals):
            np.add.at(self.buffers[buf], off[on] + k, v[on])

    def region(self, block, args):
        for a, v in zip(block.arguments, args):
            self.env[a] = v
        try:
            self.block(block)
        except _Yield as y:
            return y.values
        return []

    def _for(self, op, ins):
        lb, ub, step = (int(_uniform(x)) for x in ins[:3])
        vals = ins[3:]
        body = op.regions[0].blocks[0]
        for i in range(lb, ub, step):
            vals = self.region(body, [np.full(32, i)] + list(vals))
        return list(vals)

    def _if(self, op, ins):
        cond = np.broadcast_to(np.asarray(ins[0]), (32,)).astype(bool)
        if not (cond == cond[0]).all():  # lane-dependent: run the branch for its lanes
            assert not len(op.results), "a lane-dependent scf.if with results"
            outer = self.active
            for region, lanes in ((op.regions[0], cond), (op.regions[1], ~cond)):
                if len(region.blocks):
                    self.active = outer & lanes
                    self.region(region.blocks[0], [])
            self.active = outer
            return []
        region = op.regions[0] if cond[0] else op.regions[1]
        return self.region(region.blocks[0], []) if len(region.blocks) else []


class _Yield(Exception):
    def __init__(self, values):
        self.values = values


def _uniform(x):
    x = np.asarray(x)
    assert (x == x.flat[0]).all(), "control flow depends on the lane"
    return x.flat[0]


def s32(x):
    """An i32 as a signed int64. i32 values are held either way (arithmetic
    results unsigned, wrapped; constants and loads signed), so ops whose
    meaning depends on it read their operands through s32 / u32."""
    return ((np.asarray(x).astype(np.int64) + 2 ** 31) & 0xFFFFFFFF) - 2 ** 31


def u32(x):
    """An i32 as an unsigned int64 (0 .. 2^32 - 1)."""
    return s32(x) & 0xFFFFFFFF


# ops whose i32 operands are signed (arith's "si" ops, as PTX's .s32 ones)
_SIGNED = ("arith.floordivsi", "arith.remsi", "arith.maxsi", "arith.minsi", "arith.ceildivsi",
           "arith.divsi")

_INT = {"arith.floordivsi": np.floor_divide, "arith.remsi": np.fmod,
        "arith.addi": np.add, "arith.muli": np.multiply, "arith.subi": np.subtract,
        "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
        "arith.shli": np.left_shift, "arith.shrui": np.right_shift, "arith.remui": np.remainder,
        "arith.divui": np.floor_divide, "arith.maxsi": np.maximum, "arith.minsi": np.minimum,
        "arith.ceildivsi": lambda a, b: -(-a // b),
        "arith.divsi": lambda a, b: np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))}
_FLOAT = {"arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
          "arith.divf": np.divide, "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin}


def _is_float(t) -> bool:
    return type_str(t) in ("f32", "bf16", "f16")


def _attr_value(a, t):
    return float(ir.FloatAttr(a).value) if _is_float(t) else int(ir.IntegerAttr(a).value)


def _pure(op, ins):
    name = op.name
    rt = op.results[0].type if len(op.results) else None
    if name in ("arith.constant", "llvm.mlir.constant"):
        return np.full(32, _attr_value(op.attributes["value"], rt),
                       np.float32 if _is_float(rt) else np.int64)
    if name == "arith.bitcast":  # f32 <-> i32 (an i32 held unsigned)
        if type_str(rt) == "i32":
            return np.asarray(ins[0], np.float32).view(np.uint32).astype(np.int64)
        return (np.asarray(ins[0]).astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    if name in _INT:
        a, b = np.asarray(ins[0]), np.asarray(ins[1])
        if type_str(rt) == "i32":  # the operands as the op reads them
            a, b = (s32(a), s32(b)) if name in _SIGNED else (u32(a), u32(b))
        out = _INT[name](a, b)
        return out & 0xFFFFFFFF if type_str(rt) == "i32" else out  # i32 wraps (held unsigned)
    if name == "arith.mului_extended":  # (low, high) of the unsigned 64-bit product
        p = (np.asarray(ins[0]).astype(np.uint64) & 0xFFFFFFFF) * (np.asarray(ins[1]).astype(np.uint64) & 0xFFFFFFFF)
        return [(p & 0xFFFFFFFF).astype(np.int64), (p >> np.uint64(32)).astype(np.int64)]
    if name == "arith.trunci" or (name == "arith.index_cast" and type_str(rt) == "i32"):
        return np.asarray(ins[0]) & ((1 << ir.IntegerType(rt).width) - 1)
    if name in _FLOAT:
        with np.errstate(all="ignore"):
            return round_to(_FLOAT[name](ins[0], ins[1]).astype(np.float32), _dtype_of(rt))
    if name == "arith.negf":
        return -ins[0]
    if name in ("arith.extf", "arith.index_cast", "arith.index_castui"):
        return ins[0]
    if name == "arith.sitofp" and type_str(op.operands[0].type) == "i32":  # round to nearest
        return s32(ins[0]).astype(np.float64).astype(np.float32)
    if name in ("arith.uitofp", "arith.sitofp"):
        return np.asarray(ins[0]).astype(np.float32)
    if name == "arith.fptosi":
        return np.trunc(ins[0]).astype(np.int64)
    if name == "arith.truncf":
        return round_to(ins[0], _dtype_of(rt))
    if name == "arith.cmpi":
        pred = int(ir.IntegerAttr(op.attributes["predicate"]).value)
        a, b = ins
        if type_str(op.operands[0].type) == "i32":  # eq, ne and slt..sge signed; ult..uge unsigned
            a, b = (s32(a), s32(b)) if pred <= 5 else (u32(a), u32(b))
        elif pred >= 6:  # ult, ule, ugt, uge: two's complement, as the GPU compares
            a, b = np.asarray(a).astype(np.int64).view(np.uint64), np.asarray(b).astype(np.int64).view(np.uint64)
        return {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater,
                5: np.greater_equal, 6: np.less, 7: np.less_equal, 8: np.greater,
                9: np.greater_equal}[pred](a, b)
    if name == "arith.cmpf":
        pred = int(ir.IntegerAttr(op.attributes["predicate"]).value)
        return {1: np.equal, 2: np.greater, 3: np.greater_equal, 4: np.less, 5: np.less_equal,
                13: np.not_equal}[pred](ins[0], ins[1])
    if name == "arith.select":
        if isinstance(ins[1], tuple):  # pointers: (buffer, offset) of one buffer
            assert ins[1][0] == ins[2][0]
            return (ins[1][0], np.where(ins[0], ins[1][1], ins[2][1]))
        c = np.broadcast_to(np.asarray(ins[0]), (32,)).reshape((32,) + (1,) * (np.ndim(ins[1]) - 1))
        return np.where(c, ins[1], ins[2])
    if name == "nvvm.read.ptx.sreg.tid.x":
        return LANES.copy()
    if name == "nvvm.read.ptx.sreg.ctaid.x":
        return np.full(32, sim_block[0], np.int64)
    if name == "nvvm.read.ptx.sreg.ctaid.y":
        return np.full(32, sim_block[1], np.int64)
    if name == "nvvm.read.ptx.sreg.ctaid.z":
        return np.full(32, sim_block[2], np.int64)
    if name.startswith("nvvm.read.ptx.sreg.nctaid."):
        return np.full(32, sim_grid["xyz".index(name[-1])], np.int64)
    if name == "nvvm.shfl.sync":
        kind = str(op.attributes["kind"])
        src = LANES ^ ins[2] if "bfly" in kind else np.asarray(ins[2]) & 31
        return ins[1][src]
    if name == "nvvm.mma.sync":
        return [_mma(ins[0:4], ins[4:6], ins[6:10])]  # one struct result
    if name == "llvm.inline_asm":
        asm = ir.StringAttr(op.attributes["asm_string"]).value
        with np.errstate(all="ignore"):
            exact = _APPROX.get(asm.split()[0])
            if exact is not None:  # the PTX approximations, simulated exactly
                return exact(*[np.asarray(x, np.float64) for x in ins]).astype(np.float32)
        if asm.startswith("fma.rm.f32"):  # the f32 of x y + z rounded towards -inf
            x, y, z = (np.asarray(v, np.float64) for v in ins)
            exact = x * y + z           # exact in f64 for ex2_fma's operands
            r = exact.astype(np.float32)
            return np.where(r > exact, np.nextafter(r, np.float32(-np.inf)), r)
        if asm.startswith("fma.rn.sat.f32"):  # clamped to [0, 1], NaN to 0
            exact = np.asarray(ins[0], np.float64) * np.asarray(ins[1], np.float64) + np.asarray(ins[2], np.float64)
            return np.nan_to_num(np.clip(exact, 0, 1), nan=0.0).astype(np.float32)
        if asm.startswith("cvt.rzi.s32.f32"):  # truncate, saturate, NaN -> 0
            x = np.nan_to_num(np.asarray(ins[0], np.float64), nan=0.0)
            return np.clip(np.trunc(x), -2 ** 31, 2 ** 31 - 1).astype(np.int64)
        if asm.startswith("movmatrix"):
            return _movmatrix(ins[0])
        if "ld.global" in asm:
            return _guarded_load(asm, ins, rt)
        if asm.startswith("griddepcontrol."):  # one kernel alone: no grid before or after it
            return []
        raise NotImplementedError(asm)
    if name == "llvm.call_intrinsic":
        intrin = ir.StringAttr(op.attributes["intrin"]).value
        if intrin == "llvm.nvvm.mulhi.ui":  # the high word of the unsigned product
            a, b = (np.asarray(x).astype(np.uint64) & 0xFFFFFFFF for x in ins)
            return ((a * b) >> np.uint64(32)).astype(np.int64)
        raise NotImplementedError(intrin)
    if name == "llvm.intr.abs":  # abs.s32: -2^31 stays -2^31
        return np.abs(s32(ins[0])) & 0xFFFFFFFF
    if name == "llvm.intr.fabs":
        return np.abs(ins[0])
    if name == "llvm.intr.fma":
        x, y, z = (np.asarray(v, np.float64) for v in ins)
        return (x * y + z).astype(np.float32)
    if name == "llvm.intr.copysign":
        return np.copysign(ins[0], ins[1])
    if name in ("llvm.mlir.undef", "llvm.mlir.poison"):
        vt = ir.VectorType(rt)
        return np.zeros((32, vt.shape[0]), np.float32 if _is_float(vt.element_type) else np.int64)
    if name == "llvm.insertelement":
        out = ins[0].copy()
        out[:, int(_uniform(ins[2]))] = ins[1]
        return out
    if name == "llvm.extractelement":
        return ins[0][:, int(_uniform(ins[1]))].copy()
    if name == "llvm.bitcast":
        return ins[0]  # packed pairs stay (32, 2): nothing does integer math on them
    if name == "llvm.extractvalue":
        return ins[0][list(ir.DenseI64ArrayAttr(op.attributes["position"]))[0]]
    if name == "llvm.getelementptr":
        buf, off = ins[0]
        const = [i for i in ir.DenseI32ArrayAttr(op.attributes["rawConstantIndices"]) if i != -2147483648]
        step = 1  # a gl pointer counts its elements, a shared one bytes
        if buf == sim_shared:
            step = {"i8": 1, "f32": 4, "bf16": 2, "f16": 2}[str(ir.TypeAttr(op.attributes["elem_type"]).value)]
        return (buf, off + ((ins[1] if len(ins) > 1 else 0) + sum(const)) * step)
    if name == "llvm.mlir.addressof":  # the dynamic shared array
        return (sim_shared, np.zeros(32, np.int64))
    if name == "llvm.load":
        buf, off = _words(*ins[0], rt)
        n = ir.VectorType(rt).shape[0] if type_str(rt).startswith("vector<") else 1
        _in_bounds(sim_buffers[buf], off, n)
        if n > 1:  # n consecutive elements a lane
            out = sim_buffers[buf][np.asarray(off)[:, None] + np.arange(n)].copy()
        else:
            out = sim_buffers[buf][off].copy()
        return out.astype(np.int64) if out.dtype.kind == "i" else out  # an int32 buffer's i32
    raise NotImplementedError(name)


def _guarded_load(asm: str, ins, rt):
    """`{ preset the words to the fill; @p ld.global }` (a ragged load,
    access.py's _load_guarded): lanes whose flag is set read the buffer
    (inside it: the GPU would fault), the others the preset fill."""
    import re
    (buf, off), flag = ins[0], np.broadcast_to(np.asarray(ins[1]), (32,)).astype(bool)
    words = type_str(rt)[len("!llvm.struct<("):-2].split(", ") if type_str(rt).startswith("!llvm.struct") \
        else [type_str(rt)]
    per = [2 if t.startswith("vector<") else 1 for t in words]
    n, off = sum(per), np.broadcast_to(np.asarray(off), (32,))
    _in_bounds(sim_buffers[buf], off[flag], n)
    data = np.zeros((32, n), np.int64 if sim_buffers[buf].dtype.kind == "i" else np.float32)
    data[flag] = sim_buffers[buf][off[flag][:, None] + np.arange(n)]
    presets = [int(v, 16) for v in re.findall(r"mov\.b32 \$\d+, 0[xf]([0-9a-fA-F]{8})", asm)]
    data[~flag] = np.concatenate([_word_values(p, t) for p, t in zip(presets, words)])
    out, c = [], 0
    for k in per:
        out.append(data[:, c:c + k] if k == 2 else data[:, c])
        c += k
    return [out] if len(words) > 1 else out[0]  # a struct is one result


def _word_values(bits: int, t: str) -> np.ndarray:
    """The elements of a 32-bit word of type t (f32, vector<2xbf16>, vector<2xf16>)."""
    if t == "f32":
        return np.array([bits], np.uint32).view(np.float32)
    if t == "i32":
        return s32([bits])
    halves = np.array([bits & 0xFFFF, bits >> 16], np.uint32)
    if "bf16" in t:
        return (halves << 16).view(np.float32)
    return halves.astype(np.uint16).view(np.float16).astype(np.float32)


def _words(buf, off, t):
    """(buffer, element offsets) of an access: a shared byte offset becomes an
    f32 word's (shared memory holds f32 here; an i32 access is a group copy's
    16 bytes of f32 words, moved and never computed on)."""
    if buf != sim_shared:
        return buf, off
    assert ("f32" in type_str(t) or "i32" in type_str(t)) and (np.asarray(off) % 4 == 0).all(), \
        f"shared access of {t} at {off}"
    return buf, np.asarray(off) // 4


def _in_bounds(buf, off, n: int) -> None:
    """Every lane's access lies inside its buffer (the GPU would fault)."""
    off = np.asarray(off)
    assert (off >= 0).all() and (off + n <= len(buf)).all(), \
        f"out-of-bounds access: offsets {np.unique(off)} (+{n}) of a buffer of {len(buf)}"


_APPROX = {
    "ex2.approx.ftz.f32": np.exp2, "lg2.approx.ftz.f32": np.log2,
    "sqrt.approx.ftz.f32": np.sqrt, "rsqrt.approx.ftz.f32": lambda x: 1 / np.sqrt(x),
    "rcp.approx.ftz.f32": lambda x: 1 / x, "tanh.approx.f32": np.tanh,
    "div.full.f32": lambda a, b: a / b,
}

sim_buffers: list = []  # the buffers of the running simulation (llvm.load reads them)
SHARED_BYTES = 1 << 18  # shared memory: one warp's view of a block's (a byte-addressed pointer)
sim_shared = -1  # its index in sim_buffers
sim_block = (0, 0, 0)  # blockIdx (x, y, z) of the running simulation
sim_grid = (1, 1, 1)  # gridDim


def simulate(module, buffers: list[np.ndarray], scalars=(), block=0, dims=None, grid=(1, 1, 1),
             starts=None) -> None:
    """Run the module's (only) kernel on warp 0 of block `block` (an int: x,
    or (x, y), (x, y, z)): gl args take `buffers` in order, each followed by its runtime
    dims (`dims`: a list per buffer, default none), then the scalars (f32 or i32).
    `starts`: per buffer, (its first element's offset, *a strided gl's b, d, r
    strides) (default (0,))."""
    global sim_buffers, sim_block, sim_grid, sim_shared
    block = tuple(block) if isinstance(block, tuple) else (block,)
    sim_shared = len(buffers)  # the block's shared memory: f32 words, NaN until written
    buffers = sim_buffers = list(buffers) + [np.full(SHARED_BYTES // 4, np.nan, np.float32)]
    sim_block = block + (0,) * (3 - len(block))
    sim_grid = tuple(grid) + (1,) * (3 - len(grid))
    gm = [o for o in module.body.operations if o.operation.name == "gpu.module"][0]
    fn = [o for o in gm.regions[0].blocks[0].operations if o.operation.name == "llvm.func"][0]
    args = []
    for i in range(sim_shared):
        start, *strides = starts[i] if starts else (0,)   # a strided gl's offset, then its strides
        args += [(i, start)] + [np.full(32, n, np.int64) for n in (dims[i] if dims else ())]
        args += [np.full(32, n, np.int64) for n in strides]
    types = [str(a.type) for a in fn.operation.regions[0].blocks[0].arguments][len(args):]
    args += [np.full(32, s, np.int64 if t == "i32" else np.float32) for s, t in zip(scalars, types)]
    Warp(buffers).run(fn.operation, args)


# ---------------------------------------------------------------- lane-major test I/O

def _lane_major_load(lw, op, args):
    from mlir.dialects import llvm as L
    from tkc.hopper.registers import scalar_type
    from tkc.lowering.core import Frag
    v = view(op.results[0].type)
    return [Frag(v, [L.load(scalar_type(v.dtype), _addr(lw, args[0].ptr, i, v.dtype))
                     for i in range(_frag_len(v))])]


def _lane_major_store(lw, op, args):
    from mlir.dialects import llvm as L
    x = args[1]
    for i, e in enumerate(x.vals):
        L.store(e, _addr(lw, args[0].ptr, i, x.view.dtype))
    return []


def _addr(lw, ptr, i, dtype):
    from mlir.dialects import arith
    from tkc.hopper.registers import scalar_type
    i32 = ir.IntegerType.get_signless(32)
    idx = arith.addi(lw.lane_i32(), arith.constant(i32, 32 * i))
    return llvm.getelementptr(ptr.type, ptr, [idx], [-2147483648], scalar_type(dtype), no_wrap_flags=0)


@pytest.fixture
def lane_major_io(monkeypatch):
    from tkc.lowering import core
    import tkc.lowering.walker  # noqa: F401  (importing it registers every rule)
    monkeypatch.setitem(core.RULES, "tk.load", _lane_major_load)
    monkeypatch.setitem(core.RULES, "tk.store", _lane_major_store)


def encode(v, x: np.ndarray) -> np.ndarray:
    """The lane-major buffer of a matrix/vector x held as view v."""
    n = _frag_len(v)
    buf = np.zeros(32 * n, np.float32)
    for i in range(n):
        for lane in range(32):
            buf[i * 32 + lane] = x[_coord(v, i, lane)]
    return buf


def decode(v, buf: np.ndarray) -> np.ndarray:
    """The matrix/vector a lane-major buffer holds; replicated copies must agree."""
    out = np.full(v.shape, np.nan, np.float32)
    n = len(buf) // 32
    for i in range(n):
        for lane in range(32):
            c = _coord(v, i, lane)
            if not np.isnan(out[c]) and not (out[c] == buf[i * 32 + lane]):
                raise AssertionError(f"lanes disagree on element {c}: {out[c]} vs {buf[i * 32 + lane]}")
            out[c] = buf[i * 32 + lane]
    return out


def _coord(v, i, lane):
    if isinstance(v, RT):
        return fragments.tile_coord(v.rows, v.cols, v.layout, i, lane)
    return (fragments.vec_coord(v.length, v.kind, i, lane),)


def _frag_len(v):
    return fragments.tile_elems(v.rows, v.cols) if isinstance(v, RT) else fragments.vec_elems(v.length, v.kind)


def _gl(v):
    return GL(v.dtype, 1, 1, 1, 32 * _frag_len(v))


def build(ins: list, outs: list, body, scalars: tuple = (), warps: int = 1):
    """A module with one kernel: loads `ins` (views), body(*tiles, *scalars) -> tiles, stores `outs`."""
    ctx = context()
    with ctx, ir.Location.file("k.py", 7, 1):
        module = ir.Module.create()
        gls = [_gl(v).mlir() for v in ins + outs]
        stypes = [ir.F32Type.get() for _ in scalars]
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("k", (gls + stypes, []))
        f.attributes["tk.kernel"] = ir.UnitAttr.get()
        f.attributes["tk.warps"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), warps)
        entry = f.add_entry_block()
        with ir.InsertionPoint(entry):
            from mlir.dialects import arith
            c0 = arith.constant(ir.IndexType.get(), 0)
            tiles = [ops.load(v, entry.arguments[n], [c0] * 4) for n, v in enumerate(ins)]
            results = body(*tiles, *entry.arguments[len(gls):])
            for n, r in enumerate(results):
                ops.store(entry.arguments[len(ins) + n], r, [c0] * 4)
            func.ReturnOp([])
    return module


def run_kernel(ins, outs, body, values, scalars=()):
    """Lower and simulate; returns the decoded outputs."""
    module = build(ins, outs, body, scalars)
    with module.context:
        lower_module(module)
        assert module.operation.verify()
    bufs = [encode(v, x) for v, x in zip(ins, values)]
    bufs += [np.full(32 * _frag_len(v), np.nan, np.float32) for v in outs]
    simulate(module, bufs, scalars)
    return [decode(v, b) for v, b in zip(outs, bufs[len(ins):])]


def run_traced(kernel, arrays: list[np.ndarray], blocks=1, scalars=()) -> None:
    """Compile a frontend kernel through the tile pipeline and the lowering,
    then simulate warp 0 of blocks 0..blocks-1 (an int: along x, or (x, y), (x, y, z))
    over `arrays` (float32 holding values of each gl's dtype, or int32 for an
    i32 gl; a runtime dim is the array's, as 4-D), in place."""
    from tkc.compiler import compile_to
    module = kernel.trace()
    fn = [o for o in module.body.operations if o.operation.name == "func.func"][0]
    gls = [view(a.type) for a in fn.regions[0].blocks[0].arguments if isinstance(view(a.type), GL)]
    dims = [[n for d, n in zip(g.dims, (1,) * (4 - a.ndim) + a.shape) if d == -1]
            for g, a in zip(gls, arrays)]
    strided = set(ir.DenseI64ArrayAttr(fn.attributes["tk.strided"])) if "tk.strided" in fn.attributes else set()
    with module.context:
        compile_to(module, "nvvm")   # (fn is gone after it)
    bufs, starts = [], []
    for i, a in enumerate(arrays):   # a strided gl's array: a view of its base's elements
        if i in strided:
            base = a.base if a.base is not None else a   # numpy's owner of the memory
            base = base.view(a.dtype)                      # (which may hold it as another type)
            assert base.flags.c_contiguous
            starts.append(((a.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // a.itemsize,
                           *[st // a.itemsize for st in ((0,) * (4 - a.ndim) + a.strides)[:3]]))
            bufs.append(base.reshape(-1))
        else:
            starts.append((0,))
            bufs.append(a.reshape(-1))
    grid = (tuple(blocks) if isinstance(blocks, tuple) else (blocks,))
    grid += (1,) * (3 - len(grid))
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                simulate(module, bufs, scalars, block=(x, y, z), dims=dims, grid=grid, starts=starts)


def to_ptx(module) -> str:
    from tkc.compiler import compile_to
    return compile_to(module, "ptx", tile_pipeline="")


def ptxas_resources(ptx: str) -> str:
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not on PATH")
    from tkc.compiler import ptxas
    return ptxas(ptx)[1]
