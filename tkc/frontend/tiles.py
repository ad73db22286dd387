"""Tile handles: rt/rv (registers), st/sv (shared), gl (global), and dtypes.

A register handle is a mutable Python name for an immutable SSA value: TK's
in-place ops (`exp(x, x)`, `mma_ABt(acc, a, b, acc)`) rebind the handle to
the op's result. `rt(...)`/`rv(...)` make an unassigned handle (no IR until an
op assigns it). Loops and ifs (control.py) rebind handles changed inside
them to the loop's or if's results.

Shared handles are allocated with `tk.alloc` when created, in the kernel's
entry block only (ThunderKittens allocates shared memory up front).
"""
from __future__ import annotations

from ..dialect.types import GL, LAYOUTS, RT, RV, ST, SV, SWIZZLES, VEC_KINDS
from ..dtypes import DTYPES, FP8_DTYPES, GL_DTYPES, REG_DTYPES, VEC_DTYPES
from ..hopper.fragments import HALF, extent_ok
from .trace import current, emitting, fail
from .values import Index, Traced


class DType(str):
    """An element type name; `tkc.f32`/`tkc.i32` also annotate scalar kernel args."""

    def __repr__(self):
        return f"tkc.{str(self)}"

    def __call__(self, x):
        """tkc.f32(x) / tkc.i32(x): x as a traced scalar of this type (an F32 or
        an Index) whose value is in the IR, not folded at trace time: what a
        tkc.range loop can carry (`m = tkc.f32(-math.inf)`, `c = tkc.i32(0)`).
        An index or f32 value converts (i32: rounded toward zero)."""
        from .values import F32
        if self not in SCALAR_DTYPES:
            raise fail(f"a scalar is tkc.f32 or tkc.i32, not {self!r}")
        kind = F32 if self == "f32" else Index
        ok = isinstance(x, (int, float, Index, F32)) and not isinstance(x, bool) \
            and (kind is F32 or not isinstance(x, float))
        if not ok:
            raise fail(f"{self!r}(x) takes {'a number' if kind is F32 else 'an int'} or an index "
                       f"or f32 value, got {type(x).__name__}")
        v = x.to(str(self)) if isinstance(x, (Index, F32)) and not isinstance(x, kind) else kind.wrap(x)
        if v._v is not None:
            return v
        from . import emit
        with emitting():
            return kind(emit.constant(kind._type_name, v.const))


bf16, f16, f32, i32, i64 = DType("bf16"), DType("f16"), DType("f32"), DType("i32"), DType("i64")
# the 8-bit floats (dtypes.py): gl and st for TMA and wgmma, rt for conversions
f8e4m3, f8e5m2 = DType("f8e4m3"), DType("f8e5m2")
SCALAR_DTYPES = ("f32", "i32")


def tile_dtype(x, allowed=DTYPES, what: str = "tile") -> str:
    """x as an element type name of `allowed` (shared tiles: the float types;
    register tiles also i32: reg_dtype), else a located error."""
    if not isinstance(x, str) or x not in allowed:
        hint = ("; an i32 tile lives in registers (rt, rv): load it from and store it to an i32 gl"
                if x == "i32" else "")
        raise fail(f"{what} element type must be one of {', '.join(allowed)} "
                   f"(tkc.bf16, ...), got {x!r}{hint}")
    return str(x)


def reg_dtype(x) -> str:
    """The element type of a register tile or vector: a float type or i32."""
    return tile_dtype(x, REG_DTYPES)


def _extent(n, what: str, half: bool = False) -> int:
    """n as a tile extent: a positive multiple of 16 (16x16 base tiles), or 8
    where `half` (rows of a half tile, fragments.HALF), else a located error."""
    if isinstance(n, bool) or not isinstance(n, int) or not extent_ok(n, half):
        raise fail(f"{what} must be {'8 or ' if half else ''}a positive multiple of 16 (tiles are "
                   f"built of 16x16 base tiles{', or their 8-row top halves' if half else ''}), got {n!r}")
    return n


def _choice(x, allowed, what):
    if x not in allowed:
        raise fail(f"{what} must be one of {', '.join(map(repr, allowed))}, got {x!r}")
    return x


# ------------------------------------------------------------ register handles

