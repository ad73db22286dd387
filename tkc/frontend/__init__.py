"""The Python DSL for kernel authors (imports MLIR only while tracing).

    import tkc
    from tkc import bf16, f32, gl, rt, rv, st
    from tkc.ops import *

    @tkc.kernel(warps=4, grid=lambda a, b, c: (c.c // 64, c.r // 64))
    def gemm(a: gl(bf16, 1, 1, None, None), ...): ...

Modules: kernel (decorator, Kernel, cache key), trace (tracing state,
locations), values (Index/F32/Bool), tiles (rt/rv/st/sv/gl handles), ops (the
tile ops, gathered from elementwise, axes and memory, which share operands;
operators gives register handles x + y, t < 0.5, x.to(dtype)), control (range,
if_/else_; carry: the scalars they carry), workers (ids, sync), grid (symbolic grid expressions), tma
(mbarriers and TMA: `tkc.barrier`, `tkc.tma.load_async`, `tkc.tma.load` in
pipelined loops), lcsf (the load-compute-store-finish template), warpgroup
(wgmma and setmaxnreg: `tkc.warpgroup.mma_AB`), complex (complex tiles: crt,
crv, cst, cgl), peers (several GPUs: tkc.pgl's rank, signal, wait_signal,
barrier_all), cluster (thread-block clusters: cluster_ctarank, cluster_sync),
build (tracing a Kernel into a module; needs MLIR).
"""
from . import ops, tma, warpgroup
from .cluster import cluster_ctarank, cluster_idx, cluster_sync
from .complex import Complex, cgl, crt, crv, cst
from .control import else_, if_, range
from .grid import cdiv, max, min
from .kernel import Kernel, kernel, kernels_in_file
from .lcsf import lcsf
from .peers import barrier_all, rank, signal, wait_signal, world_size
from .tiles import DType, bf16, f8e4m3, f8e5m2, f16, f32, gl, i32, i64, pgl, rt, rv, st, sv
from .tma import arrive, barrier, fence_async, wait
from .values import F32, Bool, Index
from .workers import block_idx, grid_dim, laneid, sync, warpgroupid, warpid

__all__ = [
    "kernel", "Kernel", "kernels_in_file",
    "bf16", "f16", "f32", "i32", "i64", "f8e4m3", "f8e5m2", "DType",
    "gl", "pgl", "rt", "rv", "st", "sv",
    "crt", "crv", "cst", "cgl", "Complex",
    "range", "if_", "else_", "lcsf",
    "block_idx", "grid_dim", "warpid", "laneid", "warpgroupid", "sync",
    "cdiv", "min", "max",
    "Index", "F32", "Bool",
    "warpgroup",
    "tma", "barrier", "wait", "arrive", "fence_async",
    "rank", "world_size", "signal", "wait_signal", "barrier_all",
    "cluster_ctarank", "cluster_idx", "cluster_sync",
]
