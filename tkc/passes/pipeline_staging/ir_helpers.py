"""tk-pipeline-staging's IR helpers: where things are (a value's alloc and
root tile, an op's block and neighbours, the shared tiles an op writes), the
producer's copy of a computation (`recompute`), and two small builders (an
scf.if without results, the tk.staged attribute).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from ...diagnostics import error, where
from ...dialect import gl_root, is_index_load, walk
from ...dialect import ops as tk
from ...dialect.attrs import alloc_stages
from ...dialect.types import ST, view
from ...dtypes import itemsize
from ..rewrite import backward_slice, clone_ops, i64, located

SHARED_WRITES = ("tk.store", "tk.group_load", "tk.tma_load", "tk.pipeline_load")
# The ops that only read a gl operand; any other op with one may write it (tk.ragged_item
# reads the groups' counts, which a kernel may also load: a tile's rows from an expert's count).
GL_READS = ("tk.load", "tk.load_split", "tk.group_load", "tk.pipeline_load", "tk.tma_load",
            "tk.tma_prefetch", "tk.dim", "tk.gl_slice", "tk.ragged_item")


def recompute(mapping, values, op, varying=None) -> list:
    """values as the producer sees them: their pure computation cloned here.
    With `varying` (a loop variable), only the part that does not depend on
    it is cloned (hoisted out of that loop)."""
    try:
        ops = backward_slice(values, stop=lambda v: v in mapping or (varying is not None and v == varying))
    except ValueError as e:
        culprit, why = e.args[0]
        raise error(op, "the producer cannot compute this load's coordinates or loop bounds: "
                        f"they depend on {why}{located(culprit)}") from None
    if varying is not None:
        ops = [o for o in ops if not depends(o, varying, ops)]
    for o in ops:
        if is_index_load(o):
            _unwritten(o)
    clone_ops(ops, mapping)
    return [mapping.get(v) for v in values]


def _unwritten(load) -> None:
    """The producer re-reads an index (an i32 gl element) ahead of the
    consumers, hoisted out of its loop where it can be: right only when the
    kernel never writes that gl (a pure read of memory nobody changes)."""
    fn = load
    while fn.name != "func.func":
        fn = fn.parent.operation if hasattr(fn.parent, "operation") else fn.parent
    table = gl_root(load.operands[0])[0]
    for o in walk(fn):
        if o.name not in GL_READS and any(str(v.type).startswith("!tk.gl<") and gl_root(v)[0] == table
                                          for v in o.operands):
            raise error(load, "the producer cannot compute this load's coordinates: they depend on "
                              "an index it would read ahead of the consumers, from a gl the kernel "
                              f"also writes (at {where(o)}): read indices from a gl the kernel "
                              "only reads")


def remake_view(dst, base, mapping, op):
    """dst, a shared tile or a subtile (of a subtile ...) of one, remade over
    `base` (the tile's slot), its coordinates as the producer computes them."""
    chain = []
    while getattr(alloc_of(dst), "name", "") == "tk.subtile":
        chain.append(alloc_of(dst))
        dst = chain[-1].operands[0]
    for sub in reversed(chain):
        i, j = recompute(mapping, list(sub.operands)[1:3], op)
        base = tk.subtile(sub.results[0].type, base, i, j)
    return base


def depends(op, value, among) -> bool:
    """Whether op's result depends on `value` through the ops `among`."""
    producers = {r: o for o in among for r in o.results}
    todo, seen = list(op.operands), set()
    while todo:
        v = todo.pop()
        if v == value:
            return True
        o = producers.get(v)
        if o is not None and o not in seen:
            seen.add(o)
            todo.extend(o.operands)
    return False


def for_view(op):
    """The scf.ForOp view of an scf.for Operation."""
    return op.opview if hasattr(op, "opview") else op


def alloc_of(value):
    owner = value.owner
    return owner.operation if hasattr(owner, "operation") else owner


def stages_of(alloc) -> int:
    return alloc_stages(alloc)


def terminator(block):
    return list(block.operations)[-1].operation


def next_op(op):
    ops = [o.operation for o in block_of(op).operations]
    return ops[ops.index(op) + 1]


def prev_op(op):
    """The op before `op` in its block, or None."""
    ops = [o.operation for o in block_of(op).operations]
    i = ops.index(op)
    return ops[i - 1] if i else None


def block_of(op):
    parent = op.parent
    for region in parent.regions:
        for block in region.blocks:
            if any(o.operation == op for o in block.operations):
                return block
    raise ValueError("op not found in its parent")


class if_then:
    """`with if_then(cond):` builds an scf.if without results at the insertion point."""

    def __init__(self, cond):
        self.cond = cond

    def __enter__(self):
        self.op = scf.IfOp(self.cond, [], has_else=False)
        self.ip = ir.InsertionPoint(self.op.then_block)
        self.ip.__enter__()
        return self.op

    def __exit__(self, *exc):
        if exc[0] is None:
            scf.YieldOp([])
        self.ip.__exit__(*exc)
        return False


def staged_attr(stages: int, role: str):
    return ir.DictAttr.get({"stages": i64(stages), "role": ir.StringAttr.get(role)})


def walk_block(block):
    for op in block.operations:
        op = op.operation
        yield op
        yield from walk(op)


def gl_arg(value):
    """The kernel argument a gl value is (a slice of)."""
    while getattr(alloc_of(value), "name", "") == "tk.gl_slice":
        value = alloc_of(value).operands[0]
    return value


def root_alloc(value):
    """The tk.alloc a shared value is a slot or view of."""
    while True:
        owner = alloc_of(value)
        if getattr(owner, "name", "") in ("tk.subtile", "tk.stage"):
            value = owner.operands[0]
        else:
            return value


def ring_root(dst):
    """The tile a pipelined load's destination is, or is a subtile of."""
    while getattr(alloc_of(dst), "name", "") == "tk.subtile":
        dst = alloc_of(dst).operands[0]
    return dst


def written_allocs(op) -> set:
    """The allocs (roots) op writes, with everything nested in it."""
    out = set()
    for o in [op, *walk(op)]:
        if o.name in SHARED_WRITES and isinstance(view(o.operands[0].type), ST):
            out.add(root_alloc(o.operands[0]))
    return out


def tile_bytes(t) -> int:
    return t.rows * t.cols * itemsize(t.dtype)


def ring_mod(it, n: int):
    """it % n for a ring counter `it` (index). A stage count that is not a
    power of two divides in 32 bits: in 64 (index) every step paid a
    multiply-high chain, ~20 SASS instructions in each of the producer and
    consumer loops (scaled_mm_blockwise's five stages), where 32 take a few.
    A ring counter never nears 2^32."""
    if n & (n - 1) == 0:   # a mask either way
        return arith.remui(it, _index(n))
    return _narrow(it, n, arith.remui)


def ring_div(it, n: int):
    """it // n for a ring counter (see ring_mod)."""
    if n & (n - 1) == 0:   # a shift either way
        return arith.divui(it, _index(n))
    return _narrow(it, n, arith.divui)


def _narrow(it, n: int, op):
    i32 = ir.IntegerType.get_signless(32)
    return arith.index_castui(ir.IndexType.get(), op(arith.index_castui(i32, it), arith.constant(i32, n)))


def _index(n: int):
    return arith.constant(ir.IndexType.get(), n)


def span(axes: tuple, cluster: tuple) -> int:
    """The CTAs a tile shared along `axes` ("x", "y") is sliced among."""
    return (cluster[0] if "x" in axes else 1) * (cluster[1] if "y" in axes else 1)


def sharers(shared: set, cluster: tuple) -> str:
    """Which CTAs of a (cx, cy) cluster the tiles shared along each of
    `shared` (a set of axes tuples) pass between: a CTA's "row" where all are
    shared along x only, its "column" where along y only, else the whole
    "cluster" (also where the row or column is the whole cluster)."""
    cx, cy = cluster
    if shared == {("x",)} and cy > 1:
        return "row"
    if shared == {("y",)} and cx > 1:
        return "column"
    return "cluster"
