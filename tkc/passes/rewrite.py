"""IR surgery shared by the block- and grid-level passes (needs MLIR).

Small, general tools: find a kernel's pieces, build index arithmetic, emit a
grid-language expression as IR, clone the pure scalar computation a value
depends on, and give an scf.for one more loop-carried value.
"""
from __future__ import annotations

import ast

from mlir import ir
from mlir.dialects import arith, scf

from ..diagnostics import error, where
from ..dialect import is_index_load  # an i32 gl is only read: as pure as its argument
from ..dialect import ops as tk
from ..dialect.kernel import arg_names


def kernels(module_op) -> list:
    """The tk kernel functions of a module."""
    body = module_op.regions[0].blocks[0]
    return [op.operation for op in body.operations
            if op.operation.name == "func.func" and "tk.kernel" in op.operation.attributes]


def entry(fn):
    return fn.regions[0].blocks[0]


def grid_of(fn) -> list[str]:
    if "tk.grid" not in fn.attributes:
        return ["1", "1", "1"]
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(fn.attributes["tk.grid"])]


def strings(xs) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.StringAttr.get(x) for x in xs])


def i64(n: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n)


def index(n: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), n)


def is_prologue(op) -> bool:
    """Shared allocations and barrier inits: kernel-wide, done once per block."""
    return op.name in ("tk.alloc", "tk.init_barrier")


def hoist_prologue(fn):
    """Move every alloc and barrier init of the entry block before the other
    ops (they have no operands but allocs), and return the first other op."""
    ops = [o.operation for o in entry(fn).operations]
    rest = [o for o in ops if not is_prologue(o)]
    for o in ops:
        if is_prologue(o):
            o.move_before(rest[0])
    return rest[0]


def _one(x) -> bool:
    return isinstance(x, int) and x == 1


