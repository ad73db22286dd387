"""Lowering of memory ops: tk.alloc, tk.load, tk.store, tk.load_split,
tk.store_join, tk.gl_slice, tk.group_load, tk.group_store.

The rules check their operands and dispatch on the memory side: per-warp
moves (load/store) between a gl and registers are global_memory.py's,
between an st/sv and registers shared_memory.py's; both follow the fragment
layout of tkc/hopper/fragments.py, with the lane maps of lanes.py and the
accesses of access.py.

Group copies (group_load/store) move 16-byte chunks with W*32 threads:
chunk i*32W + thread-in-group in iteration i (unrolled), coalesced on the
global side; a 16-byte chunk stays contiguous under every swizzle.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, scf

from ..diagnostics import error
from ..dialect.kernel import group_warps
from ..dtypes import itemsize
from ..dialect.types import RT, RV, ST, SV, view
from ..hopper.fragments import extent_ok
from ..hopper.lanes import byte_pairs
from .access import _add, _gl_ptr, _idx, _mul, _sh_ptr, _tid, _v
from .core import Frag, Global, Shared, rule
from .global_memory import (_gl_accesses, _gl_add_packed, _gl_load, _gl_scalar, _gl_store,
                            _gl_store_byte_pairs, _gl_tile_origin)
from .shared_memory import (_rt_to_st, _rt_to_st_deinterleaved, _rv_to_sv, _shared_offset, _st_pairs,
                            _st_to_rt, _sv_scalar, _sv_to_rv)


# ---------------------------------------------------------------- alloc

@rule("tk.alloc")
def _alloc(lw, op, args):
    if lw.shared_plan is None or op.result not in lw.shared_plan.offsets:
        raise error(op, "tk.alloc must be in the kernel's entry block")
    return [Shared(view(op.result.type), lw.shared_plan.offset(op.result))]


# ---------------------------------------------------------------- load / store

@rule("tk.load")
def _load(lw, op, args):
    src, idx = args[0], args[1:]
    if str(op.result.type) in ("f32", "i32", "i64") and isinstance(src, Global):
        _check_idx(op, idx, 4)
        return [_gl_scalar(lw, op, src, idx, None)]
    if str(op.result.type) == "f32" and isinstance(src, Shared) and isinstance(src.view, SV):
        return [_sv_scalar(lw, src, idx[0])]   # one address for every lane: a broadcast
    out = _out_view(op, op.result.type)
    if isinstance(src, Global):
        _check_idx(op, idx, 4)
        _check_rank(op, src.view, out)
        vals = _gl_load(lw, src, out, *_gl_accesses(lw, op, src, out, idx))
    elif isinstance(src, Shared) and isinstance(src.view, ST) and isinstance(out, RT):
        _check_idx(op, idx, 2)
        _check_subtile(op, src.view, out)
        vals = _st_to_rt(lw, src, out, idx)
    elif isinstance(src, Shared) and isinstance(src.view, SV) and isinstance(out, RV):
        _check_length(op, idx, src.view, out)
        vals = _sv_to_rv(lw, src, out, idx)
    else:
        raise error(op, f"tk.load cannot load a {out.text()} from {op.operands[0].type}")
    return [Frag(out, vals)]


@rule("tk.store")
def _store(lw, op, args):
    dst, x, idx = args[0], args[1], args[2:]
    if isinstance(dst, Global) and isinstance(x, ir.Value) and str(x.type) in ("f32", "i32", "i64"):
        _check_idx(op, idx, 4)
        _gl_scalar(lw, op, dst, idx, x)
        return []
    if not isinstance(x, Frag):
        raise error(op, f"tk.store stores an rt or rv, found {op.operands[1].type}")
    if isinstance(dst, Global):
        _check_idx(op, idx, 4)
        _check_rank(op, dst.view, x.view)
        if "packed" in op.attributes:
            _gl_add_packed(lw, op, dst, x, idx)
        elif "add" not in op.attributes and byte_pairs(x.view, dst.view.dtype):
            _gl_store_byte_pairs(lw, dst, x, *_gl_accesses(lw, op, dst, x.view, idx))
        else:
            _gl_store(lw, dst, [x], *_gl_accesses(lw, op, dst, x.view, idx), add="add" in op.attributes)
    elif isinstance(dst, Shared) and isinstance(dst.view, ST) and isinstance(x.view, RT):
        _check_idx(op, idx, 2)
        _check_subtile(op, dst.view, x.view)
        if "deinterleave" in op.attributes:
            _rt_to_st_deinterleaved(lw, op, dst, x, idx)
        else:
            _rt_to_st(lw, dst, x, idx)
    elif isinstance(dst, Shared) and isinstance(dst.view, SV) and isinstance(x.view, RV):
        _check_length(op, idx, dst.view, x.view)
        _rv_to_sv(lw, dst, x, idx)
    else:
        raise error(op, f"tk.store cannot store a {x.view.text()} to {op.operands[0].type}")
    return []


@rule("tk.gl_slice")
def _gl_slice(lw, op, args):
    """The same argument's elements from `start` along the axis; its size is
    clamped to what the parent has from there (never past its end, never
    negative), so ragged accesses through it stay inside the argument."""
    g, start, size = args
    if not isinstance(g, Global):
        raise error(op, "tk.gl_slice slices a gl")
    a = "bdrc".index(ir.StringAttr(op.attributes["axis"]).value)
    origin, bounds = list(g.origin), list(g.bounds)
    room = arith.maxsi(arith.subi(_v(bounds[a]), start), _idx(0))
    origin[a] = _add(origin[a], start)
    bounds[a] = arith.maxsi(arith.minsi(size, room), _idx(0))
    return [Global(view(op.result.type), g.ptr, g.dims, origin, bounds, strides=g.strides)]


# ---------------------------------------------------------------- split loads, joined stores

@rule("tk.load_split")
def _load_split(lw, op, args):
    """Two rt of columns 2j and 2j + 1 of a gl tile twice their width."""
    src, idx = args[0], args[1:]
    out = _out_view(op, op.results[0].type)
    if not (isinstance(src, (Global, Shared)) and isinstance(out, RT)):
        raise error(op, "tk.load_split splits a gl or st tile into two rt")
    if isinstance(src, Shared):
        _check_idx(op, idx, 2)
        return [Frag(out, vals) for vals in _st_pairs(lw, src, out, idx)]
    _check_idx(op, idx, 4)
    halves = _gl_load(lw, src, out, *_gl_accesses(lw, op, src, out, idx, 2), k=2)
    return [Frag(out, vals) for vals in halves]


@rule("tk.store_join")
def _store_join(lw, op, args):
    """The mirror: columns 2j and 2j + 1 of the gl tile from the two rt."""
    dst, xs, idx = args[0], args[1:3], args[3:]
    if not (isinstance(dst, (Global, Shared)) and all(isinstance(x, Frag) and isinstance(x.view, RT) for x in xs)):
        raise error(op, "tk.store_join joins two rt into a gl or st tile")
    if isinstance(dst, Shared):
        _check_idx(op, idx, 2)
        _st_pairs(lw, dst, xs[0].view, idx, store=list(xs))
        return []
    _check_idx(op, idx, 4)
    _gl_store(lw, dst, list(xs), *_gl_accesses(lw, op, dst, xs[0].view, idx, 2))
    return []


# ---------------------------------------------------------------- group copies

@rule("tk.group_load")
def _group_load(lw, op, args):
    _group_copy(lw, op, dst=args[0], src=args[1], idx=args[2:], to_shared=True)
    return []


@rule("tk.group_store")
def _group_store(lw, op, args):
    _group_copy(lw, op, dst=args[0], src=args[1], idx=args[2:], to_shared=False)
    return []


def _group_copy(lw, op, dst, src, idx, to_shared: bool) -> None:
    """Copy between the Shared `dst`/`src` and the Global one, 16 bytes a thread."""
    sh, gl = (dst, src) if to_shared else (src, dst)
    name = op.name
    if not isinstance(sh, Shared) or not isinstance(gl, Global):
        raise error(op, f"{name} copies between an st/sv and a gl")
    _check_idx(op, idx, 4)
    if sh.view.dtype != gl.view.dtype:
        raise error(op, f"{name} copies without converting: {sh.view.text()} and "
                        f"{gl.view.text()} must have the same dtype")
    warps, total = ir.IntegerAttr(op.attributes["warps"]).value, group_warps(lw.func_op) or lw.warps
    if warps < 1 or total % warps:   # the warps that run it: the consumers, beside a producer
        raise error(op, f"{name}: warps = {warps} must divide the kernel's {total} warps that run it")
    e = itemsize(sh.view.dtype)
    rows, cols = (sh.view.rows, sh.view.cols) if isinstance(sh.view, ST) else (1, sh.view.length)
    per_row = cols * e // 16  # 16-byte chunks per row (cols is a multiple of 16: >= 2)
    chunks, threads = rows * per_row, 32 * warps
    me = arith.remui(_tid(lw), _idx(threads))  # thread index within the group
    origin = _gl_tile_origin(gl, idx, rows, cols, vector=isinstance(sh.view, SV))
    for it in range((chunks + threads - 1) // threads):
        chunk = _add(me, it * threads)
        if (it + 1) * threads > chunks:  # the last round: not every thread has a chunk
            inside = arith.cmpi(arith.CmpIPredicate.ult, chunk, _idx(chunks))
            branch = scf.IfOp(inside)
            with ir.InsertionPoint(branch.then_block):
                _copy_chunk(lw, sh, gl, origin, chunk, per_row, e, to_shared)
                scf.YieldOp([])
        else:
            _copy_chunk(lw, sh, gl, origin, chunk, per_row, e, to_shared)


def _copy_chunk(lw, sh, gl, origin, chunk, per_row, e, to_shared) -> None:
    row = arith.divui(chunk, _idx(per_row))
    col = arith.muli(arith.remui(chunk, _idx(per_row)), _idx(16 // e))
    g = _gl_ptr(gl, _add(origin, _add(_mul(row, gl.pitch), col)))
    s = _sh_ptr(lw, sh, _shared_offset(sh, row, col))
    v4 = ir.VectorType.get([4], ir.IntegerType.get_signless(32))
    if to_shared:
        llvm.store(llvm.load(v4, g, alignment=16), s, alignment=16)
    else:
        llvm.store(llvm.load(v4, s, alignment=16), g, alignment=16)


# ---------------------------------------------------------------- checks (located errors)

def _out_view(op, t):
    v = view(t)
    if not isinstance(v, (RT, RV)):
        raise error(op, f"tk.load gives an rt or rv, found {t}")
    return v


def _check_idx(op, idx, n: int) -> None:
    if len(idx) != n:
        raise error(op, f"{op.name} here needs {n} index operands, found {len(idx)}")
    for i in idx:
        if not isinstance(i, ir.Value):
            raise error(op, f"{op.name}: coordinates must be index values")


def _check_rank(op, gl, x) -> None:
    if isinstance(x, RT) and not (extent_ok(x.rows, half=True) and extent_ok(x.cols)):
        raise error(op, f"{x.text()}: rows must be 8 or multiples of 16, cols multiples of 16")


def _check_subtile(op, st: ST, rt: RT) -> None:
    if st.rows % rt.rows or st.cols % rt.cols:
        raise error(op, f"{op.name}: a {rt.rows}x{rt.cols} rt does not tile the "
                        f"{st.rows}x{st.cols} st (its shape must divide the st's)")


def _check_length(op, idx, sv: SV, rv: RV) -> None:
    if len(idx) > 1:
        raise error(op, f"{op.name}: an sv takes 0 or 1 index operands, found {len(idx)}")
    _check_idx(op, idx, len(idx))
    if sv.length % rv.length:
        raise error(op, f"{op.name}: rv length {rv.length} does not divide sv length {sv.length}")
