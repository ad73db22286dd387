"""Warpgroup mma (wgmma) and register reallocation (setmaxnreg).

Registers. A warp's c/d is rt<f32, 16, N, row>; wgmma m64nNk16's accumulator
gives warp w%4 rows 16*(w%4).. and lane (g, t) = (lane/4, lane%4), for each
n8 block j, d[4j..4j+3] = (g, 8j+2t), (g, 8j+2t+1), (g+8, 8j+2t),
(g+8, 8j+2t+1) (PTX ISA, "Matrix Fragments for wgmma.mma_async.m64nNk16";
CuTe's CLayout_64xN). A 16x16 base tile of fragments.py's row layout is two
n8 blocks, e0..e3 then e4..e7, and the base tiles of a 16-row tile are listed
left to right: the flat fragment *is* d0 .. d(N/2-1). Likewise a row-layout
rt<16, K> gives, per k16 step, a0..a7 = e0..e7 of base tile kb: the four b32
registers of an A operand in registers (the packing of mma.sync's A).

Shared operands. A 64-bit matrix descriptor (PTX ISA, "Matrix Descriptor
Format"): start address >> 4 (bits 0-13), leading-dimension byte offset >> 4
(16-29), stride-dimension byte offset >> 4 (32-45), base offset (49-51, 0:
every st is 1024-aligned), swizzle mode (62-63: 1 = 128B, 2 = 64B, 3 = 32B).
The canonical layouts (in 16-byte units T = 16/E elements, S the swizzle
bytes) and how an st<R, C> with S-byte column panels (docs/tile-ir.md) fits:

- K-major, ((8, m), (T, 2k)) : ((S/16 T, SBO), (1, T)): rows S bytes apart,
  8-row groups SBO apart, K contiguous inside a row. A panel of the st is
  exactly that with SBO = 8*S; LBO is unused (1). A k16 step reads 32 bytes
  of each row: it starts at panel (16 kk / P) * R*S + (16 kk % P) * E, P = S/E.
  The hardware XORs the absolute address bits (as the st layout does), so a
  start inside a swizzle row reads the right chunks.
- MN-major, ((T, S/16, m), (8, k)) : ((1, T, LBO), (S/16 T, SBO)): S bytes of
  MN contiguous, the next S bytes of MN LBO away, K rows S bytes apart and
  8-row groups SBO apart. In an st<K, MN> that is LBO = R*S (the next column
  panel) and SBO = 8*S; a k16 step starts 16 rows further: 16*kk*S.

A view lives in its parent's panels (core.Shared.pitch): a row subtile of a
multi-panel st has its panels pitch*S bytes apart, not R*S, so the K-major
steps cross panels by pitch*S and the MN-major LBO is pitch*S. A ring slot
or run-time subtile has a dynamic address part, added to the descriptor's
start address (the rest of the descriptor stays constant).

The descriptor is built from its two 32-bit halves (`_stepped`): the low
word, the run-time address field plus the constant's low word (the 14-bit
address field cannot carry into LBO, nor past bit 31), and the high word, a
constant (SBO, base offset, swizzle). A 64-bit `add.s64` of the whole
constant to a 64-bit field is what the PTX ISA allows, but ptxas 12.9 and
13.0 miscompile it when the field has a run-time part (`mul.wide.u32` of a
ring slot or subtile index) and two or more wgmmas use it: they add only the
low word and leave the high one unset (the SASS reads a stale uniform
register), so the wgmma reads with a wrong SBO and swizzle, or faults
(persistent kernels' once-per-item tiles, slot = item parity: tkc fuzz
seed 2 programs 764, 1881). ptxas 13.5 compiles it right; the halves are
right with each, and are what CUTLASS and DeepGEMM advance (the low word).

Ordering. The op fences its input registers (an empty volatile asm with "+"
constraints, as CUTLASS's warpgroup_fence_operand) so nothing writes them
after `wgmma.fence`; then one `wgmma.mma_async` per k16 step chained through
its accumulators, and `wgmma.commit_group`. `tk.warpgroup_mma_wait` is
`wgmma.wait_group N` followed by the same fence on every tile it returns, so
no use of an accumulator can move above the wait.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, llvm, nvvm, scf

from ..diagnostics import error
from ..dialect.kernel import blocks_per_sm
from ..dialect.types import ST
from ..dtypes import is_fp8, itemsize
from ..hopper import warpgroup as rules
from ..hopper import fragments, shared as smem
from ..hopper.fp8_lanes import register_bytes
from . import shared
from .compute import result_view
from .core import Frag, Shared, rule
from .fp8 import pack_bytes
from .mma import pack

B = fragments.BASE
_PTX_TYPES = {"f8e4m3": "e4m3", "f8e5m2": "e5m2"}   # wgmma's names of the 8-bit types
SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}   # descriptor bits 62-63
ADDRESS_MASK = 0x3FFFF                   # matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4
UNUSED_LBO = 16                          # "not used, assumed to be 1" (encoded 1)


# ---------------------------------------------------------------- descriptors (pure Python)

@dataclass(frozen=True)
class OperandLayout:
    """How wgmma reads a shared operand: descriptor strides and, per k16 step,
    the byte offset of the step's start from the st's first byte."""
    k_major: bool
    swizzle: int     # S bytes
    lbo: int         # bytes
    sbo: int         # bytes
    steps: tuple     # byte offset of k step kk from the tile start

    def descriptor(self, address: int, kk: int) -> int:
        """The 64-bit descriptor of k step kk of the st at shared `address`."""
        return encode(address + self.steps[kk], self.lbo, self.sbo, self.swizzle)


def operand_layout(st: ST, k_major: bool, pitch: int | None = None) -> OperandLayout:
    """K-major: st<MN, K> (K contiguous); MN-major: st<K, MN>. `pitch`: the
    rows of the panel layout the st lives in (default its own rows)."""
    pitch = st.rows if pitch is None else pitch
    e, s = itemsize(st.dtype), smem.swizzle_bytes(st)
    if s not in SWIZZLE_MODE:
        raise ValueError(f"{st.text()}: wgmma operands must be swizzled")
    if (st.cols * e) % s:
        raise ValueError(f"{st.text()}: a {s}-byte swizzle needs rows of a multiple of {s} bytes")
    p = s // e  # elements per panel row
    kb = rules.k_step(st.dtype)  # k per wgmma: 32 bytes of a row (16 bf16, 32 fp8)
    if k_major:
        steps = tuple((k // p) * pitch * s + (k % p) * e for k in range(0, st.cols, kb))
        return OperandLayout(True, s, UNUSED_LBO, 8 * s, steps)
    steps = tuple(k * s for k in range(0, st.rows, kb))
    return OperandLayout(False, s, pitch * s, 8 * s, steps)


def encode(address: int, lbo: int, sbo: int, swizzle: int) -> int:
    """PTX's matrix descriptor (base offset 0: tiles are aligned to their pattern)."""
    return (((address & ADDRESS_MASK) >> 4)
            | ((lbo & ADDRESS_MASK) >> 4) << 16
            | ((sbo & ADDRESS_MASK) >> 4) << 32
            | SWIZZLE_MODE[swizzle] << 62)


