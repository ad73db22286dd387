"""The tile ops that move data: register <-> gl/st/sv loads and stores (ragged,
element-placed, split/joined pairs, single elements), atomic_add, the group
copies gl <-> shared, and subtiles (views of part of a tile).

load, store, group_load, group_store and subtile are extended to complex
tiles in ops.py, which is where authors get them.
"""
from __future__ import annotations

from ..dialect import ops as tk
from ..dialect.types import ST, SV
from ..dtypes import is_fp8, is_int
from .operands import _float_only, _is_int, _is_scalar, _name, _reg, _result, _scalar_op
from .tiles import GLHandle, Reg, Shared, sv
from .trace import current, emitting, fail
from .values import F32, Index, as_f32, as_index


# ------------------------------------------------------------ memory

def _coords(op: str, mem, coords) -> list:
    """Check the coordinate count for mem (gl: 4, st: 2, sv: 0 or 1); Index values."""
    if not isinstance(coords, (tuple, list)):
        coords = (coords,)
    if isinstance(mem, GLHandle):
        want, what = 4, "(b, d, r, c)"
    elif isinstance(mem.view, ST):
        want, what = 2, "(r, c)"
    else:
        want, what = (len(coords) if len(coords) in (0, 1) else 1), "(i) or ()"
    if len(coords) != want:
        raise fail(f"{op}: a {'gl' if want == 4 else 'st' if want == 2 else 'sv'} takes {want} "
                   f"coordinates {what}, got {len(coords)}")
    return [as_index(c, f"{op} coordinate") for c in coords]


def _check_mem(op: str, mem, reg: Reg, role: str) -> None:
    if not isinstance(mem, (GLHandle, Shared)):
        raise fail(f"{op}: {role} must be a gl argument, st or sv, got {_name(mem)}")
    if isinstance(mem, Shared) and isinstance(mem.view, ST) and not reg.is_tile:
        raise fail(f"{op}: an st is read and written with register tiles (rt), got {_name(reg)}")
    if isinstance(mem, Shared) and isinstance(mem.view, SV) and reg.is_tile:
        raise fail(f"{op}: an sv is read and written with register vectors (rv), got {_name(reg)}")
    if isinstance(mem, Shared) and isinstance(mem.view, ST):
        if mem.rows % reg.rows or mem.cols % reg.cols:
            raise fail(f"{op}: {_name(reg)} is not a subtile of {mem.view.text()}")
    if isinstance(mem, Shared) and isinstance(mem.view, SV) and mem.length % reg.length:
        raise fail(f"{op}: {_name(reg)} is not a piece of {mem.view.text()} (its length must "
                   "divide the sv's)")
    if _is_int(reg) and not (isinstance(mem, GLHandle) and mem.dtype == "i32"):
        raise fail(f"{op}: {_name(reg)} moves to and from an i32 gl (integers do not convert in "
                   f"memory; shared tiles hold floats), got {_mem_name(mem)}")
    if isinstance(mem, GLHandle) and is_int(mem.dtype) and not _is_int(reg):
        how = ("by i32 tiles or one element at a time (load(tkc.i32, ...))" if mem.dtype == "i32"
               else "one element at a time (load(tkc.i64, ...))")
        raise fail(f"{op}: the {mem.dtype} gl {mem.name} is read and written {how}, got {_name(reg)}")


def _mem_name(mem) -> str:
    if isinstance(mem, GLHandle):
        return f"gl {mem.name} ({mem.dtype})"
    return mem.view.text() if isinstance(mem, Shared) else _name(mem)


def _index_values(idx):
    return [i.ir() for i in idx]


