"""The tk dialect: defined once in IRDL (tk.irdl.mlir), loaded into Contexts.

types.py holds the typed views of its types, ops.py the builders of its ops,
attrs.py and kernel.py one typed reader per attribute (of ops, of kernel
functions): everything above reads the IR through these.

MLIR is imported lazily so that `import tkc` works on a machine without it
(the GPU runner only needs the runtime).
"""
from __future__ import annotations

from pathlib import Path

IRDL_FILE = Path(__file__).with_name("tk.irdl.mlir")

_LOADED = "_tkc_tk_loaded"


def load(ctx) -> None:
    """Register the tk dialect in `ctx` (idempotent)."""
    _python_module()
    if getattr(ctx, _LOADED, False) or _has_tk(ctx):
        return
    from mlir import ir
    from mlir.dialects import irdl
    module = ir.Module.parse(IRDL_FILE.read_text(), ctx)
    irdl.load_dialects(module)
    try:
        setattr(ctx, _LOADED, True)
    except AttributeError:  # nanobind objects may refuse new attributes
        pass


def _python_module() -> None:
    """An (empty) module mlir.dialects.tk. MLIR's bindings look for a Python
    module of every dialect whose ops they wrap and remember only the ones
    they find: without it each tk op looked up mlir.dialects.tk again, and
    missed (20,104 imports while Based compiles: 3.7 s of profiled build
    against 1.7 s with the module there)."""
    import sys
    import types
    name = "mlir.dialects.tk"
    if name not in sys.modules:
        sys.modules[name] = types.ModuleType(name, "tk ops have no Python op classes: tkc.dialect")


def _has_tk(ctx) -> bool:
    from mlir import ir
    try:
        ir.Type.parse("!tk.barrier", ctx)
        return True
    except Exception:
        return False


_CONTEXT: dict[int, object] = {}  # process id -> its Context


def context():
    """The process's Context, with the tk dialect loaded and the upstream ones
    available. One a process, shared by every module it traces or parses: a
    new one costs 10 ms (every upstream dialect loaded, tk's IRDL parsed),
    which was a fifth of the fuzzer's time per program. Keyed by the process
    id: a child forked by `tkc build -j` makes its own (the parent's thread
    pool does not survive the fork)."""
    import os
    pid = os.getpid()
    ctx = _CONTEXT.get(pid)
    if ctx is None:
        from mlir import ir
        ctx = ir.Context()
        load(ctx)
        _CONTEXT[pid] = ctx  # (a parent's stays: destroying it would join threads it lacks)
    return ctx


def gl_root(value) -> tuple:
    """(the kernel argument a gl value views, the axes sliced on the way):
    a gl value is an argument, a tk.gl_slice of one or a tk.peer of one (a
    peer's buffer has the argument's shape, so what the argument requires
    it requires)."""
    sliced = set()
    while True:
        owner = _owner(value)
        name = getattr(owner, "name", "")
        if name == "tk.peer":
            value = owner.operands[0]
            continue
        if name != "tk.gl_slice":
            return value, sliced
        sliced.add(owner.attributes["axis"].value)
        value = owner.operands[0]


def peer_of(value):
    """The tk.peer op a gl value is (or slices), else None: the local buffer."""
    while True:
        owner = _owner(value)
        name = getattr(owner, "name", "")
        if name == "tk.peer":
            return owner
        if name != "tk.gl_slice":
            return None
        value = owner.operands[0]


def _owner(value):
    owner = value.owner
    return owner.operation if hasattr(owner, "operation") else owner


def is_index_load(op) -> bool:
    """A one-element load of an i32 or i64 gl: an index (a cumulative sequence offset)."""
    return op.name == "tk.load" and str(op.results[0].type) in ("i32", "i64")


def walk(op):
    """Every operation nested in `op` (not `op` itself), in pre-order.

    A stack of the open ops' children, not recursion: a recursive generator
    makes a generator per op and passes each op up through every enclosing
    one (3x slower; the passes and the lowering walk ~10,000 ops a kernel)."""
    stack = [_children(op)]
    while stack:
        for inner in stack[-1]:
            yield inner
            if len(inner.regions):
                stack.append(_children(inner))
                break
        else:
            stack.pop()


def _children(op):
    return (inner.operation for region in op.regions for block in region.blocks
            for inner in block.operations)