def decode(desc: int) -> dict:
    """The fields of a descriptor, in bytes (the inverse of `encode`)."""
    mode = desc >> 62
    return {"address": (desc & 0x3FFF) << 4, "lbo": ((desc >> 16) & 0x3FFF) << 4,
            "sbo": ((desc >> 32) & 0x3FFF) << 4, "base_offset": (desc >> 49) & 7,
            "swizzle": {v: k for k, v in SWIZZLE_MODE.items()}.get(mode, 0)}


def mma_instruction(n: int, dtype: str, a_registers: bool, trans_a: bool, trans_b: bool,
                    negate: bool = False, b_dtype: str | None = None, a_at: int | None = None,
                    b_at: int | None = None) -> str:
    """The PTX of one m64nNk16 wgmma (m64nNk32 for 8-bit a and b, which may
    differ: b_dtype), operands numbered as the inline asm has them:
    $0..$(N/2-1) the accumulators (tied inputs follow), then A (4 b32
    registers or a descriptor), then B's descriptor (a_at, b_at: A's first
    and B's operand numbers where an asm holds several). negate: d = -(a b)
    + d. 8-bit operands have no transpose immediates (both K-major; an 8-bit
    A in registers is k_order="lanes"'s, hopper/fp8_lanes.py)."""
    nd = n // 2
    a_at = 2 * nd if a_at is None else a_at
    b_at = a_at + (4 if a_registers else 1) if b_at is None else b_at
    acc = ", ".join(f"${i}" for i in range(nd))
    a = "{" + ", ".join(f"${a_at + i}" for i in range(4)) + "}" if a_registers else f"${a_at}"
    b = f"${b_at}"
    # scale-d = 1 (accumulate: d = a*b + c), imm-scale-a = -1 negates the
    # product, imm-scale-b = 1; tnspA only for a descriptor A.
    scales = "-1, 1" if negate else "1, 1"
    imm = f"1, {scales}, {int(trans_b)}" if a_registers else f"1, {scales}, {int(trans_a)}, {int(trans_b)}"
    b_dtype = b_dtype or dtype
    if is_fp8(dtype):
        if trans_a or trans_b:
            raise ValueError("8-bit wgmma operands are K-major")
        imm = f"1, {scales}"
    types = f"{_PTX_TYPES.get(dtype, dtype)}.{_PTX_TYPES.get(b_dtype, b_dtype)}"
    return (f"wgmma.mma_async.sync.aligned.m64n{n}k{rules.k_step(dtype)}.f32.{types} "
            f"{{{acc}}}, {a}, {b}, {imm};")


