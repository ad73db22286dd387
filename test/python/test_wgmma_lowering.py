"""The lowered wgmma IR, run on the CPU: a simulator of the nvvm-stage IR for
the 4 warps of a warpgroup, with wgmma given its PTX ISA semantics.

Each warp runs the lowered llvm.func over numpy (one array of 32 lanes per
SSA value; tid = 32 * warp + lane). The dynamic shared array is a memory
image holding the kernel's st operands in tkc's layout at the offsets of
shared.plan; `llvm.mlir.addressof` of it is SHARED_BASE. A wgmma inline asm
reads its shared operands through the descriptors the IR computed, with the
ISA model of test_wgmma_descriptors (canonical layouts + swizzle), its A
registers and accumulators through the ISA's m64nNk16 fragment tables
(written here, independently of fragments.py), and computes the warp's 16
rows. So the descriptors' run-time arithmetic, the k steps, the transpose
bits, the register packing and the accumulator chain are all checked
against numpy's a @ b + c. Test-only load/store rules move register tiles
lane-major (value i of thread tid at i * 128 + tid).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from tkc.dialect.types import GL, RT, ST
from tkc.dtypes import itemsize
from tkc.interpreter.testing import kernel_module
from tkc.interpreter.values import round_bf16, round_f16
from tkc.hopper import shared as smem
from tkc.lowering import lower_module, shared

from wgmma_model import wgmma_read

mlir = pytest.importorskip("mlir")
from mlir import ir  # noqa: E402
from mlir.dialects import arith, llvm  # noqa: E402

LANES = np.arange(32)
G, T = LANES // 4, LANES % 4
SHARED_BASE = 5 * 1024
THREADS = 128


# ---------------------------------------------------------------- ISA fragment tables

def a_fragment(a16: np.ndarray) -> list:
    """m64nNk16 A in registers, one warp's 16 x 16: register r holds
    (a_2r, a_2r+1) = rows g + 8 (r % 2), cols 2t + 8 (r // 2) + (0, 1)."""
    return [np.stack([a16[G + 8 * (r % 2), 2 * T + 8 * (r // 2) + h] for h in range(2)], axis=1)
            for r in range(4)]


def a_from_registers(regs) -> np.ndarray:
    a16 = np.zeros((16, 16))
    for r, reg in enumerate(regs):
        for h in range(2):
            a16[G + 8 * (r % 2), 2 * T + 8 * (r // 2) + h] = reg[:, h]
    return a16


def d_position(i: int):
    """Accumulator register d_i of a warp: (row, col) arrays over the lanes,
    d[4j + 2 v1 + v0] = (g + 8 v1, 8j + 2t + v0)."""
    j, v = divmod(i, 4)
    return G + 8 * (v // 2), 8 * j + 2 * T + v % 2


# ---------------------------------------------------------------- the simulator

class Sim:
    """One warp of the lowered kernel (warp `w`), over `buffers` (one flat
    array per gl argument) and the shared image `smem` (one value per
    element slot of the operands' dtype)."""

    def __init__(self, w: int, buffers, smem, elem: int):
        self.w, self.buffers, self.smem, self.elem = w, buffers, smem, elem
        self.env, self.events = {}, []

    def run(self, fn):
        entry = fn.regions[0].blocks[0]
        for k, a in enumerate(entry.arguments):
            self.env[a] = (k, 0)  # a gl pointer: (argument, element offset)
        block = entry
        while block is not None:
            nxt = None
            for op in block.operations:
                op = op.operation
                if op.name == "llvm.br":
                    nxt = op.successors[0]
                    break
                if op.name == "llvm.return":
                    return
                self.step(op)
            block = nxt

    def step(self, op):
        ins = [self.env[v] for v in op.operands]
        out = self.eval(op, ins)
        if len(op.results):
            for r, v in zip(op.results, out if isinstance(out, list) else [out], strict=True):
                self.env[r] = v

    def eval(self, op, ins):  # noqa: C901  (one case per op kind)
        name = op.name
        if name in ("arith.constant", "llvm.mlir.constant"):
            return np.full(32, int(ir.IntegerAttr(op.attributes["value"]).value), np.int64) \
                if str(op.results[0].type) != "f32" else \
                np.full(32, float(ir.FloatAttr(op.attributes["value"]).value), np.float32)
        if name in _INT:
            return _INT[name](np.asarray(ins[0], np.int64), np.asarray(ins[1], np.int64))
        if name in ("arith.index_cast", "arith.index_castui", "arith.extui"):
            return ins[0]
        if name == "nvvm.read.ptx.sreg.tid.x":
            return 32 * self.w + LANES
        if name == "llvm.mlir.addressof":
            return ("smem", 0)
        if name == "llvm.ptrtoint":
            assert ins[0][0] == "smem"
            return np.full(32, SHARED_BASE, np.int64)
        if name == "llvm.getelementptr":
            k, off = ins[0]
            return (k, off + ins[1])
        if name == "llvm.load":
            k, off = ins[0]
            return self.buffers[k][off].astype(np.float32)
        if name == "llvm.store":
            k, off = ins[1]
            self.buffers[k][off] = ins[0]
            return []
        if name == "llvm.mlir.undef":
            return np.zeros((32, ir.VectorType(op.results[0].type).shape[0]), np.float32)
        if name == "llvm.insertelement":
            v = ins[0].copy()
            v[:, int(ins[2][0])] = ins[1]
            return v
        if name in ("llvm.bitcast",):
            return ins[0]
        if name == "llvm.extractvalue":
            return ins[0][list(ir.DenseI64ArrayAttr(op.attributes["position"]))[0]]
        if name.startswith("nvvm.wgmma") or name == "nvvm.setmaxregister":
            self.events.append(name)
            return []
        if name == "llvm.inline_asm":
            return self.asm(op, ins)
        raise NotImplementedError(name)

    def asm(self, op, ins):
        text = ir.StringAttr(op.attributes["asm_string"]).value
        if text.startswith("griddepcontrol."):  # one kernel alone: no grid before or after it
            return []
        n_out = len(ir.Type.parse(str(op.results[0].type)).body) if str(op.results[0].type).startswith(
            "!llvm.struct") else 1
        if "wgmma.mma_async" in text:   # `mov`s of repeated accumulators, wgmma.fence, the wgmmas
            self.events.append(f"mma x{text.count('wgmma.mma_async')}")
            assert "wgmma.fence.sync.aligned;" in text.split("wgmma.mma_async")[0]
            moves = re.findall(r"^mov\.b32 \$(\d+), \$(\d+);$", text, re.M)
            # operand $K is ins[K - n_out]; the accumulators are the first n_out
            # inputs (tied), or copied from the distinct ones by the `mov`s
            acc = [ins[int(j) - n_out] for _, j in moves] if moves else ins[:n_out]
            return [self.wgmma(text, ins, acc)]
        if text == "" or text.startswith("mov.b32"):  # a register fence
            self.events.append("fence_registers")
            out = ins if text == "" else self.copies(text, ins)
            return [out] if len(out) > 1 else out[0]
        raise NotImplementedError(text[:80])

    @staticmethod
    def copies(text, ins):
        """`mov.b32 $i, $j;` lines: output i is input j - (number of outputs)."""
        moves = [tuple(map(int, re.fullmatch(r"mov\.b32 \$(\d+), \$(\d+);", line).groups()))
                 for line in text.splitlines()]
        assert [i for i, _ in moves] == list(range(len(moves)))
        return [ins[j - len(moves)] for _, j in moves]

    def wgmma(self, text, ins, acc):
        """The asm's wgmmas, one a k step, in order, each a `{...}` block (its
        descriptors %tkdN built from 32-bit words: `add.u32 %tklN, $K, low;
        mov.b64 %tkdN, {%tklN, high};`, an address field $K and the rest of
        the descriptor)."""
        for block in re.findall(r"\{\n(.*?wgmma\.mma_async[^\n]*)\n\}", text, re.S):
            acc = self.one_wgmma(block, ins, acc)
        return acc

    def one_wgmma(self, text, ins, acc):
        steps = re.findall(r"add\.u32 %tkl(\d+), \$(\d+), (\d+);\nmov\.b64 %tkd\1, \{%tkl\1, (\d+)\};",
                           text)
        text = next(line for line in text.splitlines() if line.startswith("wgmma"))
        m = re.match(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.(\w+)\.\2 ", text)
        assert m, text
        n = int(m[1])
        nd = n // 2
        desc = {}
        for i, k, low, high in steps:   # operand $K is ins[K - N/2] (the N/2 results come first)
            word = np.asarray(ins[int(k) - nd]) + int(low)
            assert (word < 1 << 32).all(), "the low word carried"
            desc[f"%tkd{i}"] = word.astype(np.uint64) | np.uint64(int(high) << 32)
        regs = text.count("{") == 2
        imm = [int(x) for x in text.rstrip(";").split(",")[-(4 if regs else 5):]]
        assert imm[:3] == [1, 1, 1]  # scale-d (accumulate), scale-a, scale-b
        trans_a, trans_b = (0, imm[3]) if regs else (imm[3], imm[4])
        # A (its 4 registers, or a descriptor) and B, by their names in the instruction
        names = re.findall(r"\$\d+|%tkd\d+", text.split("}", 1)[1])
        value = lambda x: desc[x] if x in desc else ins[int(x[1:]) - nd]  # noqa: E731
        rows = slice(16 * (self.w % 4), 16 * (self.w % 4) + 16)
        if regs:
            a16 = a_from_registers([value(x) for x in names[:4]])
        else:
            a16 = self.read(value(names[0]), not trans_a, 64)[rows]
        b = self.read(value(names[-1]), not trans_b, n)          # N x 16 (B transposed)
        c = np.zeros((16, n))
        for i in range(nd):
            r, col = d_position(i)
            c[r, col] = acc[i]
        d = (a16 @ b.T + c).astype(np.float32)
        return [d[d_position(i)] for i in range(nd)]

    def read(self, desc, k_major, mn):
        desc = np.asarray(desc)
        assert (desc == desc[0]).all(), "a descriptor must be warp-uniform"
        return wgmma_read(self.smem, int(desc[0]) & ((1 << 64) - 1), k_major, mn, self.elem)


_INT = {"arith.addi": np.add, "arith.muli": np.multiply, "arith.andi": np.bitwise_and,
        "arith.ori": np.bitwise_or, "arith.shrui": np.right_shift, "arith.shli": np.left_shift,
        "arith.remui": np.remainder, "arith.divui": np.floor_divide, "arith.xori": np.bitwise_xor}


# ---------------------------------------------------------------- lane-major tile I/O

def _io_ptr(lw, ptr, i):
    i32 = ir.IntegerType.get_signless(32)
    idx = arith.addi(lw.tid_i32(), arith.constant(i32, THREADS * i))
    return llvm.getelementptr(ptr.type, ptr, [idx], [-2147483648], ir.F32Type.get(), no_wrap_flags=0)


def _load(lw, op, args):
    from tkc.hopper.registers import frag_len, scalar_type
    from tkc.lowering.core import Frag
    from tkc.dialect.types import view
    v = view(op.results[0].type)
    return [Frag(v, [llvm.load(scalar_type(v.dtype), _io_ptr(lw, args[0].ptr, i))
                     for i in range(frag_len(v))])]


def _store(lw, op, args):
    for i, e in enumerate(args[1].vals):
        llvm.store(e, _io_ptr(lw, args[0].ptr, i))
    return []


@pytest.fixture
def lane_major_io(monkeypatch):
    from tkc.lowering import core
    import tkc.lowering.walker  # noqa: F401  (importing it registers every rule)
    monkeypatch.setitem(core.RULES, "tk.load", _load)
    monkeypatch.setitem(core.RULES, "tk.store", _store)


def to_lane_major(tiles_per_warp, table) -> np.ndarray:
    """Flat buffer: value i of thread 32w + l at i * 128 + 32w + l."""
    n = len(table)
    buf = np.zeros(n * THREADS, np.float32)
    for w, tile in enumerate(tiles_per_warp):
        for i, (r, c) in enumerate(table):
            buf[i * THREADS + 32 * w + LANES] = tile[r, c]
    return buf


def from_lane_major(buf, table, shape) -> list:
    out = []
    for w in range(4):
        tile = np.zeros(shape, np.float32)
        for i, (r, c) in enumerate(table):
            tile[r, c] = buf[i * THREADS + 32 * w + LANES]
        out.append(tile)
    return out


def d_table(n):
    return [d_position(i) for i in range(n // 2)]


def a_table(k):
    """The row-layout rt<16, K> fragment, base tile kb then a0..a7 (ISA table)."""
    out = []
    for kb in range(k // 16):
        for e in range(8):
            r, h = divmod(e, 2)
            out.append((G + 8 * (r % 2), 16 * kb + 2 * T + 8 * (r // 2) + h))
    return out


# ---------------------------------------------------------------- kernels

VARIANT_A = {"ab": "64xK", "abt": "64xK", "atb": "Kx64", "atbt": "Kx64"}
VARIANT_B = {"ab": "KxN", "abt": "NxK", "atb": "KxN", "atbt": "NxK"}


def _shape(kind, k, n):
    return {"64xK": (64, k), "Kx64": (k, 64), "KxN": (k, n), "NxK": (n, k)}[kind]


def build(variant, dtype, k, n, a_swz, b_swz, a_regs, zero_c=False):
    """A kernel: c = per-warp rt (loaded, or tk.zero); d = warpgroup mma(a, b, c);
    wait; store d."""
    c_t = RT("f32", 16, n, "row")
    b_t = ST(dtype, *_shape(VARIANT_B[variant], k, n), b_swz)
    a_t = RT(dtype, 16, k, "row") if a_regs else ST(dtype, *_shape(VARIANT_A[variant], k, n), a_swz)
    aliases = {"g": GL("f32", 1, 1, 1, THREADS * n).text(), "c": c_t.text(), "b": b_t.text(),
               "a": a_t.text(), "ga": GL(dtype, 1, 1, 1, THREADS * k).text()}
    body = ['  %sb = "tk.alloc"() : () -> !b']
    if a_regs:
        body.append('  %x = "tk.load"(%ga, %c0, %c0, %c0, %c0) : (!ga, index, index, index, index) -> !a')
    else:
        body.append('  %x = "tk.alloc"() : () -> !a')
    body += [
        '  %z = "tk.zero"() : () -> !c' if zero_c else
        '  %z = "tk.load"(%gc, %c0, %c0, %c0, %c0) : (!g, index, index, index, index) -> !c',
        f'  %d = "tk.warpgroup_mma_{variant}"(%x, %sb, %z) : (!a, !b, !c) -> !c',
        '  %e = "tk.warpgroup_mma_wait"(%d) {pending = 0 : i64} : (!c) -> !c',
        '  "tk.store"(%go, %e, %c0, %c0, %c0, %c0) : (!g, !c, index, index, index, index) -> ()']
    args = [("ga", "!ga"), ("gc", "!g"), ("go", "!g")]
    return kernel_module(args, "\n".join(body), aliases=aliases, warps=4), a_t, b_t


def smem_image(module, tiles: list, dtype):
    """The dynamic shared array with the st values (in alloc order) placed as
    shared.plan says."""
    fn = [o.operation for o in module.body.operations if o.operation.name == "func.func"][0]
    plan = shared.plan(fn)
    e = itemsize(dtype)
    mem = np.full((SHARED_BASE + plan.total) // e, np.nan)
    assert [t for t, *_ in plan.allocs] == [t for t, _ in tiles]
    for (st_t, offset, *_), (_, data) in zip(plan.allocs, tiles):
        for r in range(st_t.rows):
            for c in range(st_t.cols):
                mem[(SHARED_BASE + offset + smem.address(st_t, r, c)) // e] = data[r, c]
    return mem


def lowered_func(module):
    gm = [o for o in module.body.operations if o.operation.name == "gpu.module"][0]
    return [o.operation for o in gm.regions[0].blocks[0].operations
            if o.operation.name == "llvm.func"][0]


CASES = [
    ("abt", "bf16", 64, 64, "128b", "128b", False),
    ("abt", "f16", 32, 128, "64b", "64b", False),
    ("abt", "bf16", 64, 32, "32b", "128b", True),
    ("ab", "bf16", 64, 64, "128b", "128b", False),
    ("ab", "f16", 32, 256, "64b", "auto", True),
    ("ab", "bf16", 32, 16, "32b", "32b", False),
    ("atb", "bf16", 32, 64, "128b", "64b", False),
    ("atb", "f16", 16, 32, "32b", "32b", False),
    ("atbt", "bf16", 64, 48, "64b", "32b", False),
    ("atbt", "bf16", 32, 128, "128b", "64b", False),
]


# The last case starts from tk.zero: one constant for every accumulator, which
# the fence copies with movs inside its asm (wgmma.fence_registers).
CASES.append(("abt", "bf16", 32, 32, "64b", "64b", True, True))


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_lowered_warpgroup_mma_matches_numpy(case, lane_major_io):
    variant, dtype, k, n, a_swz, b_swz, a_regs, *zero_c = case
    zero_c = bool(zero_c and zero_c[0])
    rnd = round_bf16 if dtype == "bf16" else round_f16
    rng = np.random.default_rng(k * 1000 + n)
    module, a_t, b_t = build(variant, dtype, k, n, a_swz, b_swz, a_regs, zero_c)
    a = rnd(rng.standard_normal(_shape(VARIANT_A[variant], k, n)).astype(np.float32))
    b = rnd(rng.standard_normal(b_t.shape).astype(np.float32))
    c = np.zeros((64, n), np.float32) if zero_c else rng.standard_normal((64, n)).astype(np.float32)
    a64 = a if variant in ("ab", "abt") else a.T
    bkn = b if variant in ("ab", "atb") else b.T
    tiles = [(b_t, b)] + ([] if a_regs else [(a_t, a)])
    smem = smem_image(module, tiles, dtype)
    ga = to_lane_major([a64[16 * w:16 * w + 16] for w in range(4)], a_table(k))
    gc = to_lane_major([c[16 * w:16 * w + 16] for w in range(4)], d_table(n))
    go = np.full_like(gc, np.nan)
    with module.context:
        lower_module(module)
        fn = lowered_func(module)
        for w in range(4):
            sim = Sim(w, [ga, gc, go], smem, itemsize(dtype))
            sim.run(fn)
    got = np.concatenate(from_lane_major(go, d_table(n), (16, n)))
    want = a64.astype(np.float64) @ bkn + c
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    steps = k // 16
    # C loaded in the block goes through a register fence after its load
    # (wgmma._fenced), a constant C does not; then one asm: wgmma.fence and every k step
    assert sim.events == ([] if zero_c else ["fence_registers"]) + [f"mma x{steps}"] + [
        "nvvm.wgmma.commit.group.sync.aligned", "nvvm.wgmma.wait.group.sync.aligned", "fence_registers"]


def test_accumulators_are_read_only_through_the_wait(lane_major_io):
    """Every use of the last wgmma's results is the fence after wait_group,
    and the store reads that fence's results: nothing can move above the wait."""
    module, _, _ = build("abt", "bf16", 32, 32, "64b", "64b", False)
    with module.context:
        lower_module(module)
        ops = [o.operation for o in lowered_func(module).regions[0].blocks[1].operations]
    asm = [o for o in ops if o.name == "llvm.inline_asm"]
    last_mma = [o for o in asm if "wgmma" in ir.StringAttr(o.attributes["asm_string"]).value][-1]
    after_wait = asm[-1]
    assert ops.index(after_wait) > [o.name for o in ops].index("nvvm.wgmma.wait.group.sync.aligned")
    for use in last_mma.results[0].uses:
        extract = use.owner
        assert extract.name == "llvm.extractvalue"
        assert {u.owner.name for u in extract.results[0].uses} == {"llvm.inline_asm"}
        assert all(u.owner == after_wait for u in extract.results[0].uses)
    for use in after_wait.results[0].uses:  # its values go to the stores only
        assert use.owner.name == "llvm.extractvalue"
