"""Lowering of the mbarrier ops: tk.init_barrier, tk.arrive, tk.expect_bytes,
tk.wait and tk.fence_async (docs/tile-ir.md, "Hopper ops").

A barrier is a `Shared` (an 8-byte slot of the dynamic shared array, from
shared.plan). Arrival counts are counted in warps, so one thread per warp
arrives: lane 0, predicated on `laneid == 0` rather than `elect.sync`, which
would need the whole warp converged at every arrive. Waiting is done by every
lane (each must see the phase complete before reading what it guards).

A slot of a barrier ring (`tk.stage` at a run-time index) has a run-time
address: every rule takes its pointer from `shared.pointer`, which keeps
static offsets folded (PTX `[__tkc_shared+N]`), so kernels without rings
lower as before. tk.init_barrier on a ring initialises all its slots.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlir import ir
from mlir.dialects import arith, llvm, nvvm, scf

from ..diagnostics import error
from ..dialect.types import Barrier
from ..dialect.attrs import required_int, ring_stages
from ..hopper import shared as smem
from . import shared
from .core import Shared, rule

# mbarrier.try_wait without a time hint lets the hardware suspend the thread
# for a system-chosen while before it returns false (cheaper than spinning);
# the braces scope the labels, so the asm can be emitted many times.
# In a cluster kernel too the wait has the default semantics (acquire at CTA
# scope), as CUTLASS's pipelines wait on barriers peers arrive on (cluster.py).
_TRY_WAIT_LOOP = ("{\n.reg .pred P1;\nLAB_WAIT:\n"
                  "mbarrier.try_wait.parity.shared::cta.b64 P1, [$0], $1;\n"
                  "@P1 bra.uni DONE;\nbra.uni LAB_WAIT;\nDONE:\n}")


# ---------------------------------------------------------------- helpers

def i32(n: int) -> ir.Value:
    return arith.constant(ir.IntegerType.get_signless(32), int(n))


def shared_ptr(lw, byte_offset: int) -> ir.Value:
    """&shared[byte_offset] (a static offset) as an !llvm.ptr<3>, built once."""
    return shared.static_pointer(lw, byte_offset)


def barrier_ptr(lw, op, bar, extra: int = 0) -> ir.Value:
    """The barrier operand's shared address (a located error if it is not one);
    `extra` bytes further (another slot of a ring)."""
    if not (isinstance(bar, Shared) and isinstance(bar.view, Barrier)):
        raise error(op, f"{op.name} takes a !tk.barrier from tk.alloc, found {op.operands[0].type}")
    return shared.pointer(lw, bar, extra)


def _is_zero(lw, key: str, value_i32) -> ir.Value:
    return lw.once(("is_zero", key), lambda: arith.cmpi(arith.CmpIPredicate.eq, value_i32(), i32(0)))


@contextmanager
def lane0(lw):
    """Build the body for lane 0 of the calling warp only."""
    branch = scf.IfOp(_is_zero(lw, "lane", lw.lane_i32))
    with ir.InsertionPoint(branch.then_block):
        yield
        scf.YieldOp([])


@contextmanager
def thread0(lw):
    """Build the body for thread 0 of the block only."""
    branch = scf.IfOp(_is_zero(lw, "tid", lw.tid_i32))
    with ir.InsertionPoint(branch.then_block):
        yield
        scf.YieldOp([])


# ---------------------------------------------------------------- rules

@rule("tk.init_barrier")
def _init_barrier(lw, op, args):
    """On a ring (`tk.alloc {stages = N}`) every slot is initialised: the
    ring is one allocation and nobody else can reach its other slots' init."""
    slots = ring_stages(op.operands[0]) or 1
    stride = smem.stride(Barrier())
    ptrs = [barrier_ptr(lw, op, args[0], s * stride) for s in range(slots)]
    count = required_int(op, "count", 1)
    with thread0(lw):
        n = i32(count)
        for ptr in ptrs:
            nvvm.mbarrier_init(ptr, n)
        # Makes the inits visible to the async proxy (TMA's complete_tx).
        nvvm.fence_mbarrier_init()
    nvvm.barrier0()  # nobody arrives or waits before the barrier exists
    return []


@rule("tk.arrive")
def _arrive(lw, op, args):
    ptr, count = barrier_ptr(lw, op, args[0]), required_int(op, "count", 1)
    with lane0(lw):
        nvvm.mbarrier_arrive(ir.IntegerType.get_signless(64), ptr,
                             count=None if count == 1 else i32(count))
    return []


@rule("tk.expect_bytes")
def _expect_bytes(lw, op, args):
    ptr, nbytes = barrier_ptr(lw, op, args[0]), required_int(op, "bytes", 1)
    with lane0(lw):
        nvvm.mbarrier_arrive_expect_tx(ir.IntegerType.get_signless(64), ptr, i32(nbytes))
    return []


@rule("tk.wait")
def _wait(lw, op, args):
    ptr, phase = barrier_ptr(lw, op, args[0]), args[1]
    if not isinstance(phase, ir.Value):
        raise error(op, f"tk.wait: the phase must be an index value, found {op.operands[1].type}")
    parity = arith.andi(arith.index_cast(ir.IntegerType.get_signless(32), phase), i32(1))
    addr = _address_u32(lw, args[0], ptr)
    llvm.inline_asm(ir.Type.parse("!llvm.void"), [addr, parity], _TRY_WAIT_LOOP,
                    "r,r,~{memory}",
                    has_side_effects=True)
    return []


def _address_u32(lw, bar: Shared, ptr) -> ir.Value:
    """The barrier's 32-bit shared address for the asm (once per static one)."""
    def build():
        return llvm.ptrtoint(ir.IntegerType.get_signless(32), ptr)
    if bar.dynamic is not None:
        return build()
    return lw.once(("shared_u32", bar.offset), build)


@rule("tk.fence_async")
def _fence_async(lw, op, args):
    nvvm.fence_proxy(ir.Attribute.parse("#nvvm.proxy_kind<async.shared>"),
                     space=ir.Attribute.parse("#nvvm.shared_space<cta>"))
    return []