# ---------------------------------------------------------------- lowering rules

def _asm(results: list, operands: list, text: str, constraints: str):
    """A volatile inline asm; returns its results as a list."""
    if not results:
        llvm.inline_asm(None, operands, text, constraints, has_side_effects=True)
        return []
    if len(results) == 1:
        return [llvm.inline_asm(results[0], operands, text, constraints, has_side_effects=True)]
    res = llvm.inline_asm(llvm.StructType.get_literal(results), operands, text, constraints,
                          has_side_effects=True)
    return [llvm.extractvalue(t, res, [i]) for i, t in enumerate(results)]


def fence_registers(vals: list, kind: str) -> list:
    """vals passed through a volatile asm: every later use depends on it and
    it keeps its place among the wgmma instructions.

    Distinct values go through an empty asm with tied operands ("+f"/"+r":
    no instruction). A value repeated in the list (an initialiser: zero()
    is one constant for every register) is copied by `mov`s inside the asm
    instead: with tied operands LLVM would copy it outside, making the
    constant's register one of the accumulators, and ptxas then injects a
    wgmma wait (C7517) when another group is in flight."""
    if not vals:
        return []
    n = len(vals)
    unique = list(dict.fromkeys(vals))
    if len(unique) == n:
        cons = ",".join([f"={kind}"] * n + [str(i) for i in range(n)])
        return _asm([v.type for v in vals], list(vals), "", cons)
    text = "\n".join(f"mov.b32 ${i}, ${n + unique.index(v)};" for i, v in enumerate(vals))
    cons = ",".join([f"={kind}"] * n + [kind] * len(unique))
    return _asm([v.type for v in vals], unique, text, cons)


