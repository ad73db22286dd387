"""Trace a Kernel into a tile-IR module (needs MLIR; imported only to trace).

The module holds one `func.func` with the kernel attributes of
docs/tile-ir.md: tk.kernel, tk.warps, tk.grid, tk.arg_names, tk.dim_names and tk.divisible
when a gl annotation names a dim. Arguments become handles: gl -> GLHandle,
f32 -> F32, i32 -> Index (index_cast at entry, since i32 arguments size loops
and coordinates).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from .. import dialect
from ..diagnostics import TkcError
from . import emit, trace
from .tiles import GLHandle, PGLSpec
from .values import F32, Index


def _arg_type(p):
    if p.kind == "gl":
        return p.spec.view().mlir()
    return emit.mlir_type(p.dtype)


def _attributes(kernel) -> dict:
    i64 = ir.IntegerType.get_signless(64)
    strs = lambda xs: ir.ArrayAttr.get([ir.StringAttr.get(x) for x in xs])  # noqa: E731
    attrs = {"tk.kernel": ir.UnitAttr.get(), "tk.warps": ir.IntegerAttr.get(i64, kernel.warps),
             "tk.grid": strs(kernel.grid()), "tk.arg_names": strs(list(kernel.params))}
    if kernel.order is not None:
        attrs["tk.order"] = ir.StringAttr.get(kernel.order)
    if kernel.persistent:
        attrs["tk.persistent"] = (ir.StringAttr.get(kernel.persistent) if isinstance(kernel.persistent, str)
                                  else ir.UnitAttr.get())
    if kernel.ragged:
        attrs["tk.ragged"] = ir.DictAttr.get({"count": ir.StringAttr.get(kernel.ragged[0]),
                                              "rows": ir.IntegerAttr.get(i64, kernel.ragged[1])})
    if kernel.blocks_per_sm > 1:
        attrs["tk.blocks_per_sm"] = ir.IntegerAttr.get(i64, kernel.blocks_per_sm)
    if kernel.cluster != (1, 1, 1):
        attrs["tk.cluster"] = ir.DenseI64ArrayAttr.get(list(kernel.cluster))
    if kernel.uniform_ids:
        attrs["tk.uniform_ids"] = ir.StringAttr.get(kernel.uniform_ids)
    if kernel.inplace:
        attrs["tk.inplace"] = ir.ArrayAttr.get([strs(pair) for pair in kernel.inplace.items()])
    peers = [i for i, p in enumerate(kernel.params.values()) if isinstance(p.spec, PGLSpec)]
    if peers:  # the parallel gls (docs/multi-gpu.md)
        attrs["tk.peers"] = ir.DenseI64ArrayAttr.get(peers)
    strided = [i for i, p in enumerate(kernel.params.values()) if p.kind == "gl" and p.spec.strided]
    if strided:  # gls whose b, d, r strides are run-time parameters
        attrs["tk.strided"] = ir.DenseI64ArrayAttr.get(strided)
    names = [p.spec.names if p.kind == "gl" else () for p in kernel.params.values()]
    if any(n for dims in names for n in dims):  # only then: keeps unnamed kernels' IR short
        attrs["tk.dim_names"] = ir.ArrayAttr.get([strs(dims) for dims in names])
    return attrs


def _divisible_attr(kernel, traced: dict):
    """tk.divisible: the author's divisible= (by dim name) and the whole-tile
    loops the trace saw ("a.c" keys); None when there are none."""
    from math import lcm
    merged = dict(kernel.divisible)
    for ref, n in traced.items():
        merged[ref] = lcm(merged.get(ref, 1), n)  # "a.c" keys: never a relation's
    if not merged:
        return None
    i64 = ir.IntegerType.get_signless(64)
    return ir.DictAttr.get({k: ir.StringAttr.get(v) if isinstance(v, str) else ir.IntegerAttr.get(i64, v)
                            for k, v in sorted(merged.items())})


def _handles(params, args):
    out = []
    for p, a in zip(params, args):
        if p.kind == "gl":
            out.append(GLHandle(p.spec, a, p.name))
        elif p.dtype == "f32":
            out.append(F32(a))
        else:
            out.append(Index(emit.index_cast(a)))
    return out


def trace_kernel(kernel) -> ir.Module:
    params = list(kernel.params.values())
    code = kernel.fn.__code__
    ctx = dialect.context()
    with ctx, ir.Location.file(code.co_filename, code.co_firstlineno, 1):
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            f = func.FuncOp(kernel.name, ir.FunctionType.get([_arg_type(p) for p in params], []))
        for k, v in _attributes(kernel).items():
            f.attributes[k] = v
        entry = f.add_entry_block()
        state = trace.TraceState(ctx, module, f, entry, kernel.warps)
        state.cluster = kernel.cluster
        state.has_pgl = any(isinstance(p.spec, PGLSpec) for p in params)
        with trace.active(state):
            with ir.InsertionPoint(entry):
                handles = _handles(params, entry.arguments)
            result = kernel.fn(*handles)
            if result is not None:
                raise TkcError(f"kernel {kernel.name} must not return a value (write outputs "
                               "with store/group_store)", f"{code.co_filename}:{code.co_firstlineno}:1")
            state.flush()
            with ir.InsertionPoint(entry):
                func.ReturnOp([])
        divisible = _divisible_attr(kernel, state.divisible)
        if divisible is not None:
            f.attributes["tk.divisible"] = divisible
    _verify(module, kernel)
    return module


def _verify(module, kernel) -> None:
    """IRDL and scf structure; a failure here is a frontend bug, reported located."""
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        raise TkcError(f"internal error: traced IR of {kernel.name} does not verify: {e}") from e
