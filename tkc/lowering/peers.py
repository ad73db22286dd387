"""Lowering of the multi-GPU ops (docs/tile-ir.md, "Several GPUs"): tk.peer,
tk.rank, tk.world_size, tk.signal, tk.wait_signal, and the parameters of a
parallel gl. No multicast: nothing here emits `multimem` or needs a
multicast object; peers are reached point to point through their pointers.

Parameters. A parallel gl argument passes, after its own pointer and runtime
dims, MAX_PEERS (8) base pointers, one per rank (unused slots repeat the
local one), then the rank and the world size (u32). Why kernel parameters,
and why a fixed 8: parameters live in the constant bank, so picking a peer
is a few selects on registers with no memory load in the kernel's prologue
(a pointer table in global memory would cost a dependent load before the
first peer access); 8 is the NVLink clique of one host (the largest machine
these kernels run on), so one cubin serves every world size from 1 to 8; the
cost, 8 x 8 bytes per parallel gl plus 8 x 128-byte tensor maps per TMA box
used on peers (tma.py), stays far under the 4 KiB parameter space.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm

from ..diagnostics import error
from ..dialect.kernel import MAX_PEERS
from .access import _gl_ptr
from .barriers import lane0
from .core import Global, rule
from .global_memory import _gl_tile_origin


def param_types() -> list:
    """The parameters a parallel gl adds after its own: peers' pointers, rank, world size."""
    i32 = ir.IntegerType.get_signless(32)
    return [ir.Type.parse("!llvm.ptr<1>")] * MAX_PEERS + [i32, i32]


def bind(lw, arg, params, k: int) -> int:
    """Record argument `arg`'s peers' pointers (params[k:k+8]) and, for the
    kernel's first parallel gl, the rank and world size; the next index."""
    lw.peer_ptrs = getattr(lw, "peer_ptrs", {})
    lw.peer_ptrs[arg] = list(params[k:k + MAX_PEERS])
    if not hasattr(lw, "rank_i32"):
        lw.rank_i32, lw.world_i32 = params[k + MAX_PEERS], params[k + MAX_PEERS + 1]
    return k + MAX_PEERS + 2


def pick(values: list, rank_i32):
    """values[rank] by a chain of selects (rank < len(values), uniform)."""
    i32 = ir.IntegerType.get_signless(32)
    out = values[0]
    for i in range(1, len(values)):
        hit = arith.cmpi(arith.CmpIPredicate.eq, rank_i32, arith.constant(i32, i))
        out = arith.select(hit, values[i], out)
    return out


def rank_i32(rank):
    return arith.index_cast(ir.IntegerType.get_signless(32), rank)


@rule("tk.peer")
def _peer(lw, op, args):
    g = args[0]
    ptrs = getattr(lw, "peer_ptrs", {}).get(op.operands[0])
    if not isinstance(g, Global) or ptrs is None:
        raise error(op, "tk.peer takes a parallel gl argument (tk.peers)")
    return [Global(g.view, pick(ptrs, rank_i32(args[1])), g.dims, rank=args[1])]


@rule("tk.rank", "tk.world_size")
def _rank(lw, op, args):
    if not hasattr(lw, "rank_i32"):
        raise error(op, f"{op.name} needs a parallel gl argument (tk.peers)")
    v = lw.rank_i32 if op.name == "tk.rank" else lw.world_i32
    return [arith.index_castui(ir.IndexType.get(), v)]


def _flag_ptr(op, args):
    g = args[0]
    if not isinstance(g, Global):
        raise error(op, f"{op.name} takes a gl, found {op.operands[0].type}")
    return _gl_ptr(g, _gl_tile_origin(g, args[1:5], 1, 1))


@rule("tk.signal")
def _signal(lw, op, args):
    """Lane 0: the proxy fence orders the warp's async-proxy (TMA) writes it
    waited for before the generic-proxy release; the release at system
    scope makes them, and everything the warp wrote or acquired, visible to
    an acquirer on any GPU."""
    with lane0(lw):
        p = _flag_ptr(op, args)
        value = rank_i32(args[5])
        llvm.inline_asm(None, [p, value],
                        "fence.proxy.async.global;\n\tred.release.sys.global.add.s32 [$0], $1;",
                        "l,r,~{memory}", has_side_effects=True)
    return []


@rule("tk.wait_signal")
def _wait_signal(lw, op, args):
    """Lane 0 spins on an acquire load at system scope until the flag is at
    least the value, then fences the async proxy (the warp's later TMA loads
    see what it acquired); the warp converges after it."""
    with lane0(lw):
        p = _flag_ptr(op, args)
        value = rank_i32(args[5])
        llvm.inline_asm(None, [p, value],
                        "{\n\t.reg .s32 f;\n\t.reg .pred ok;\n"
                        "SPIN:\n\tld.acquire.sys.global.s32 f, [$0];\n"
                        "\tsetp.ge.s32 ok, f, $1;\n\t@!ok bra SPIN;\n"
                        "\tfence.proxy.async.global;\n\t}",
                        "l,r,~{memory}", has_side_effects=True)
    i32 = ir.IntegerType.get_signless(32)
    from mlir.dialects import nvvm
    nvvm.bar_warp_sync(arith.constant(i32, -1))
    return []