class Reg(Traced):
    """A register tile (rt) or vector (rv) handle."""

    _what = "a register tile"

    def __init__(self, view):
        self.view = view
        self._value = None
        self._scope = None

    # -- the SSA value
    def value(self):
        """The current SSA value; a located error if unassigned or out of scope."""
        st = current()
        st.flush()
        if self._value is None:
            raise fail(f"{self.describe()} is used before any op assigned it "
                       "(e.g. zero(x), load(x, src, coords))")
        if not st.visible(self._scope):
            raise fail(f"{self.describe()} was assigned inside the {self._scope.describe()} "
                       "and has no value after it: assign it before the loop/if to carry it")
        return self._value

    @property
    def assigned(self) -> bool:
        return self._value is not None

    def bind(self, value) -> "Reg":
        st = current()
        self._value, self._scope = value, st.scope
        st.track(self)
        return self

    def describe(self) -> str:
        return self.view.text().replace("!tk.", "").replace(" : i64", "")

    def __repr__(self):
        return f"<{self.describe()}{'' if self.assigned else ' unassigned'}>"

    # -- shape
    dtype = property(lambda self: self.view.dtype)
    shape = property(lambda self: self.view.shape)
    is_tile = property(lambda self: isinstance(self.view, RT))
    rows = property(lambda self: self.view.rows)
    cols = property(lambda self: self.view.cols)
    layout = property(lambda self: self.view.layout)
    length = property(lambda self: self.view.length)
    kind = property(lambda self: self.view.kind)

    # -- x.to(dtype), x[:, j], and the operators (+ - * / neg, comparisons
    # into masks for where()): the functional forms of the ops, installed on
    # Reg by operators.py (the ops are built on Reg: importing them here would
    # be an import cycle). A tile is hashed by identity: its == is a mask.
    __hash__ = object.__hash__


def rt(dtype, rows: int, cols: int, layout: str = "row") -> Reg:
    """An unassigned register tile handle rt<dtype, rows, cols, layout>; rows
    8 (the top halves of base tiles) in the row layout only."""
    view = RT(reg_dtype(dtype), _extent(rows, "rt rows", half=True), _extent(cols, "rt cols"),
              _choice(layout, LAYOUTS, "rt layout"))
    if rows == HALF and layout != "row":
        raise fail(f"an 8-row rt is row layout only (the {layout} layout's fragments are 16 rows): "
                   f"got rt({dtype!r}, 8, {cols}, {layout!r})")
    return Reg(view)


def rv(dtype, length: int, kind: str = "col") -> Reg:
    """An unassigned register vector handle; kind "col" = one value per tile
    row (length 8 too: an 8-row tile's), "row" = one per tile column, "flat" =
    a vector on its own (L/32 a lane)."""
    view = RV(tile_dtype(dtype, tuple(d for d in REG_DTYPES if d not in FP8_DTYPES), "rv"),
              _extent(length, "rv length", half=kind == "col"), _choice(kind, VEC_KINDS, "rv kind"))
    if kind == "flat" and length % 32:
        raise fail(f"a flat rv's length must be a multiple of 32 (one chunk per lane), got {length}")
    return Reg(view)


# ------------------------------------------------------------ shared handles

class Shared(Traced):
    """A shared tile (st) or vector (sv): one tk.alloc for the whole kernel,
    or a view of part of one (subtile), valid in the scope that made it."""

    _what = "a shared tile"

    def __init__(self, view, value, scope=None):
        self.view, self._value, self._scope = view, value, scope

    def value(self):
        if self._scope is not None and not current().visible(self._scope):
            raise fail(f"the subtile {self.view.text()} was made inside the "
                       f"{self._scope.describe()} and is not available after it")
        return self._value

    dtype = property(lambda self: self.view.dtype)
    shape = property(lambda self: self.view.shape)
    is_tile = property(lambda self: isinstance(self.view, ST))
    rows = property(lambda self: self.view.rows)
    cols = property(lambda self: self.view.cols)
    length = property(lambda self: self.view.length)

    def __repr__(self):
        return f"<{self.view.text()}>"


