"""Lowering of the cluster ops (docs/tile-ir.md, "Clusters"): tk.cluster_ctarank,
tk.cluster_idx, tk.cluster_sync, tk.arrive_cta and tk.tma_store_cta
(tk.tma_load_multicast is tma.py's). The manifest's "cluster" (walker.py) makes the runtime launch the
grid in clusters; these read where a CTA is in its cluster and reach the
other CTAs' shared memory.

A remote arrival names the peer's barrier by mapa: the barrier's 32-bit
shared::cta address mapped into CTA `cta`'s window of the cluster's shared
space, then `mbarrier.arrive.shared::cluster` with the default semantics
(release at CTA scope), as CUTLASS's ClusterBarrier arrives on a peer: the
pipelines' remote arrivals hand back slots whose only readers are wgmmas
that have retired. ThunderKittens' .release.cluster (with waits that
acquire at cluster scope, barriers.py) made a multicast GEMM's every K step
slower: 330 against 208 µs at 4096^3 on the H200 (2026-11-29).
tk.cluster_sync is the split barrier.cluster arrive/wait pair, every thread
of every CTA (.aligned: every lane of a warp runs it together), release and
acquire at cluster scope: what a CTA wrote before it (its barriers' inits),
the peers see after it.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, nvvm

from ..diagnostics import error
from ..dialect.attrs import required_int
from ..dtypes import itemsize
from . import shared
from .barriers import _address_u32, barrier_ptr, lane0
from .core import Shared, rule

_IDS = {"x": nvvm.read_ptx_sreg_clusterid_x, "y": nvvm.read_ptx_sreg_clusterid_y,
        "z": nvvm.read_ptx_sreg_clusterid_z}

# The braces scope the register, so the asm can be emitted many times.
_ARRIVE_REMOTE = ("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, $0, $1;\n"
                  "mbarrier.arrive.shared::cluster.b64 _, [remote], $2;\n}")
_CLUSTER_SYNC = "barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;"
# dst and the barrier mapped into CTA $3's window; the copy engine moves $4
# bytes from this CTA's $1 and completes them on the peer's barrier.
_STORE_CTA = ("{\n.reg .b32 dst, bar;\nmapa.shared::cluster.u32 dst, $0, $3;\n"
              "mapa.shared::cluster.u32 bar, $2, $3;\n"
              "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes "
              "[dst], [$1], $4, [bar];\n}")


def _i32():
    return ir.IntegerType.get_signless(32)


@rule("tk.cluster_ctarank")
def _ctarank(lw, op, args):
    return [lw.once(("cluster_ctarank",), lambda: arith.index_castui(
        ir.IndexType.get(), nvvm.read_ptx_sreg_cluster_ctarank(_i32())))]


@rule("tk.cluster_idx")
def _cluster_idx(lw, op, args):
    dim = ir.StringAttr(op.attributes["dim"]).value if "dim" in op.attributes else None
    read = _IDS.get(dim)
    if read is None:
        raise error(op, f"tk.cluster_idx: dim must be \"x\", \"y\" or \"z\", found {dim!r}")
    return [lw.once(("cluster_idx", dim), lambda: arith.index_castui(ir.IndexType.get(), read(_i32())))]


@rule("tk.cluster_sync")
def _cluster_sync(lw, op, args):
    llvm.inline_asm(ir.Type.parse("!llvm.void"), [], _CLUSTER_SYNC, "~{memory}", has_side_effects=True)
    return []


@rule("tk.arrive_cta")
def _arrive_cta(lw, op, args):
    ptr, count = barrier_ptr(lw, op, args[0]), required_int(op, "count", 1)
    cta = args[1]
    if not isinstance(cta, ir.Value):
        raise error(op, f"tk.arrive_cta: the CTA must be an index value, found {op.operands[1].type}")
    addr = _address_u32(lw, args[0], ptr)
    with lane0(lw):
        llvm.inline_asm(ir.Type.parse("!llvm.void"),
                        [addr, arith.index_cast(_i32(), cta), arith.constant(_i32(), count)],
                        _ARRIVE_REMOTE, "r,r,r,~{memory}", has_side_effects=True)
    return []


@rule("tk.tma_store_cta")
def _store_cta(lw, op, args):
    dst, src, cta, bar = args
    for x, role in ((dst, "dst"), (src, "src")):
        if not isinstance(x, Shared) or x.pitch != x.view.rows:
            raise error(op, f"tk.tma_store_cta: {role} must be a whole shared tile")
    if not isinstance(cta, ir.Value):
        raise error(op, f"tk.tma_store_cta: the CTA must be an index value, found {op.operands[2].type}")
    nbytes = src.view.rows * src.view.cols * itemsize(src.view.dtype)
    u32 = lambda p: llvm.ptrtoint(_i32(), p)  # noqa: E731
    addrs = [u32(shared.pointer(lw, dst)), u32(shared.pointer(lw, src)),
             _address_u32(lw, bar, barrier_ptr(lw, op, bar))]
    with lane0(lw):
        llvm.inline_asm(ir.Type.parse("!llvm.void"),
                        [*addrs, arith.index_cast(_i32(), cta), arith.constant(_i32(), nbytes)],
                        _STORE_CTA, "r,r,r,r,r,~{memory}", has_side_effects=True)
    return []
