"""The `tk-lower-to-nvvm` framework: tile IR -> per-thread NVVM.

Every `func.func` with `tk.kernel` becomes an `llvm.func` with `nvvm.kernel`
inside `gpu.module @tkc` (docs/tile-ir.md, "Lowered form"). The walker visits
the kernel body in order and maps every source Value to its lowered form:

- rt / rv   -> `Frag(view, vals)`: the thread's scalars of the element type,
               in the order of `tkc/lowering/fragments.py`;
- st / sv / barrier -> `Shared(view, offset, dynamic, pitch)`: a byte offset in
               the dynamic shared array (static, plus a run-time part for
               ring slots and subtiles at run-time indices);
- gl        -> `Global(view, ptr, dims)`: an `!llvm.ptr<1>` and the 4 dims
               (`index` Values for runtime dims, Python ints for static ones);
- scalars   -> the `ir.Value` itself (index, f32, i32, i1).

tk ops are lowered by rules registered with `@rule("tk.xxx")`:
`fn(lw: Lowering, op, args) -> list`, where `args` are the mapped operands
in order and the result is the list of mapped results in order. The walker
sets the insertion point (end of the current block) and location (the op's,
i.e. the author's Python line) before calling a rule, so rules just build ops.
`arith`/`math`/`index` ops are re-created with mapped operands; `scf.for`,
`scf.if` and `scf.yield` are re-created with 1:N flattening (an rt/rv becomes
len(vals) scalars); upstream passes lower arith/scf afterwards.

The llvm.func gets a string attribute `tkc.manifest` (JSON: the launch facts
of docs/tile-ir.md's manifest that the IR knows; compile_kernel adds the rest).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

from mlir import ir
from mlir.dialects import arith, llvm, nvvm, scf

from ..diagnostics import error
from ..dialect.types import GL, RT, RV, SV, ST, UNIFORM_IDS, Barrier, view
from ..passes import verify
from . import fragments

TARGET = '#nvvm.target<chip = "sm_90a", features = "+ptx81", O = 3>'
GPU_MODULE = "tkc"
DYNAMIC = -1


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

    def __post_init__(self):
        self.origin = self.origin or [0, 0, 0, 0]
        self.bounds = self.bounds or list(self.dims)


def frag_len(v) -> int:
    if isinstance(v, RT):
        return fragments.tile_elems(v.rows, v.cols)
    return fragments.vec_elems(v.length, v.kind)


def scalar_type(dtype: str) -> ir.Type:
    """The MLIR scalar type of a tk element type name."""
    return {"bf16": ir.BF16Type.get, "f16": ir.F16Type.get, "f32": ir.F32Type.get,
            "i32": lambda: ir.IntegerType.get_signless(32)}[dtype]()


def flat_types(t: ir.Type) -> list[ir.Type]:
    """The types a value of type t is carried as through scf (1:N for rt/rv):
    its scalars, 16-bit ones packed in pairs as i32 (a carried bf16 tile
    then takes one 32-bit register per two elements, not one per element)."""
    v = view(t)
    if v is None:
        return [t]
    if isinstance(v, (RT, RV)):
        n = frag_len(v)
        if _packed(v):
            return [ir.IntegerType.get_signless(32)] * (n // 2)
        return [scalar_type(v.dtype)] * n
    raise TypeError(v.text())


def _packed(v) -> bool:
    return v.dtype != "f32" and frag_len(v) % 2 == 0


# ---------------------------------------------------------------- rules

RULES: dict[str, Callable] = {}

# Modules that register rules, imported on first use (LOWER-MEM's may not exist yet).
RULE_MODULES = ("compute", "reduce", "masks", "random", "mma", "memory", "workers", "barriers",
                "tma", "wgmma", "views")


def rule(*op_names: str):
    """Register `fn(lw, op, args) -> list` as the lowering of each op name."""
    def deco(fn):
        for name in op_names:
            RULES[name] = fn
        return fn
    return deco


def _load_rules() -> None:
    for name in RULE_MODULES:
        full = f"{__package__}.{name}"
        if importlib.util.find_spec(full) is not None:
            importlib.import_module(full)


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


# ---------------------------------------------------------------- the walker

def lower_module(module) -> None:
    """Lower every tk kernel of `module` (ir.Module or its operation) in place."""
    _load_rules()
    mod_op = getattr(module, "operation", module)
    body = mod_op.regions[0].blocks[0]
    kernels = [op.operation for op in body.operations
               if op.operation.name == "func.func" and "tk.kernel" in op.operation.attributes]
    if not kernels:
        return
    with mod_op.context, mod_op.location:
        mod_op.attributes["gpu.container_module"] = ir.UnitAttr.get()
        gpu_module = _gpu_module(body)
        for k in kernels:
            _lower_kernel(k, gpu_module)
            k.erase()


def _gpu_module(body):
    for op in body.operations:
        op = op.operation
        if op.name == "gpu.module" and ir.StringAttr(op.attributes["sym_name"]).value == GPU_MODULE:
            return op
    op = ir.Operation.parse(f"gpu.module @{GPU_MODULE} [{TARGET}] {{\n}}")
    body.append(op)
    return op


def _attr(func_op, name, default):
    return func_op.attributes[name] if name in func_op.attributes else default


def _kernel_facts(func_op):
    """(warps, grid strings, arg names) from the tk.* attributes."""
    warps = _attr(func_op, "tk.warps", None)
    warps = ir.IntegerAttr(warps).value if warps is not None else 1
    if not 1 <= warps <= 32:
        raise error(func_op, f"tk.warps must be 1..32 (a block has at most 1024 threads), found {warps}")
    grid = _attr(func_op, "tk.grid", None)
    grid = [ir.StringAttr(g).value for g in ir.ArrayAttr(grid)] if grid is not None else ["1"] * 3
    return warps, grid, verify.arg_names(func_op)


def _param_types(func_op) -> list[ir.Type]:
    """The llvm.func parameters of docs/tile-ir.md's lowered form."""
    i32 = ir.IntegerType.get_signless(32)
    out = []
    for a in func_op.regions[0].blocks[0].arguments:
        v = view(a.type)
        if isinstance(v, GL):
            out.append(ir.Type.parse("!llvm.ptr<1>"))
            out += [i32] * sum(d == DYNAMIC for d in v.dims)
        elif v is None and str(a.type) in ("f32", "i32"):
            out.append(a.type)
        else:
            raise error(func_op, f"kernel argument {a.arg_number} must be a gl, f32 or i32, found {a.type}")
    return out