def _alloc(view, after_loop: bool = False) -> Shared:
    current().require_top_level(
        f"shared memory ({view.text()}) allocation", "ThunderKittens allocates shared tiles "
        "up front; move the st(...)/sv(...) before the loop or if")
    from ..dialect import ops as tk
    from ..hopper.shared import AFTER_RING
    with emitting():
        value = tk.alloc(view.mlir())
        if after_loop:
            from mlir import ir
            value.owner.attributes[AFTER_RING] = ir.UnitAttr.get()
        return Shared(view, value)


def st(dtype, rows: int, cols: int, swizzle: str = "auto", after_loop: bool = False) -> Shared:
    """Allocate a shared tile st<dtype, rows, cols, swizzle> (rows 8 too).

    after_loop=True: a tile the kernel uses only after its pipelined loop (a
    finish tile, split-K's partials), which may then lie over the loop's
    ring, dead by then: the ring gets its bytes (CUTLASS unions a mainloop's
    and an epilogue's shared storage alike). Only in a kernel that is not
    persistent; tk-pipeline-staging checks the claim."""
    if not isinstance(after_loop, bool):
        raise fail(f"st: after_loop must be True or False, got {after_loop!r}")
    return _alloc(ST(tile_dtype(dtype), _extent(rows, "st rows", half=True), _extent(cols, "st cols"),
                     _choice(swizzle, SWIZZLES, "st swizzle")), after_loop)


def sv(dtype, length: int) -> Shared:
    """Allocate a shared vector sv<dtype, length>."""
    return _alloc(SV(tile_dtype(dtype, VEC_DTYPES, "sv"), _extent(length, "sv length")))


# ------------------------------------------------------------ global layouts

AXES = ("b", "d", "r", "c")


class GLSpec:
    """The annotation gl(dtype, b, d, r, c): each dim an int (static), None
    (runtime) or a name (runtime, and every dim of the kernel's gl arguments
    with that name has the same size: gl(bf16, 1, 1, "M", "K")). An i32 gl
    holds integers: indices read one element at a time (load(tkc.i32, g,
    at=...)), or i32 tiles (counts, argmax indices); an i64 gl holds int64
    indices, read one element at a time (load(tkc.i64, g, at=...)).

    strided=True: the argument may be any view whose elements along c are
    adjacent (a permuted or sliced tensor: q.transpose(1, 2) of a [B, L, H, D]
    one); its b, d and r strides are run-time parameters, so one kernel
    serves every such layout. Without it the tensor must be contiguous, and
    its strides are products of its dims."""

    def __init__(self, dtype, b, d, r, c, strided=False):
        self.dtype = tile_dtype(dtype, GL_DTYPES, "gl")
        self.dims = tuple(_gl_dim(x, a) for x, a in zip((b, d, r, c), AXES))
        if not isinstance(strided, bool):
            raise fail(f"gl: strided must be True or False, got {strided!r}")
        self.strided = strided

    @property
    def static(self) -> tuple:
        """Each dim's size, or None when runtime."""
        return tuple(x if isinstance(x, int) else None for x in self.dims)

    @property
    def names(self) -> tuple:
        """Each dim's name ("" when unnamed): same-named dims must agree at launch."""
        return tuple(x if isinstance(x, str) else "" for x in self.dims)

    def view(self) -> GL:
        return GL(self.dtype, *(-1 if x is None else x for x in self.static))

    def __eq__(self, o):
        return isinstance(o, GLSpec) and (self.dtype, self.dims, self.strided) == (o.dtype, o.dims, o.strided)

    def __hash__(self):
        return hash((self.dtype, self.dims, self.strided))

    def __repr__(self):
        return f"gl({self.dtype}, {', '.join(map(repr, self.dims))}{', strided=True' if self.strided else ''})"


class PGLSpec(GLSpec):
    """The annotation pgl(dtype, b, d, r, c): a parallel global layout, one gl
    per rank of a symmetric allocation (ThunderKittens' pgl), all of this
    shape. Inside the kernel the argument is the local rank's gl, and
    x.peer(r) the gl over rank r's buffer."""

    def __eq__(self, o):
        return isinstance(o, PGLSpec) and (self.dtype, self.dims) == (o.dtype, o.dims)

    def __hash__(self):
        return hash(("pgl", self.dtype, self.dims))

    def __repr__(self):
        return "p" + super().__repr__()