def load(dst: Reg, src, coords=(), fill=None, at=None) -> Reg:
    """dst = the tile of src at coords (in units of dst's shape); returns dst.
    fill=value makes a load from a gl ragged: elements past the gl's last row
    or column read as value (a number), so the gl's r and c need not be
    multiples of the tile (c only of the access width: docs/tile-ir.md).
    at=(b, d, row, col) instead of coords places the tile at an element (a
    shifted load: row may be negative); it needs fill.
    load(tkc.f32, src, at=(b, d, row, col), fill=v) reads one element of a gl
    as an f32 scalar (v outside the gl), e.g. a row's saved statistic;
    load(tkc.i32, src, ...) one element of an i32 gl as an index value (a
    cumulative sequence offset), load(tkc.i64, src, ...) one of an i64 gl (an
    int64 index: the whole 64 bits, as index values are). An i32 tile loads
    from an i32 gl (fill: an int)."""
    if dst in ("f32", "i32", "i64") and not isinstance(dst, Reg):
        return _load_element(src, dst, at, fill)
    _reg(dst, "load", "destination")
    _check_mem("load", src, dst, "source")
    idx = _placed("load", src, coords, at, fill is not None, "fill=")
    if fill is not None:
        _ragged("load", src, "fill")
        _check_fill("load", fill, "i32" if _is_int(dst) else None)
    return _result("load", dst, dst.view, lambda: tk.load(
        dst.view.mlir(), src.value(), _index_values(idx), fill=fill, elements=at is not None))


def store(dst, src: Reg, coords=(), clip: bool = False, at=None, add: bool = False,
          deinterleave: bool = False, packed: bool = False) -> None:
    """Write src into the tile of dst at coords (the mirror of load). clip=True
    makes a store to a gl ragged: elements past its last row or column are
    not written. at=(b, d, row, col) places it at an element; it needs clip.
    add=True adds src into an f32 gl's values, atomically (red.global.add:
    many blocks accumulating one result, e.g. dQ), instead of writing them.
    A scalar src writes one element (at=, clip=True), from lane 0 of each
    warp that runs the store: an f32 (a number) into a float gl, an index
    value (or an int) into an i32 gl (its low 32 bits, as a C cast) or an
    i64 gl; guard with tkc.if_(tkc.warpid() == 0) to write it once a block.
    deinterleave=True (an f32 row-layout rt into an f32 st) writes each
    8-column group of src as its 4 even columns, then its 4 odd ones: by
    stmatrix, 16-byte rows that a 128B swizzle spreads over every bank, in
    half the instructions. For a tile that goes out whole to a buffer the
    kernel's caller owns (an accumulator like attention_bwd's dQ), which
    reads the columns back in that order. packed=True (with add, an f32 row-layout rt
    into an f32 gl) puts a lane's four values of each 16-column block and row
    (columns 2t, 2t + 1, 2t + 8, 2t + 9) at columns 4t .. 4t + 3 of that
    block: one 16-byte red.global.add.v4.f32 where the pairs take two (the
    L2's reductions bound such adds: attention_bwd's dQ at D = 256); clip
    then works on those groups of four. Likewise an 8-bit row-layout rt
    stored into a gl of its dtype (no add), one 4-byte store a lane and
    group: each 16 columns land in warpgroup.fp8_lane_order()'s order, the
    layout of an FP8 V^T (tkc.fp8_v_layout); the gl's rows must keep 4-byte
    alignment (columns a multiple of 4)."""
    if not isinstance(src, Reg) and (_is_scalar(src) or isinstance(src, Index)):
        _store_element(dst, src, at, clip)
        return
    _reg(src, "store", "source")
    _check_mem("store", dst, src, "destination")
    idx = _placed("store", dst, coords, at, bool(clip), "clip=True")
    if clip:
        _ragged("store", dst, "clip")
    if add and not (isinstance(dst, GLHandle) and dst.dtype == "f32"):
        raise fail(f"store(add=True) adds into an f32 gl, got {_name(dst)}")
    if deinterleave and not (isinstance(dst, Shared) and isinstance(dst.view, ST) and dst.dtype == "f32"
                             and src.is_tile and src.view.dtype == "f32"):
        raise fail(f"store(deinterleave=True) writes an f32 rt into an f32 st, got "
                   f"{_name(src)} into {_name(dst)}")
    fp8 = src.is_tile and is_fp8(src.view.dtype) and not add and isinstance(dst, GLHandle) \
        and dst.dtype == src.view.dtype
    if packed and not (fp8 or add and src.is_tile and src.view.dtype == "f32"):
        raise fail(f"store(packed=True) adds an f32 rt into an f32 gl (add=True) or stores an 8-bit rt "
                   f"into a gl of its dtype, got {_name(src)} into {_name(dst)}"
                   f"{'' if add or is_fp8(src.view.dtype) else ' without add=True'}")
    with emitting():
        tk.store(dst.value(), src.value(), _index_values(idx), clip=bool(clip), elements=at is not None,
                 add=bool(add), deinterleave=bool(deinterleave), packed=bool(packed))