def _optional(module: str, fn: str):
    """`tkc.lowering.<module>.<fn>`, or None while that module does not exist."""
    full = f"{__package__}.{module}"
    if importlib.util.find_spec(full) is None:
        return None
    return getattr(importlib.import_module(full), fn)


def _lower_kernel(func_op, gpu_module) -> None:
    warps, grid, names = _kernel_facts(func_op)
    plan_fn = _optional("shared", "plan")
    plan = plan_fn(func_op) if plan_fn else None
    name = ir.StringAttr(func_op.attributes["sym_name"]).value
    maps = _optional("tma", "plan")(func_op, names)  # one parameter each, after the others
    first_map = len(_param_types(func_op))
    params = _param_types(func_op) + [ir.Type.parse("!llvm.ptr")] * len(maps)
    loc = func_op.location
    gbody = gpu_module.regions[0].blocks[0]
    with ir.InsertionPoint(gbody), loc:
        fty = ir.TypeAttr.get(ir.Type.parse(f"!llvm.func<void ({', '.join(map(str, params))})>"))
        lf = llvm.LLVMFuncOp(name, fty)
    lf.operation.attributes["nvvm.kernel"] = ir.UnitAttr.get()
    lf.operation.attributes["nvvm.maxntid"] = ir.DenseI32ArrayAttr.get([32 * warps, 1, 1])
    n = _optional("shared", "blocks_per_sm")(func_op)
    if n > 1:  # ptxas keeps the registers to 65536 / (n * threads) a thread, so n blocks fit
        lf.operation.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), n)
    lf.operation.attributes["tkc.manifest"] = ir.StringAttr.get(
        json.dumps(_manifest(func_op, name, warps, grid, names, plan, maps)))
    _tensor_map_attrs(lf, first_map, len(maps))
    entry = lf.body.blocks.append(*params)
    body = lf.body.blocks.append()
    with ir.InsertionPoint(entry), loc:
        llvm.br([], body)
    lw = Lowering(func_op, lf, gpu_module, warps, plan)
    lw._entry = entry
    lw.tensor_maps = {m.key: entry.arguments[first_map + i] for i, m in enumerate(maps)}
    with lw.at_entry(), loc:
        _bind_params(lw, func_op, entry)
    _lower_block(lw, func_op.regions[0].blocks[0], body)