def _a_registers(a, kk: int) -> list:
    """The 4 b32 registers of A for k step kk from a row-layout rt<16, K>:
    16-bit pairs, or for an 8-bit A (k_order="lanes") each lane's own
    bytes as they are (fp8_lanes.register_bytes: its columns then enter in
    fp8_lane_order())."""
    rows, cols = a.view.rows, a.view.cols
    if is_fp8(a.view.dtype):
        return [pack_bytes([a.vals[fragments.tile_index(rows, cols, 0, j, e)] for j, e in reg])
                for reg in register_bytes(kk)]
    base = fragments.tile_index(rows, cols, 0, kk, 0)
    return [pack(a.vals[base + p], a.vals[base + p + 1]) for p in (0, 2, 4, 6)]


def _shared_u32(lw):
    """The dynamic shared array's shared-window address as an i32 (once per
    kernel; shared addresses are below 256 KiB)."""
    base = lw.once(("shared_base",), lambda: shared.base(lw))
    return lw.once(("shared_u32",), lambda: llvm.ptrtoint(ir.IntegerType.get_signless(32), base))


def _descriptor(lw, sh):
    """The i32 address field of `sh`'s dynamic start: the array's (its
    address is only known at run time), plus a ring slot's or run-time
    subtile's byte offset. The rest of the descriptor (static offset, k
    step, strides, swizzle) is a constant put in by the asm (`_stepped`). So
    every operand at a static place shares one value, built once per
    kernel: a descriptor per operand would be hoisted out of the loop by
    LLVM and held in registers (uniform ones first, then spilled through
    ordinary ones: Hedgehog's 15 operands did)."""
    i32 = ir.IntegerType.get_signless(32)

    def base():
        return arith.shrui(arith.andi(_shared_u32(lw), arith.constant(i32, ADDRESS_MASK)),
                           arith.constant(i32, 4))
    field = lw.once(("descriptor",), base)
    if sh.dynamic is None:
        return field
    dynamic = arith.index_cast(i32, sh.dynamic)  # a multiple of 16 bytes
    return arith.addi(field, arith.shrui(dynamic, arith.constant(i32, 4)))


def _stepped(text: str, first: int, constants: list) -> str:
    """The wgmma with each descriptor operand (an i32 address field,
    _descriptor) completed by its constant (encode() of its static offset
    plus k step, strides and swizzle) inside the asm: the low word is the
    field plus the constant's low word (the address field cannot carry,
    shared addresses stay below 256 KiB), the high word the constant's,
    joined by `mov.b64` (not one 64-bit add: ptxas 12.9/13.0 drop its high
    word, module docstring). LLVM cannot hoist the sum out of a loop, and
    ptxas adds it next to the wgmma, so a loop keeps one address field
    alive, not a descriptor per operand and k step. `first`: the number of
    the operand the first constant completes (the next ones follow)."""
    lines = []
    for i, constant in enumerate(constants):
        op = f"${first + i}"
        lines.append(f"add.u32 %tkl{i}, {op}, {constant & 0xFFFFFFFF};")
        lines.append(f"mov.b64 %tkd{i}, {{%tkl{i}, {constant >> 32}}};")
        text = text.replace(f"{op},", f"%tkd{i},").replace(f"{op};", f"%tkd{i};")
    n = range(len(constants))
    decl = [".reg .b32 " + ", ".join(f"%tkl{i}" for i in n) + ";",
            ".reg .b64 " + ", ".join(f"%tkd{i}" for i in n) + ";"]
    return "{\n" + "\n".join(decl + lines) + "\n" + text + "\n}"


def _check(op, a, b, c):
    name = op.name.removeprefix("tk.")
    av = a.view if isinstance(a, (Frag, Shared)) else None
    bv = b.view if isinstance(b, Shared) else None
    cv = c.view if isinstance(c, Frag) else None
    problems = rules.mma_problems(name, av, bv, cv, k_order=rules.k_order(op)) \
        + rules.warps_problems(name, None) + rules.negate_problems(name, op)
    if problems:
        raise error(op, "; ".join(problems))
    return rules.VARIANTS[name]