def atomic_add(dst, value: int = 1, at=None, after=()) -> Index:
    """Add `value` to one element of an i32 gl, once for the whole block, and
    return the element's old value to every warp (atom.add.acq_rel.gpu by
    the block's first thread; block-collective, at the kernel's top level).
    It comes after the block's earlier writes to the gls in `after` (a gl or
    a list): register stores, and TMA stores (tma.store, tma.store_add),
    whichever warp issues them, have completed. So the block whose add makes
    the count reach n reads every block's writes: the last of n blocks
    finishes their shared result (e.g. converts an accumulator all blocks
    added to, while it is still in L2).
    Counts are not reset: the caller zeroes the gl."""
    if not isinstance(dst, GLHandle) or dst.dtype != "i32":
        raise fail(f"atomic_add adds into an i32 gl (a counter), got {_name(dst)}")
    if isinstance(value, bool) or not isinstance(value, int) or not -2**31 <= value < 2**31:
        raise fail(f"atomic_add: value must be an int (a 32-bit constant), got {value!r}")
    after = list(after) if isinstance(after, (list, tuple)) else [after]
    for g in after:
        if not isinstance(g, GLHandle):
            raise fail(f"atomic_add: after= takes gls (whose writes come first), got {_name(g)}")
    if at is None:
        raise fail("atomic_add: give the element as at=(b, d, row, col)")
    idx = _coords("atomic_add", dst, at)
    current().require_top_level("atomic_add", "the whole block takes part (one add, its old "
                                "value to every warp)")
    from . import emit  # MLIR: only while tracing
    scratch = sv("f32", 16)   # the old value passes through it (first word: its i32 bits)
    with emitting():
        return Index(emit.index_cast(tk.atomic_add(dst.value(), scratch.value(), _index_values(idx),
                                                   [g.value() for g in after], value)))


def load_split(dst: Reg, src, coords=(), fill=None, at=None) -> tuple[Reg, Reg]:
    """(even, odd): columns 2j and 2j + 1 of the gl or st tile twice dst's
    width (in units of that pair tile; at= in elements), as two tiles of dst's
    type: the interleaved pairs of complex numbers or of interleaved rotary,
    moved with the same wide accesses as a load. fill= as for load (gl only)."""
    _reg(dst, "load_split", "destination", tile=True)
    _float_only("load_split", dst)
    _split_memory("load_split", src, dst, "reads")
    idx = _placed("load_split", src, coords, at, fill is not None, "fill=")
    if fill is not None:
        _ragged("load_split", src, "fill")
        _check_fill("load_split", fill)
    with emitting():
        even, odd = tk.load_split(dst.view.mlir(), src.value(), _index_values(idx), fill=fill,
                                  elements=at is not None)
    return Reg(dst.view).bind(even), Reg(dst.view).bind(odd)


def store_join(dst, even: Reg, odd: Reg, coords=(), clip: bool = False, at=None) -> None:
    """The mirror of load_split: even and odd interleaved into the gl or st tile."""
    for x, what in ((even, "even"), (odd, "odd")):
        _reg(x, "store_join", what, tile=True)
        _float_only("store_join", x)
    if even.view != odd.view:
        raise fail(f"store_join: even and odd must have one type, got {_name(even)} and {_name(odd)}")
    _split_memory("store_join", dst, even, "writes")
    idx = _placed("store_join", dst, coords, at, bool(clip), "clip=True")
    if clip:
        _ragged("store_join", dst, "clip")
    with emitting():
        tk.store_join(dst.value(), even.value(), odd.value(), _index_values(idx), clip=bool(clip),
                      elements=at is not None)


def _split_memory(op: str, mem, reg: Reg, verb: str) -> None:
    """load_split/store_join move a gl or st tile of twice reg's width."""
    if not (isinstance(mem, GLHandle) or isinstance(mem, Shared) and isinstance(mem.view, ST)):
        raise fail(f"{op} {verb} a gl or st, got {_name(mem)}")
    if isinstance(mem, Shared) and (mem.rows % reg.rows or mem.cols % (2 * reg.cols)):
        raise fail(f"{op}: pairs of {_name(reg)} are not a subtile of {mem.view.text()} (its shape "
                   f"must be a multiple of {reg.rows}x{2 * reg.cols})")