def _tensor_map_attrs(lf, first: int, count: int) -> None:
    """Tensor maps are 128-byte, 64-aligned `__grid_constant__` parameters:
    PTX `.param .align 64 .b8 [128]`, read through their generic address."""
    if not count:
        return
    plain = ir.Attribute.parse("{}")
    tmap = ir.Attribute.parse(
        "{llvm.byval = !llvm.array<128 x i8>, llvm.align = 64 : i64, nvvm.grid_constant}")
    lf.operation.attributes["arg_attrs"] = ir.ArrayAttr.get([plain] * first + [tmap] * count)


def _bind_params(lw, func_op, entry) -> None:
    """Map source arguments to Global / scalar values (runtime dims index_cast).
    Dims named alike are one size (the runtime checks it), so they share the
    first one's value: one register however many arguments carry the dim."""
    from ..passes.verify import dim_names
    k, named = 0, {}
    for a, names in zip(func_op.regions[0].blocks[0].arguments, dim_names(func_op)):
        v = view(a.type)
        if isinstance(v, GL):
            ptr, k = entry.arguments[k], k + 1
            dims = []
            for d, name in zip(v.dims, names):
                if d == DYNAMIC:
                    value = arith.index_cast(ir.IndexType.get(), entry.arguments[k])
                    dims.append(named.setdefault(name, value) if name else value)
                    k += 1
                else:
                    dims.append(d)
            lw.values[a] = Global(v, ptr, dims)
        else:
            lw.values[a] = entry.arguments[k]
            k += 1


def _manifest(func_op, name, warps, grid, names, plan, maps=()) -> dict:
    from .requirements import inplace, multiples, params
    return {"version": 1, "kernel": name, "target": "sm_90a", "warps": warps,
            "block": [32 * warps, 1, 1], "grid": grid,
            "shared_bytes": plan.total if plan is not None else 0,
            "cluster": [1, 1, 1], "tensor_maps": [m.manifest() for m in maps],
            "params": params(func_op, names), "inplace": inplace(func_op),
            "multiples": multiples(func_op)}


# Ops re-created as they are (operands mapped): scalar math the upstream passes lower.
_PASS_THROUGH = ("arith.", "math.", "index.")


def _lower_block(lw, src, dst) -> None:
    """Lower the ops of source block `src` to the end of block `dst`."""
    for op in src.operations:
        op = op.operation
        with ir.InsertionPoint(dst), op.location:
            _lower_op(lw, op)


def _lower_op(lw, op) -> None:
    name = op.name
    if name.startswith("tk."):
        fn = RULES.get(name)
        if fn is None:
            raise error(op, f"no lowering for {name}")
        results = fn(lw, op, [lw.lookup(v) for v in op.operands])
        lw.bind(op.results, results)
    elif name.startswith(_PASS_THROUGH) and not len(op.regions):
        _recreate(lw, op)
    elif name == "scf.for":
        _lower_for(lw, op)
    elif name == "scf.if":
        _lower_if(lw, op)
    elif name == "scf.yield":
        scf.YieldOp(_flatten(lw, op, op.operands))
    elif name == "func.return":
        if len(op.operands):
            raise error(op, "a kernel returns nothing")
        llvm.ReturnOp()
    else:
        raise error(op, f"no lowering for {name}")