class IRArith:
    """orders.decode's arithmetic on index Values (at the insertion point)."""

    @staticmethod
    def _v(x):
        return index(x) if isinstance(x, int) else x

    @classmethod
    def add(cls, a, b):
        return arith.addi(cls._v(a), cls._v(b))

    @classmethod
    def sub(cls, a, b):
        return arith.subi(cls._v(a), cls._v(b))

    @classmethod
    def mul(cls, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if _one(a) or _one(b):  # (x, y, z) spaces are often (X, Y, 1)
            return b if _one(a) else a
        return arith.muli(cls._v(a), cls._v(b))

    @classmethod
    def div(cls, a, b):
        return a if _one(b) else arith.divui(cls._v(a), cls._v(b))

    @classmethod
    def rem(cls, a, b):
        return 0 if _one(b) else arith.remui(cls._v(a), cls._v(b))

    @classmethod
    def min(cls, a, b):
        return arith.minui(cls._v(a), cls._v(b))


# ---------------------------------------------------------------- grid expressions

_BIN = {ast.Add: arith.addi, ast.Sub: arith.subi, ast.Mult: arith.muli,
        ast.FloorDiv: arith.floordivsi, ast.Mod: arith.remsi}
_CALL = {"cdiv": arith.ceildivsi, "min": arith.minsi, "max": arith.maxsi,
         "whole": arith.divsi}   # (the launch checks the division is exact: runtime/grid.py)


def emit_grid_expr(fn, text: str) -> ir.Value:
    """A grid-language expression (runtime/grid.py) as index arithmetic over
    the kernel's arguments: `a.r` is tk.dim, an i32 scalar is index_cast."""
    args = list(entry(fn).arguments)
    by_name = dict(zip(arg_names(fn), args))

    def build(node):
        if isinstance(node, ast.Constant):
            return index(node.value)
        if isinstance(node, ast.Attribute):
            return tk.dim(by_name[node.value.id], node.attr)
        if isinstance(node, ast.Name):
            return arith.index_cast(ir.IndexType.get(), by_name[node.id])
        if isinstance(node, ast.BinOp):
            return _BIN[type(node.op)](build(node.left), build(node.right))
        if isinstance(node, ast.UnaryOp):
            return arith.subi(index(0), build(node.operand))
        if isinstance(node, ast.Call):
            return _CALL[node.func.id](build(node.args[0]), build(node.args[1]))
        raise error(fn, f"grid expression '{text}': cannot emit '{ast.unparse(node)}'")

    return build(ast.parse(text.strip(), mode="eval").body)


# ---------------------------------------------------------------- slices

# Ops whose value depends only on their operands and the block's identity:
# the producer may recompute them (tk.ragged_item reads the count gl, which
# the kernel does not write: tk.ragged's rule).
PURE_TK = ("tk.block_idx", "tk.grid_dim", "tk.dim", "tk.gl_slice", "tk.rank", "tk.world_size", "tk.peer",
           "tk.ragged_item")
WARP_IDS = ("tk.warpid", "tk.laneid", "tk.warpgroupid")


def defining_op(value):
    owner = value.owner
    return owner.operation if isinstance(owner, ir.OpView) else \
        owner if isinstance(owner, ir.Operation) else None


def backward_slice(values, stop) -> list:
    """The ops computing `values`, in program order, down to block arguments
    or values for which stop(value) is true. Raises ValueError(op, why) when
    an op on the way is not pure scalar arithmetic."""
    seen, order = set(), []

    def visit(v):
        if stop(v):
            return
        op = defining_op(v)
        if op is None:
            raise ValueError((None, f"a block argument ({v.get_name()}) of a loop or branch"))
        if op in seen:
            return
        if op.name in WARP_IDS:
            raise ValueError((op, "the warp's identity (the producer warp issues every load)"))
        if not (op.name.startswith(("arith.", "index.")) or op.name in PURE_TK
                or is_index_load(op)) or len(op.regions):
            raise ValueError((op, f"{op.name}, which is not index arithmetic"))
        seen.add(op)
        for x in op.operands:
            visit(x)
        order.append(op)

    for v in values:
        visit(v)
    return order


def clone_ops(ops, mapping: dict) -> None:
    """Clone ops (in order) at the insertion point, operands through and
    results into `mapping` (Value -> Value)."""
    for op in ops:
        new = op.clone()
        for i, v in enumerate(op.operands):
            if v in mapping:
                new.operands[i] = mapping[v]
        for r, nr in zip(op.results, new.results):
            mapping[r] = nr


def mapped(mapping: dict, values) -> list:
    return [mapping.get(v, v) for v in values]


# ---------------------------------------------------------------- loops

def add_iter_args(loop, inits: list):
    """A copy of scf.for `loop` with `inits` appended to its iter_args (the
    body moved over; the new block arguments are the last ones, and the old
    yield is kept for the caller to extend). Returns the new loop; `loop` is
    erased and its results' uses moved to the new loop's first results."""
    loop = loop.operation
    old = loop.opview
    with ir.InsertionPoint(loop), loop.location:
        new = scf.ForOp(old.lowerBound, old.upperBound, old.step,
                        list(old.initArgs) + list(inits))
    for name in ("tk.pipeline", "tk.work_items", "tk.staged"):
        if name in loop.attributes:
            new.operation.attributes[name] = loop.attributes[name]
    old_args = list(old.body.arguments)
    new_args = list(new.body.arguments)
    for a, b in zip(old_args, new_args):
        a.replace_all_uses_with(b)
    for op in list(old.body.operations):
        new.body.append(op.operation)
    for r, nr in zip(loop.results, new.results):
        r.replace_all_uses_with(nr)
    loop.erase()
    return new


def extend_yield(loop, values) -> None:
    """Append values to the body's scf.yield."""
    y = list(loop.body.operations)[-1].operation
    with ir.InsertionPoint(y), y.location:
        scf.YieldOp(list(y.operands) + list(values))
    y.erase()


def uses_in(value, region_op) -> list:
    """The (op, operand number) uses of value nested inside region_op."""
    out = []
    for u in value.uses:
        o = u.owner
        o = o.operation if hasattr(o, "operation") else o
        if inside(o, region_op):
            out.append((o, u.operand_number))
    return out


def inside(op, ancestor) -> bool:
    """Whether op is ancestor or nested in it."""
    while op is not None:
        if op == ancestor:
            return True
        parent = op.parent
        op = parent.operation if parent is not None else None
    return False


def located(op) -> str:
    w = where(op) if op is not None else ""
    return f" ({w})" if w else ""