def _load_element(src, dtype, at, fill) -> F32 | Index:
    if isinstance(src, Shared) and isinstance(src.view, SV):
        return _sv_element(src, dtype, at, fill)
    if not isinstance(src, GLHandle) or at is None or fill is None:
        raise fail(f"load(tkc.{dtype}, src, at=(b, d, row, col), fill=value) reads one element "
                   "of a gl: give a gl, at= and fill=")
    want = src.dtype if is_int(src.dtype) else "f32"
    if dtype != want:
        raise fail(f"load(tkc.{dtype}, ...): one element of the {src.dtype} gl {src.name} is "
                   f"read as tkc.{want}")
    from . import emit  # MLIR: only while tracing
    _check_fill("load", fill, dtype if is_int(dtype) else None)
    idx = _coords("load", src, at)
    if dtype == "f32":
        return _scalar_op(lambda: tk.load(emit.mlir_type("f32"), src.value(), _index_values(idx),
                                          fill=fill, elements=True))
    vals = _index_values(idx)
    with emitting():
        return Index(emit.index_cast(tk.load(emit.mlir_type(dtype), src.value(), vals,
                                             fill=int(fill), elements=True)))


def _sv_element(src, dtype, at, fill) -> F32:
    """One element of an f32 sv (at=(i,)), the same for every lane: a shared
    scalar (e.g. a K step's weight scale brought by TMA through a ring)."""
    if dtype != "f32" or src.view.dtype != "f32" or at is None or fill is not None:
        raise fail(f"load(tkc.f32, sv, at=(i,)) reads one element of an f32 sv (no fill: an sv "
                   f"has no ragged edge), got load(tkc.{dtype}, {src.view.text()}, at={at}, fill={fill})")
    from . import emit  # MLIR: only while tracing
    idx = _coords("load", src, at)
    if len(idx) != 1:
        raise fail("load(tkc.f32, sv, at=(i,)): give the element's index i")
    return _scalar_op(lambda: tk.load(emit.mlir_type("f32"), src.value(), _index_values(idx), elements=True))


def _store_element(dst, x, at, clip) -> None:
    if not isinstance(dst, GLHandle) or at is None or not clip:
        raise fail("store(dst, value, at=(b, d, row, col), clip=True) writes one element of a "
                   "gl: give a gl, at= and clip=True")
    idx = _coords("store", dst, at)
    if not is_int(dst.dtype):
        v = as_f32(x, "store's value")
        with emitting():
            tk.store(dst.value(), v.ir(), _index_values(idx), clip=True, elements=True)
        return
    if isinstance(x, bool) or not isinstance(x, (int, Index)):
        raise fail(f"store: one element of the {dst.dtype} gl {dst.name} is an index value or an "
                   f"int, got {type(x).__name__} (an f32 value converts with .to(tkc.i32))")
    bits = 32 if dst.dtype == "i32" else 64
    const = x if isinstance(x, int) else x.const
    if const is not None and not -2 ** (bits - 1) <= const < 2 ** (bits - 1):
        raise fail(f"store: {const} does not fit the {dst.dtype} gl {dst.name}")
    i = as_index(x, "store's value")
    from . import emit  # MLIR: only while tracing
    v, vals = i.ir(), _index_values(idx)
    with emitting():   # index -> i32 keeps the low 32 bits (a C cast); -> i64 is exact
        tk.store(dst.value(), emit.index_to_int(v, dst.dtype), vals, clip=True, elements=True)


def _check_fill(op: str, fill, int_dtype: str | None = None) -> None:
    """A fill is a number; of an integer result an int its type holds."""
    if isinstance(fill, bool) or not isinstance(fill, (int, float)):
        raise fail(f"{op}: fill must be a number, got {type(fill).__name__}")
    if int_dtype is not None:
        bits = 32 if int_dtype == "i32" else 64
        if fill != int(fill) or not -2 ** (bits - 1) <= int(fill) < 2 ** (bits - 1):
            raise fail(f"{op}: the fill of {int_dtype} values must be an integer that fits "
                       f"{int_dtype}, got {fill!r}")