def _scalar(lw, op, v):
    low = lw.lookup(v)
    if not isinstance(low, ir.Value):
        raise error(op, f"{op.name} cannot take a {type(low).__name__} operand ({v.type})")
    return low


def _recreate(lw, op) -> None:
    new = ir.Operation.create(
        op.name, results=[r.type for r in op.results],
        operands=[_scalar(lw, op, v) for v in op.operands],
        attributes={n: op.attributes[n] for n in op.attributes})
    lw.bind(op.results, list(new.results))


def _flatten(lw, op, values) -> list:
    """Mapped values -> the flat values flat_types says (a Frag gives its
    vals, 16-bit ones packed in pairs)."""
    out = []
    for v in values:
        low = lw.lookup(v)
        if isinstance(low, Frag):
            out += _pack_pairs(low.vals) if _packed(low.view) else low.vals
        elif isinstance(low, ir.Value):
            out.append(low)
        else:
            raise error(op, f"{op.name} cannot carry a {type(low).__name__} ({v.type}) through control flow")
    return out


def _unflatten(types, flat) -> list:
    """Regroup flat values as the lowered values of source `types` (16-bit
    pairs unpacked at the insertion point)."""
    out, k = [], 0
    for t in types:
        n = len(flat_types(t))
        chunk = list(flat[k:k + n])
        k += n
        v = view(t)
        if v is not None and _packed(v):
            chunk = _unpack_pairs(chunk, scalar_type(v.dtype))
        out.append(Frag(v, chunk) if v is not None else chunk[0])
    assert k == len(flat)
    return out


def _pack_pairs(vals: list) -> list:
    i32 = ir.IntegerType.get_signless(32)
    out = []
    for lo, hi in zip(vals[0::2], vals[1::2]):
        vec = llvm.mlir_undef(ir.VectorType.get([2], lo.type))
        for pos, e in enumerate((lo, hi)):
            vec = llvm.insertelement(vec, e, arith.constant(i32, pos))
        out.append(llvm.bitcast(i32, vec))
    return out


def _unpack_pairs(words: list, t) -> list:
    i32 = ir.IntegerType.get_signless(32)
    out = []
    for w in words:
        vec = llvm.bitcast(ir.VectorType.get([2], t), w)
        out += [llvm.extractelement(vec, arith.constant(i32, pos)) for pos in (0, 1)]
    return out


def _check_carriable(op, types) -> None:
    for t in types:
        if view(t) is not None and not isinstance(view(t), (RT, RV)):
            raise error(op, f"{op.name} cannot carry a value of type {t} (only rt, rv and scalars)")


def _lower_for(lw, op) -> None:
    lb, ub, step = (_scalar(lw, op, v) for v in list(op.operands)[:3])
    inits = list(op.operands)[3:]
    _check_carriable(op, [v.type for v in inits])
    new = scf.ForOp(lb, ub, step, _flatten(lw, op, inits))
    sblock = op.regions[0].blocks[0]
    lw.values[sblock.arguments[0]] = new.induction_variable
    carried = list(sblock.arguments)[1:]
    with ir.InsertionPoint(new.body):
        lw.bind(carried, _unflatten([a.type for a in carried], list(new.inner_iter_args)))
    _lower_block(lw, sblock, new.body)
    lw.bind(op.results, _unflatten([r.type for r in op.results], list(new.results)))


def _lower_if(lw, op) -> None:
    types = [r.type for r in op.results]
    _check_carriable(op, types)
    flat = [t for ty in types for t in flat_types(ty)]
    has_else = len(op.regions[1].blocks) > 0
    new = scf.IfOp(_scalar(lw, op, op.operands[0]), flat, has_else=has_else)
    _lower_block(lw, op.regions[0].blocks[0], new.then_block)
    if has_else:
        _lower_block(lw, op.regions[1].blocks[0], new.else_block)
    lw.bind(op.results, _unflatten(types, list(new.results)))