def _lower_mma(lw, op, args):
    a, b, c = args[:3]
    when = args[3] if len(args) > 3 else None   # the i1 guard
    var = _check(op, a, b, c)
    n, k = rules.axes(b.view, var.b_k_major)
    dtype = b.view.dtype
    in_regs = isinstance(a, Frag)
    try:
        b_layout = operand_layout(b.view, var.b_k_major, b.pitch)
        a_layout = None if in_regs else operand_layout(a.view, var.a_k_major, a.pitch)
    except ValueError as e:
        raise error(op, f"{op.name}: {e}") from None
    if when is None:
        acc = _issue(lw, op, var, a, b, list(c.vals), in_regs, n, k, dtype, a_layout, b_layout)
        nvvm.wgmma_commit_group_sync_aligned()
        return [Frag(result_view(op), acc)]
    # guarded: the wgmmas under a branch, a group committed in both arms
    # (empty where `when` is false), so that the waits' counts do not depend
    # on it. For ptxas to keep the wgmmas asynchronous (no C7514), each
    # commit is inside its arm, before the accumulators' join, and the
    # empty one follows a wgmma.fence as a real group does (a commit after
    # the join, or an empty arm's bare commit, serialise them). The
    # accumulators go through a register fence before the branch: both arms
    # then join distinct registers (a constant copied into the join's
    # registers on the empty arm serialises the wgmmas: C7515).
    acc = fence_registers(list(c.vals), "f")
    branch = scf.IfOp(when, [ir.F32Type.get()] * len(acc), has_else=True)
    with ir.InsertionPoint(branch.then_block):
        out = _issue(lw, op, var, a, b, acc, in_regs, n, k, dtype, a_layout, b_layout)
        nvvm.wgmma_commit_group_sync_aligned()
        scf.YieldOp(out)
    with ir.InsertionPoint(branch.else_block):
        nvvm.wgmma_fence_aligned()
        nvvm.wgmma_commit_group_sync_aligned()
        scf.YieldOp(acc)
    return [Frag(result_view(op), list(branch.results))]


def _issue(lw, op, var, a, b, acc, in_regs, n, k, dtype, a_layout, b_layout) -> list:
    """wgmma.fence and the op's wgmmas, one a k16 step, in one inline asm;
    returns the accumulators after them.

    Its operands (the accumulators, A's registers or address field, B's)
    are computed before the asm, so the wgmma.fence inside it follows every
    write to them: no register fence is needed to keep them above it. The
    accumulators are the asm's operands once, not once a k step: an asm a
    step chained them through LLVM values, 4x the tied operands and their
    copies, on which LLVM's NVPTX codegen (register coalescer, instruction
    selection) spent most of its time; ptxas sees the same wgmmas. Distinct
    accumulators are tied operands ("+f", no instruction); a value repeated
    among them (an initialiser: zero() is one constant for every register)
    is copied by `mov`s inside the asm, before the fence (with tied operands
    LLVM would copy it outside, making the constant's register one of the
    accumulators, and ptxas then injects a wgmma wait, C7517, when another
    group is in flight). Accumulators computed afresh in this block (an
    initialiser's arithmetic: attention backward's dP^T starts at -delta,
    a column's value in two rows) go through a register fence right after
    their last definition (`_fenced`): LLVM may merge such values, and its
    copies, like any write to a wgmma's accumulators while another group
    runs, would make ptxas wait for that group (C7517)."""
    kb = rules.k_step(dtype)
    steps = k // kb
    f32 = ir.F32Type.get()
    nd = n // 2
    acc = _fenced(acc)
    unique = list(dict.fromkeys(acc))
    tied = len(unique) == nd
    ins = acc if tied else unique
    first = nd + len(ins)            # A's registers (each step's 4), or its address field
    b_at = first + (4 * steps if in_regs else 1)
    head = [] if tied else [f"mov.b32 ${i}, ${nd + unique.index(v)};" for i, v in enumerate(acc)]
    texts = head + ["wgmma.fence.sync.aligned;"]
    for kk in range(steps):
        a_at = first + (4 * kk if in_regs else 0)
        text = mma_instruction(n, a.view.dtype, in_regs, not var.a_k_major, not var.b_k_major,
                               rules.negated(op), b_dtype=dtype, a_at=a_at, b_at=b_at)
        if in_regs:
            texts.append(_stepped(text, b_at, [b_layout.descriptor(b.offset, kk)]))
        else:   # A's field and B's: operands `first` and `first` + 1
            texts.append(_stepped(text, first, [a_layout.descriptor(a.offset, kk),
                                                 b_layout.descriptor(b.offset, kk)]))
    a_ops = [r for kk in range(steps) for r in _a_registers(a, kk)] if in_regs else [_descriptor(lw, a)]
    acc_cons = ",".join(str(i) for i in range(nd)) if tied else ",".join(["f"] * len(ins))
    cons = ",".join(["=f"] * nd) + "," + acc_cons + "," + ",".join(["r"] * len(a_ops)) + ",r"
    return _asm([f32] * nd, ins + a_ops + [_descriptor(lw, b)], "\n".join(texts), cons)