def _placed(op: str, mem, coords, at, ragged: bool, needs: str) -> list:
    """The coordinates: tile units (coords) or elements (at=, a gl only, ragged)."""
    if at is None:
        return _coords(op, mem, coords)
    if coords != ():
        raise fail(f"{op}: give the place as coords (in tiles) or at= (in elements), not both")
    if not isinstance(mem, GLHandle):
        raise fail(f"{op}: at= (element coordinates) is for a gl, got {_name(mem)}")
    if not ragged:
        raise fail(f"{op}: at= places the tile at any element, past the gl's edges too: "
                   f"give {needs}")
    return _coords(op, mem, at)


def _ragged(op: str, mem, what: str) -> None:
    if not isinstance(mem, GLHandle):
        raise fail(f"{op}: {what} is for a gl (global memory has ragged edges; shared tiles "
                   f"do not), got {_name(mem)}")


def _group(op: str, shared, glh, coords, warps):
    if not isinstance(shared, Shared):
        raise fail(f"{op}: the shared side must be an st or sv, got {_name(shared)}")
    if not isinstance(glh, GLHandle):
        raise fail(f"{op}: the global side must be a gl argument, got {_name(glh)}")
    if shared.dtype != glh.dtype:
        raise fail(f"{op}: {shared.view.text()} and gl {glh.name} ({glh.dtype}) must have the "
                   "same dtype")
    kernel_warps = current().warps
    n = kernel_warps if warps is None else warps
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0 or kernel_warps % n:
        raise fail(f"{op}: warps={n!r} must be a positive divisor of the kernel's "
                   f"{kernel_warps} warps")
    return _coords(op, glh, coords), n


def group_load(dst: Shared, src: GLHandle, coords, warps: int | None = None) -> Shared:
    """Cooperative copy gl -> shared by groups of `warps` warps (default: all)."""
    idx, n = _group("group_load", dst, src, coords, warps)
    with emitting():
        tk.group_load(dst.value(), src.value(), _index_values(idx), n)
    return dst


def group_store(dst: GLHandle, src: Shared, coords, warps: int | None = None) -> None:
    """Cooperative copy shared -> gl by groups of `warps` warps (default: all)."""
    idx, n = _group("group_store", src, dst, coords, warps)
    with emitting():
        tk.group_store(dst.value(), src.value(), _index_values(idx), n)


# ------------------------------------------------------------ subtiles

def subtile(x, rows: int, cols: int, coords=(0, 0)):
    """The rows x cols part of st or rt `x` at coords (in units of that shape),
    ThunderKittens' subtile_inplace: a view, no data moves. An st view may sit
    at run-time coords (`subtile(a_s, 64, 64, (warpgroupid(), 0))`); an rt
    view needs int coords (registers are not indexed at run time)."""
    from ..hopper.shared import subtile_problems
    if not isinstance(x, (Reg, Shared)) or not (isinstance(x, Shared) and isinstance(x.view, ST)
                                                or isinstance(x, Reg) and x.is_tile):
        raise fail(f"subtile: x must be an st or rt, got {_name(x)}")
    if not isinstance(coords, (tuple, list)) or len(coords) != 2:
        raise fail(f"subtile: coordinates are (row, col) in units of the subtile, got {coords!r}")
    view = x.view.with_(rows=rows, cols=cols)
    problems = subtile_problems(x.view, view)
    if problems:
        raise fail(problems[0])
    if isinstance(x, Reg):
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in coords):
            raise fail(f"subtile: a register tile's coordinates must be ints, got {coords!r} "
                       "(registers cannot be indexed at run time)")
        return _result("subtile", None, view, lambda: tk.subtile(
            view.mlir(), x.value(), *_index_values([as_index(c) for c in coords])))
    idx = [as_index(c, "subtile coordinate") for c in coords]
    for c, n in zip(idx, (x.rows // rows, x.cols // cols)):
        if c.const is not None and not 0 <= c.const < n:
            raise fail(f"subtile: coordinate {c.const} is outside the {n} parts of {x.view.text()}")
    vals = _index_values(idx)
    with emitting():
        return Shared(view, tk.subtile(view.mlir(), x.value(), *vals), current().scope)
