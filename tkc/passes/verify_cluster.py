"""tk-verify rules of thread-block clusters (docs/tile-ir.md, "Clusters"):
the kernel's tk.cluster attribute, and tk.cluster_ctarank, tk.cluster_idx,
tk.cluster_sync, tk.arrive_cta, tk.tma_load_multicast and tk.tma_store_cta, which need a
kernel with a cluster of more than one CTA. tk-verify (verify.py) calls
`CHECKS[name](op, name, ins, outs, kernel)` per op and `check_kernel(fn)`
per kernel.
"""
from __future__ import annotations

import math

from ..dialect.attrs import constant
from ..dialect.kernel import check_cluster, cluster_shape
from ..dialect.types import ST, Barrier
from .verify_tma import _at_least, tma_copy_problems


def check_kernel(fn):
    """(where, message) pairs: a well-formed tk.cluster ('' = the kernel's place)."""
    if "tk.cluster" in fn.attributes:
        name = f"kernel @{fn.attributes['sym_name'].value}"
        yield from (("", f"{name}: {m}") for m in check_cluster(fn))


def _size(kernel) -> int:
    """The kernel's CTAs a cluster (1 without a well-formed tk.cluster)."""
    if kernel is None or "tk.cluster" not in kernel.attributes or any(True for _ in check_cluster(kernel)):
        return 1
    return math.prod(cluster_shape(kernel))


def _need_cluster(name, kernel):
    n = _size(kernel)
    if n == 1:
        yield (f"{name}: the kernel has no cluster of several CTAs (tk.cluster): there is no "
               "other CTA to reach")
    return n


def _check_plain(op, name, ins, outs, kernel):
    yield from _need_cluster(name, kernel)


def _check_arrive_cta(op, name, ins, outs, kernel):
    """arrive_cta(bar, cta: index) {count}; a constant cta within the cluster."""
    n = yield from _need_cluster(name, kernel)
    if not isinstance(ins[0], Barrier):
        yield f"{name}: operand must be a !tk.barrier"
    yield from _at_least(op, name, "count", 1)
    cta = constant(op.operands[1]) if len(op.operands) == 2 else None
    if n > 1 and cta is not None and not 0 <= cta < n:
        yield f"{name}: cta {cta} is outside the cluster's CTAs 0..{n - 1}"


def _check_multicast(op, name, ins, outs, kernel):
    """tma_load_multicast(st, gl, b, d, r, c, bar, mask: index); a constant
    mask names CTAs of the cluster only."""
    n = yield from _need_cluster(name, kernel)
    if len(ins) != 8:
        yield f"{name}: takes 4 coordinates (b, d, r, c), a barrier and a mask, got {len(ins)} operands"
        return
    if not isinstance(ins[6], Barrier):
        yield f"{name}: operand 6 must be the !tk.barrier the bytes arrive on"
    mask = constant(op.operands[7])
    if n > 1 and mask is not None and not 1 <= mask < (1 << n):
        yield (f"{name}: mask {mask:#x} names CTAs outside the cluster's 0..{n - 1} "
               f"(bits 1..{(1 << n) - 1})")
    yield from tma_copy_problems(name, ins[0], ins[1], op.operands[1], kernel)


def _check_store_cta(op, name, ins, outs, kernel):
    """tma_store_cta(dst: st, src: st, cta: index, bar): whole tiles of one
    type (the copy moves src's bytes as one block into dst's place); a
    constant cta within the cluster."""
    n = yield from _need_cluster(name, kernel)
    if len(ins) != 4:
        yield f"{name}: takes dst, src, a CTA and a barrier, got {len(ins)} operands"
        return
    if not (isinstance(ins[0], ST) and isinstance(ins[1], ST)):
        yield f"{name}: dst and src must be shared tiles (st)"
    elif ins[0] != ins[1]:
        yield f"{name}: dst and src must be tiles of one type, got {ins[0].text()} and {ins[1].text()}"
    if not isinstance(ins[3], Barrier):
        yield f"{name}: operand 3 must be the !tk.barrier the bytes arrive on"
    cta = constant(op.operands[2])
    if n > 1 and cta is not None and not 0 <= cta < n:
        yield f"{name}: cta {cta} is outside the cluster's CTAs 0..{n - 1}"
    for i, role in ((0, "dst"), (1, "src")):
        owner = op.operands[i].owner
        owner = getattr(owner, "operation", owner)
        if getattr(owner, "name", None) != "tk.alloc" or "stages" in owner.attributes:
            yield (f"{name}: {role} must be a whole tile (a tk.alloc without stages), not a "
                   "subtile or ring slot: the copy moves its bytes as one block")


CHECKS = {
    "cluster_ctarank": _check_plain,
    "cluster_idx": _check_plain,
    "cluster_sync": _check_plain,
    "arrive_cta": _check_arrive_cta,
    "tma_load_multicast": _check_multicast,
    "tma_store_cta": _check_store_cta,
}
