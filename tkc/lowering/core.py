"""The `tk-lower-to-nvvm` framework: lowered values, rules, per-kernel state.

The walker (walker.py) maps every source Value to its lowered form:

- rt / rv   -> `Frag(view, vals)`: the thread's scalars of the element type,
               in the order of `tkc/hopper/fragments.py`;
- st / sv / barrier -> `Shared(view, offset, dynamic, pitch)`: a byte offset in
               the dynamic shared array (static, plus a run-time part for
               ring slots and subtiles at run-time indices);
- gl        -> `Global(view, ptr, dims)`: an `!llvm.ptr<1>` and the 4 dims
               (`index` Values for runtime dims, Python ints for static ones);
- scalars   -> the `ir.Value` itself (index, f32, i32, i1).

tk ops are lowered by rules registered with `@rule("tk.xxx")`:
`fn(lw: Lowering, op, args) -> list`, where `args` are the mapped operands
in order and the result is the list of mapped results in order; `lw` is the
kernel's `Lowering` (its state and the helpers rules use).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

from mlir import ir
from mlir.dialects import arith, nvvm

from ..diagnostics import error
from ..dialect.types import GL, RT, RV, SV, ST, UNIFORM_IDS, Barrier
from ..hopper.registers import frag_len


# ---------------------------------------------------------------- lowered values

@dataclass
class Frag:
    """A register tile or vector, per thread: `vals[i]` is the scalar at flat
    position i of fragments.py's order (element type: the view's dtype)."""
    view: RT | RV
    vals: list

    def __post_init__(self):
        want = frag_len(self.view)
        if len(self.vals) != want:
            raise ValueError(f"{self.view.text()} needs {want} values per thread, got {len(self.vals)}")


@dataclass
class Shared:
    """A shared tile, vector or barrier at `offset` + `dynamic` bytes into the
    dynamic shared array (shared.SHARED_SYMBOL; `shared.base(lw)` gives its
    pointer, `shared.pointer(lw, sh)` this value's).

    `offset` is the static part, a Python int, so that kernels without ring
    slots or run-time subtiles keep constant-folded addresses. `dynamic` is
    the run-time part, an `index` Value of bytes (a ring slot i*stride, a
    subtile at a run-time index), or None.

    `pitch` (an st's): the rows of the panel layout the tile lives in. A
    swizzled st is stored as column panels of rows*S bytes; a row subtile
    of a multi-panel st keeps its parent's panels, pitch*S bytes apart, not
    its own rows*S (docs/tile-ir.md, "Block level"). 0 for sv and barriers."""
    view: ST | SV | Barrier
    offset: int
    dynamic: ir.Value | None = None
    pitch: int = 0

    def __post_init__(self):
        if isinstance(self.view, ST) and not self.pitch:
            self.pitch = self.view.rows


@dataclass
class Global:
    """A global layout: `ptr` (!llvm.ptr<1>) and dims (b, d, r, c), each an
    `index` Value (runtime dim) or a Python int (static dim): the kernel
    argument's, which address its elements. A slice (tk.gl_slice) keeps them
    and adds `origin`, its first element's coordinates in the argument, and
    `bounds`, its own sizes (what tk.dim and ragged accesses see)."""
    view: GL
    ptr: ir.Value
    dims: list
    origin: list = None
    bounds: list = None
    rank: ir.Value = None   # a tk.peer's: whose buffer (selects its tensor map)
    strides: list = None    # a strided gl's (b, d, r) element strides (index Values)

    def __post_init__(self):
        self.origin = self.origin or [0, 0, 0, 0]
        self.bounds = self.bounds or list(self.dims)

    @property
    def pitch(self):
        """Elements from one row to the next: the r stride (a strided gl's
        parameter, else the c dim)."""
        return self.strides[2] if self.strides is not None else self.dims[3]


# ---------------------------------------------------------------- rules

RULES: dict[str, Callable] = {}


def rule(*op_names: str):
    """Register `fn(lw, op, args) -> list` as the lowering of each op name."""
    def deco(fn):
        for name in op_names:
            RULES[name] = fn
        return fn
    return deco


# ---------------------------------------------------------------- per-kernel state

class Lowering:
    """Per-kernel state and the helpers rules use.

    Attributes: `func_op` (the source func.func), `llvm_func`, `gpu_module`,
    `warps` (int), `shared_plan` (shared.plan(func_op), or None if that
    module is absent), `name`.
    """

    def __init__(self, func_op, llvm_func, gpu_module, warps: int, shared_plan):
        self.func_op = func_op
        self.llvm_func = llvm_func
        self.gpu_module = gpu_module
        self.warps = warps
        self.shared_plan = shared_plan
        self.name = ir.StringAttr(func_op.attributes["sym_name"]).value
        self.values: dict = {}
        self.tensor_maps: dict = {}  # tma.TensorMap.key -> its !llvm.ptr parameter
        self._entry = None  # the llvm.func's entry block (ends with a br to the body)
        self._cache: dict = {}

    # -- constants (at the current insertion point)
    def const_index(self, n: int) -> ir.Value:
        return arith.constant(ir.IndexType.get(), int(n))

    def const_i32(self, n: int) -> ir.Value:
        return arith.constant(ir.IntegerType.get_signless(32), int(n))

    def const_f32(self, x: float) -> ir.Value:
        return arith.constant(ir.F32Type.get(), float(x))

    # -- values computed once, in the entry block
    @contextmanager
    def at_entry(self):
        """Insert in the kernel's entry block (dominates the whole body)."""
        with ir.InsertionPoint.at_block_terminator(self._entry):
            yield

    def once(self, key, build: Callable[[], ir.Value]) -> ir.Value:
        """`build()` run once at the kernel entry, cached under `key`."""
        if key not in self._cache:
            with self.at_entry(), ir.Location.unknown():
                self._cache[key] = build()
        return self._cache[key]

    def tid_i32(self) -> ir.Value:
        """threadIdx.x as i32."""
        return self.once("tid", lambda: nvvm.read_ptx_sreg_tid_x(ir.IntegerType.get_signless(32)))

    def lane_i32(self) -> ir.Value:
        return self.once("lane_i32", lambda: arith.remui(self.tid_i32(), self.const_i32(32)))

    def warp_i32(self) -> ir.Value:
        """tid / 32 (uniform_warp_i32 where tk.uniform_ids is "warp")."""
        if self.uniform_ids() == "warp":
            return self.uniform_warp_i32()
        return self.once("warp_i32", lambda: arith.divui(self.tid_i32(), self.const_i32(32)))

    def uniform_ids(self) -> str | None:
        """The kernel's tk.uniform_ids: None, "warpgroup" or "warp"."""
        attrs = self.func_op.attributes
        if "tk.uniform_ids" not in attrs:
            return None
        a = attrs["tk.uniform_ids"]
        value = ir.StringAttr(a).value if isinstance(a, ir.StringAttr) else None
        if value not in UNIFORM_IDS:
            raise error(self.func_op, f'tk.uniform_ids must be "warpgroup" or "warp", found {a}')
        return value

    def uniform_warp_i32(self) -> ir.Value:
        """tid / 32 broadcast from lane 0 (shfl.sync.idx), as CUTLASS's
        canonical_warp_idx_sync: ptxas then knows it is the same in every
        lane and keeps what derives from it (a warpgroup's branch, the wgmma
        descriptors of its subtile) on the uniform datapath, not in per-lane
        registers moved over by R2UR."""
        def build():
            w = arith.divui(self.tid_i32(), self.const_i32(32))
            return nvvm.shfl_sync(w.type, self.const_i32(-1), w, self.const_i32(0), self.const_i32(31),
                                  nvvm.ShflKind.idx)
        return self.once("uniform_warp_i32", build)

    def lane(self) -> ir.Value:
        """The lane id (0..31) as an index Value."""
        return self.once("lane", lambda: arith.index_cast(ir.IndexType.get(), self.lane_i32()))

    def warp(self) -> ir.Value:
        """The warp id in the block (0..warps-1) as an index Value."""
        return self.once("warp", lambda: arith.index_cast(ir.IndexType.get(), self.warp_i32()))

    # -- value mapping
    def lookup(self, value: ir.Value):
        try:
            return self.values[value]
        except KeyError:
            raise RuntimeError(f"tk-lower-to-nvvm: unmapped value {value}") from None

    def bind(self, values, lowered) -> None:
        for v, low in zip(values, lowered, strict=True):
            self.values[v] = low
