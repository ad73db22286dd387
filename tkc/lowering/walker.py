"""The `tk-lower-to-nvvm` walker: tile IR kernels -> llvm.func in gpu.module.

Every `func.func` with `tk.kernel` becomes an `llvm.func` with `nvvm.kernel`
inside `gpu.module @tkc` (docs/tile-ir.md, "Lowered form"). The walker visits
the kernel body in order and maps every source Value to its lowered form
(core.py: Frag, Shared, Global, or the scalar ir.Value). tk ops go to the
rules registered with `@rule` (the rule modules imported below); it sets the
insertion point (end of the current block) and location (the op's, i.e. the
author's Python line) before calling a rule, so rules just build ops.
`arith`/`math`/`index` ops are re-created with mapped operands; `scf.for`,
`scf.if` and `scf.yield` are re-created with 1:N flattening (an rt/rv becomes
len(vals) scalars, hopper.registers.flat_types); upstream passes lower
arith/scf afterwards.

The llvm.func gets a string attribute `tkc.manifest` (JSON: the launch facts
of docs/tile-ir.md's manifest that the IR knows; compile_kernel adds the rest).
"""
from __future__ import annotations

import json

from mlir import ir
from mlir.dialects import arith, llvm, scf

from ..diagnostics import error
from ..dialect.attrs import int_attr
from ..dialect.kernel import (arg_names, blocks_per_sm, cluster_shape, dim_names, kernel_warps, parallel_args,
                             strided_args)
from ..dialect.types import GL, RT, RV, view
from ..hopper.registers import flat_types, packed, per_word, scalar_type, word_order
from . import peers, shared, tma
from .core import RULES, Frag, Global, Lowering
from .fp8 import pack_bytes
from .requirements import inplace, multiples, params
# The rule modules: importing them registers their rules in core.RULES.
from . import barriers, block, cluster, compute, masks, memory, mma, random, reduce, views, wgmma, workers  # noqa: F401

# LLVM at O3: O2 keeps the GEMMs' k-loop rolled (O3 unrolls it twice): 15% less LLVM and ptxas
# time, but the library GEMM ran 1.8-3.4% slower on the H200 (8192x8192x1024 643 against 665
# TFLOP/s, 8192^3 672 against 683; A/B in one run, 2026-11-29), so O2 was reverted.
# Rolled by loop metadata on the wgmma loops alone (O3 otherwise), ptxas took 176 against 332 ms
# and the library built in 290 against 409 s, but 8192x8192x1024 ran 1.4-1.5% slower and 4096^3
# 0.3-0.5% (old and new cubins alternated in one process, 2026-12-02): not kept either.
TARGET = '#nvvm.target<chip = "sm_90a", features = "+ptx81", O = 3>'
GPU_MODULE = "tkc"
DYNAMIC = -1


def lower_module(module) -> None:
    """Lower every tk kernel of `module` (ir.Module or its operation) in place."""
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
    warps = kernel_warps(func_op)
    if warps is None or warps > 32:
        raise error(func_op, "tk.warps must be 1..32 (a block has at most 1024 threads), "
                             f"found {int_attr(func_op, 'tk.warps')}")
    grid = _attr(func_op, "tk.grid", None)
    grid = [ir.StringAttr(g).value for g in ir.ArrayAttr(grid)] if grid is not None else ["1"] * 3
    return warps, grid, arg_names(func_op)


def _param_types(func_op) -> list[ir.Type]:
    """The llvm.func parameters of docs/tile-ir.md's lowered form (a parallel
    gl adds its peers' pointers, the rank and the world size: peers.py)."""
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    out, parallel, strided = [], parallel_args(func_op), strided_args(func_op)
    for a in func_op.regions[0].blocks[0].arguments:
        v = view(a.type)
        if isinstance(v, GL):
            out.append(ir.Type.parse("!llvm.ptr<1>"))
            out += [i32] * sum(d == DYNAMIC for d in v.dims)
            if a.arg_number in strided:   # its b, d, r strides in elements
                out += [i64] * 3
            if a.arg_number in parallel:
                out += peers.param_types()
        elif v is None and str(a.type) in ("f32", "i32"):
            out.append(a.type)
        else:
            raise error(func_op, f"kernel argument {a.arg_number} must be a gl, f32 or i32, found {a.type}")
    return out


