"""Thread-block clusters for kernel authors (docs/dsl.md, "Clusters"):
ThunderKittens' cluster_ctarank(), clusterIdx() and tma::cluster::sync.

    @tkc.kernel(warps=4, grid=lambda a, o: (2, 1, 1), cluster=(2, 1, 1))
    def k(a: gl(bf16, 1, 1, 128, 64), o: gl(bf16, 1, 2, 128, 64)):
        r = tkc.cluster_ctarank()                   # 0 or 1
        s, full = st(bf16, 128, 64), tkc.barrier()
        tkc.cluster_sync()                          # the peer's barrier exists
        with tkc.if_(tkc.warpid() == 0):
            tma.expect(full, s)                     # both halves land here
            tma.load_async(subtile(s, 64, 64, (r, 0)), a, (0, 0, r, 0), full, multicast=0b11)
        tkc.wait(full, 0)
        ...
        tkc.cluster_sync()                          # nobody leaves while a peer may write here

The CTAs of a cluster run at once on neighbouring SMs and reach each other's
shared memory: a multicast TMA load (tma.load_async(..., multicast=mask))
writes its box into every CTA of the mask, and tkc.arrive(bar, cta=r)
arrives on CTA r's barrier. A barrier a peer signals must be initialised on
every CTA before it does: tkc.cluster_sync() after the tkc.barrier()s.
"""
from __future__ import annotations

from ..diagnostics import TkcError
from .trace import current, emitting, fail
from .values import Index, as_index
from .workers import _Dims

MAX_CLUSTER = 8  # CTAs: the portable cluster size (tkc/dialect/kernel.py's rule)


def check_cluster(cluster, persistent, order, where: str) -> tuple:
    """kernel(cluster=...) as (cx, cy, cz): 1 to 3 ints >= 1, at most
    MAX_CLUSTER CTAs; persistent or ordered only along x (tk-grid-ordering
    deals a cluster's CTAs one work item, x * n + rank)."""
    dims = tuple(cluster) if isinstance(cluster, (tuple, list)) else (cluster,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1
                                          for d in dims):
        raise TkcError(f"cluster must be 1 to 3 ints >= 1 (cx, cy, cz), got {cluster!r}", where)
    dims += (1,) * (3 - len(dims))
    if dims[0] * dims[1] * dims[2] > MAX_CLUSTER:
        raise TkcError(f"cluster {dims}: a cluster holds at most {MAX_CLUSTER} CTAs (the portable "
                       f"size), got {dims[0] * dims[1] * dims[2]}", where)
    if (persistent or order is not None) and dims[1:] != (1, 1):
        raise TkcError(f"cluster {dims} with {'persistent=True' if persistent else 'order='}: the "
                       "work items are dealt to a cluster's CTAs along x only (cluster=(n, 1, 1))", where)
    if persistent == "zigzag" and dims != (1, 1, 1):
        raise TkcError("cluster is not supported with persistent='zigzag' yet: its rounds do not "
                       "deal a cluster's CTAs paired items", where)
    return dims


def size() -> int:
    """The traced kernel's CTAs a cluster; a located error when it has no cluster."""
    c = current().cluster
    return c[0] * c[1] * c[2]


def need_cluster(op: str) -> int:
    """The cluster's size, or a located error: op needs a cluster kernel."""
    n = size()
    if n == 1:
        raise fail(f"{op}: the kernel has no cluster; give it one with "
                   f"@tkc.kernel(..., cluster=(2, 1, 1))")
    return n


def cluster_ctarank() -> Index:
    """This CTA's rank in its cluster, 0 .. cx*cy*cz - 1 (x fastest)."""
    need_cluster("cluster_ctarank")
    from ..dialect import ops as tk
    with emitting():
        return Index(tk.cluster_ctarank())


class _ClusterIdx(_Dims):
    def _get(self, dim: str) -> Index:
        need_cluster("cluster_idx")
        return super()._get(dim)


cluster_idx = _ClusterIdx("cluster_idx")   # which cluster of the grid: block_idx // cluster


def cluster_sync() -> None:
    """Every warp of every CTA of the cluster meets here (barrier.cluster,
    release/acquire): what each wrote to shared memory before, and the
    barriers each initialised, are visible cluster-wide after it."""
    need_cluster("cluster_sync")
    from ..dialect import ops as tk
    with emitting():
        tk.cluster_sync()


def cta_index(x, op: str, what: str, bits: bool = False) -> Index:
    """An int (checked against the cluster's size) or index value naming a
    CTA (bits: a 16-bit mask of CTAs) of the traced kernel's cluster."""
    n = need_cluster(op)
    i = as_index(x, f"{op}: {what}")
    if i.const is not None:
        ok = 1 <= i.const < (1 << n) if bits else 0 <= i.const < n
        if not ok:
            limit = f"1..{(1 << n) - 1} (bits of CTAs 0..{n - 1})" if bits else f"0..{n - 1}"
            raise fail(f"{op}: {what} must be in {limit} for a cluster of {n} CTAs, got {i.const}")
    return i