def _gl_dim(x, axis):
    if x is None or isinstance(x, str):
        return x
    if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
        raise fail(f"gl dim {axis} must be a positive int (static) or None/a name "
                   f"(runtime), got {x!r}")
    return x


def gl(dtype, b=None, d=None, r=None, c=None, *, strided: bool = False) -> GLSpec:
    """A global layout annotation for a kernel argument (strided: GLSpec's doc)."""
    return GLSpec(dtype, b, d, r, c, strided)


def pgl(dtype, b=None, d=None, r=None, c=None) -> PGLSpec:
    """A parallel global layout annotation (one gl per rank; docs/multi-gpu.md)."""
    return PGLSpec(dtype, b, d, r, c)


class GLHandle(Traced):
    """A gl kernel argument inside the kernel (or a slice of one): .b .d .r .c
    are Index values."""

    _what = "a global layout"

    def __init__(self, spec: GLSpec, value, name: str, sliced: frozenset = frozenset(), scope=None):
        self.spec, self._value, self.name, self.sliced, self._scope = spec, value, name, sliced, scope

    def value(self):
        if self._scope is not None and not current().visible(self._scope):
            raise fail(f"the slice of {self.name} was made inside the {self._scope.describe()} "
                       "and is not available after it")
        return self._value

    dtype = property(lambda self: self.spec.dtype)
    view = property(lambda self: self.spec.view())

    def _dim(self, axis: str) -> Index:
        size = self.spec.static[AXES.index(axis)]
        if size is not None:
            return Index(const=size)
        from ..dialect import ops as tk
        with emitting():
            idx = Index(tk.dim(self.value(), axis))
        if axis not in self.sliced:  # so `tkc.range(x.c // 64)` can require x.c % 64 == 0
            idx.gl_dim = f"{self.name}.{axis}"
        return idx

    def slice(self, axis: str, start, size) -> "GLHandle":
        """The part of this gl whose `axis` ("r" or "c") runs over elements
        start .. start + size - 1 (a runtime dim; variable-length sequences
        packed in one tensor: q.slice("r", cu[b], cu[b + 1] - cu[b])).
        Ragged loads and stores (fill=, clip=) stop at its edges, so register
        accesses through it need them; a TMA load reads the parent's elements
        past its end (zeros only past the parent's). A TMA store writes its
        whole box, so the box must lie inside the slice or wholly past the
        parent's end; a TMA reduce-add (store_add) adds its whole box, so it
        must add zeros past the slice's end (the interpreter checks both)."""
        if axis not in ("r", "c"):
            raise fail(f"slice: axis must be \"r\" or \"c\", got {axis!r}")
        from ..dialect import ops as tk
        from .values import as_index
        s, n = as_index(start, "slice start"), as_index(size, "slice size")
        dims = list(self.spec.dims)
        dims[AXES.index(axis)] = None
        spec = GLSpec(self.dtype, *dims, self.spec.strided)
        with emitting():
            value = tk.gl_slice(spec.view().mlir(), self.value(), axis, s.ir(), n.ir())
        return GLHandle(spec, value, self.name, self.sliced | {axis}, current().scope)

    def peer(self, rank) -> "GLHandle":
        """The gl over rank `rank`'s buffer of this parallel gl (a pgl
        argument): same shape and dtype, read and written over NVLink."""
        if not isinstance(self.spec, PGLSpec) or self.sliced or self.peer_of is not None:
            raise fail(f"peer: {self.name} is not a pgl argument (annotate it pgl(...) to "
                       "reach the other ranks' buffers)")
        from ..dialect import ops as tk
        from .values import as_index
        r = as_index(rank, "peer rank")
        with emitting():
            value = tk.peer(self.value(), r.ir())
        h = GLHandle(GLSpec(self.dtype, *self.spec.dims), value, f"{self.name}.peer(...)",
                     scope=current().scope)
        h.peer_of = self
        return h

    peer_of = None   # the pgl handle a peer's gl came from

    b = property(lambda self: self._dim("b"))
    d = property(lambda self: self._dim("d"))
    r = property(lambda self: self._dim("r"))
    c = property(lambda self: self._dim("c"))

    def __repr__(self):
        return f"<{self.name}: {self.spec!r}>"