def _lower_kernel(func_op, gpu_module) -> None:
    warps, grid, names = _kernel_facts(func_op)
    plan = shared.plan(func_op)
    name = ir.StringAttr(func_op.attributes["sym_name"]).value
    maps = tma.plan(func_op, names)  # one parameter each, after the others
    first_map = len(_param_types(func_op))
    params = _param_types(func_op) + [ir.Type.parse("!llvm.ptr")] * len(maps)
    loc = func_op.location
    gbody = gpu_module.regions[0].blocks[0]
    with ir.InsertionPoint(gbody), loc:
        fty = ir.TypeAttr.get(ir.Type.parse(f"!llvm.func<void ({', '.join(map(str, params))})>"))
        lf = llvm.LLVMFuncOp(name, fty)
    lf.operation.attributes["nvvm.kernel"] = ir.UnitAttr.get()
    lf.operation.attributes["nvvm.maxntid"] = ir.DenseI32ArrayAttr.get([32 * warps, 1, 1])
    n = blocks_per_sm(func_op)
    if n > 1:  # ptxas keeps the registers to 65536 / (n * threads) a thread, so n blocks fit
        lf.operation.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), n)
    lf.operation.attributes["tkc.manifest"] = ir.StringAttr.get(
        json.dumps(_manifest(func_op, name, warps, grid, names, plan, maps)))
    _tensor_map_attrs(lf, first_map, len(maps))
    entry = lf.body.blocks.append(*params)
    body = lf.body.blocks.append()
    with ir.InsertionPoint(entry), loc:
        _grid_dependency()
        llvm.br([], body)
    lw = Lowering(func_op, lf, gpu_module, warps, plan)
    lw._entry = entry
    lw.tensor_maps = {m.key: entry.arguments[first_map + i] for i, m in enumerate(maps)}
    with lw.at_entry(), loc:
        _bind_params(lw, func_op, entry)
    _lower_block(lw, func_op.regions[0].blocks[0], body)


def _grid_dependency() -> None:
    """A kernel's first instructions: wait for the grid before it in the
    stream to complete (its memory visible), then let the grid after it
    launch. Launched with programmatic stream serialization (the runtime
    does, driver.launcher), the next kernel's blocks are then scheduled while
    this one's last blocks run, and reach their own wait with the launch
    latency behind them; launched without it, both are no-ops. Nothing
    precedes the wait, so no access can read what the grid before writes."""
    for action in ("wait", "launch_dependents"):
        llvm.inline_asm(None, [], f"griddepcontrol.{action};", "~{memory}",
                        has_side_effects=True)


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
    k, named, parallel, strided = 0, {}, parallel_args(func_op), strided_args(func_op)
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
            strides = None
            if a.arg_number in strided:
                strides = [arith.index_cast(ir.IndexType.get(), entry.arguments[k + i]) for i in range(3)]
                k += 3
            lw.values[a] = Global(v, ptr, dims, strides=strides)
            if a.arg_number in parallel:
                k = peers.bind(lw, a, entry.arguments, k)
        else:
            lw.values[a] = entry.arguments[k]
            k += 1


def _manifest(func_op, name, warps, grid, names, plan, maps=()) -> dict:
    return {"version": 1, "kernel": name, "target": "sm_90a", "warps": warps,
            "block": [32 * warps, 1, 1], "grid": grid,
            "shared_bytes": plan.total if plan is not None else 0,
            "cluster": list(cluster_shape(func_op)), "tensor_maps": [m.manifest() for m in maps],
            "params": params(func_op, names), "inplace": inplace(func_op),
            "multiples": multiples(func_op)}


# ---------------------------------------------------------------- ops and control flow

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
            out += _pack(low.vals, low.view) if packed(low.view) else low.vals
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
        if v is not None and packed(v):
            chunk = _unpack(chunk, v)
        out.append(Frag(v, chunk) if v is not None else chunk[0])
    assert k == len(flat)
    return out


def _pack(vals: list, v) -> list:
    """A tile's scalars as i32 words (registers.word_order: per_word of them
    a word, the first lowest)."""
    i32, n = ir.IntegerType.get_signless(32), per_word(v)
    vals = [vals[i] for i in word_order(v)]
    if n == 4:   # 8-bit: a cvt's pair stays a half-word (fp8.pack_bytes)
        return [pack_bytes(vals[k:k + 4]) for k in range(0, len(vals), 4)]
    out = []
    for k in range(0, len(vals), n):
        vec = llvm.mlir_undef(ir.VectorType.get([n], vals[k].type))
        for pos, e in enumerate(vals[k:k + n]):
            vec = llvm.insertelement(vec, e, arith.constant(i32, pos))
        out.append(llvm.bitcast(i32, vec))
    return out


def _unpack(words: list, v) -> list:
    """The inverse of _pack: the scalars in fragment order."""
    i32, n, t = ir.IntegerType.get_signless(32), per_word(v), scalar_type(v.dtype)
    flat = []
    for w in words:
        vec = llvm.bitcast(ir.VectorType.get([n], t), w)
        flat += [llvm.extractelement(vec, arith.constant(i32, pos)) for pos in range(n)]
    out = [None] * len(flat)
    for i, pos in enumerate(word_order(v)):
        out[pos] = flat[i]
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