def _fenced(acc: list) -> list:
    """acc with the values this block computes (not a loop's, a wgmma's or a
    constant) passed through one register fence placed right after the last
    of their definitions: before any wgmma issued since, so LLVM's copies of
    values it merged land there, not between two wgmma groups. acc as it is
    when there are none, or any is defined in another block."""
    block = ir.InsertionPoint.current.block
    fresh = [v for v in dict.fromkeys(acc) if not _owned(v)]
    owners = {v.owner.operation for v in fresh}
    if not fresh or any(op.block != block for op in owners):
        return acc
    last = None
    for op in block.operations:   # the last of their definitions, in the block's order
        if op.operation in owners:
            last = op.operation
    with ir.InsertionPoint.after(last):
        out = dict(zip(fresh, fence_registers(fresh, "f")))
    return [out.get(v, v) for v in acc]


def _owned(v) -> bool:
    """v needs no fence: a block argument (a loop's), an asm's result (a
    wgmma's accumulator, a fence's) or a constant (copied inside the asm)."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return True
    op = owner.opview if hasattr(owner, "opview") else owner
    if op.operation.name == "llvm.extractvalue":
        op = op.operands[0].owner
    return op.name in ("llvm.inline_asm", "llvm.mlir.constant", "arith.constant")


def _lower_wait(lw, op, args):
    pending = op.attributes["pending"].value
    problems = rules.wait_problems([getattr(t, "view", None) for t in args],
                                   [getattr(t, "view", None) for t in args], pending)
    if problems:
        raise error(op, "; ".join(problems))
    nvvm.wgmma_wait_group_sync_aligned(pending)
    return [Frag(t.view, fence_registers(list(t.vals), "f")) for t in args]


def _lower_registers(lw, op, args):
    name = op.name.removeprefix("tk.")
    count = op.attributes["count"].value
    problems = rules.register_problems(name, count, lw.warps, blocks_per_sm(lw.func_op)) \
        + rules.warps_problems(name, lw.warps)
    if problems:
        raise error(op, "; ".join(problems))
    action = nvvm.SetMaxRegisterAction.increase if name.startswith("increase") \
        else nvvm.SetMaxRegisterAction.decrease
    nvvm.setmaxregister(count, action)
    # ptxas ignores setmaxnreg (warning C7508) unless it knows the register
    # budget at entry: one block per SM as the launch bound, like TK's
    # __launch_bounds__(threads, 1).
    if "nvvm.minctasm" not in lw.llvm_func.attributes:
        lw.llvm_func.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1)
    return []


rule(*(f"tk.{n}" for n in rules.VARIANTS))(_lower_mma)
rule("tk.warpgroup_mma_wait")(_lower_wait)
rule("tk.increase_registers", "tk.decrease_registers")(_lower_registers)
