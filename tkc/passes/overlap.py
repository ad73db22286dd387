"""Overlapping a work item's finish with the next item's main loop (part of
tk-pipeline-staging; docs/pipelining.md).

After staging, a persistent consumer runs, per work item: its pipelined loop,
the drain (the last wgmma wait, the last release), then the finish: register
work on the accumulators (subtiles, conversions) and memory work (writes to
shared tiles, TMA stores, their waits). The tensor cores idle through the
finish: measured on the H100, the library GEMM at K = 1024 ran 598 TFLOP/s
with its finish and 679 without (bench/gemm_probe.py).

This rotates the memory work into the next item: the register part still
runs at the item's end, and its results (and the coordinates the stores use)
are carried to the next item, whose pipelined loop runs chunk j of the
memory work (a chunk ends with a store) in iteration j, right after issuing
that iteration's wgmma, so the stores overlap the tensor cores. Chunks the
next item's loop is too short for run after it; the last item's finish runs
after the work-item loop. The chunks keep their order, so the store waits
tk-pipeline-staging computed stay right.

It applies when the carried registers fit beside the accumulators (a bf16
finish: 64 words; an f32 one would need 128 more and is left in place). An
activation (tkc.linear's silu, tkc.swiglu's gating) is register work like a
conversion: it runs at the item's end, its bf16 results are carried (gelu's
erf is left in place: REGISTER_OPS).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from ..dialect import ops as tk
from ..dialect import walk
from ..dialect.types import RT, RV, view
from ..hopper.registers import flat_types
from .rewrite import add_iter_args, extend_yield, index, inside

# the register ops a finish may hold (its register part): views, conversions, element-wise
# math (silu, ...), broadcasts and reductions of register tiles; not erf and gelu (erf form),
# whose polynomial's temporaries beside the carried tiles spill (H200 build, 2026-11-30:
# the 128x192 and swapped 192x128 linear gelu+preact tiles, 52-60 B each)
HEAVY = ("erf", "gelu")
REGISTER_OPS = tuple(f"tk.{n}" for n in ("subtile", "swap_layout", "transpose", *tk.UNARY, *tk.BINARY,
                                         *tk.BROADCAST, *tk.REDUCE, *tk.PICK) if n not in HEAVY)
WGMMA = ("tk.warpgroup_mma_ab", "tk.warpgroup_mma_abt", "tk.warpgroup_mma_atb",
         "tk.warpgroup_mma_atbt")


def overlap_finish(items, loop, drain: list, budget_words: int):
    """Rotate the finish of the consumer work-item loop `items` into its
    pipelined `loop` (module doc). `drain`: the ops after the loop that end
    it (the last wait and release). Returns the new work-item loop, or None
    when it does not apply (nothing to rotate, or too many registers)."""
    body = items.regions[0].blocks[0]
    tops = [o.operation for o in body.operations]
    after = [o for o in tops[tops.index(loop) + 1:-1] if o not in drain]
    registers = [o for o in after if _register_op(o)]
    _own_constants(registers, after)
    tops = [o.operation for o in body.operations]
    after = [o for o in tops[tops.index(loop) + 1:-1] if o not in drain]
    registers = [o for o in after if _register_op(o) or _feeds_only(o, registers)]
    memory = [o for o in after if o not in registers]
    chunks = _chunks(memory)
    if not chunks or not _stores_in(memory):
        return None
    if any(o.name in ("tk.signal", "tk.wait_signal") for op in memory for o in [op, *walk(op)]):
        return None  # a flag op must not wait for the next item (a peer may wait on it first)
    made_in_memory = {r for o in memory for r in o.results}
    if any(v in made_in_memory for o in registers for v in o.operands):
        return None  # the register part reads the memory part: no reordering
    if _crosses(chunks):
        return None  # a chunk reads another's values: they run in different places
    carried = _carried(memory, body, made_in_memory)
    if not all(isinstance(view(v.type), (RT, RV)) or _scalar(v.type) for v in carried):
        return None  # only tiles and scalars ride in iter_args (not a gl slice the item made, say)
    if sum(_words(v) for v in carried) > budget_words:
        return None
    with ir.InsertionPoint(items), items.location:
        inits = [_placeholder(v) for v in carried] + [arith.constant(ir.IntegerType.get_signless(1), 0)]
    new = add_iter_args(items, inits)
    args = list(new.body.arguments)[-len(inits):]
    in_item = dict(zip(carried, args[:-1]))
    has_prev = args[-1]
    extend_yield(new, carried + [_true(new)])
    _in_loop(loop, chunks, in_item, has_prev)
    _leftovers(loop, drain, chunks, in_item, has_prev)
    after_loop = dict(zip(carried, list(new.results)[-len(inits):-1]))
    _final(new, chunks, after_loop, list(new.results)[-1])
    for o in reversed(memory):
        o.erase()
    return new


def loop_accumulators(loop) -> int:
    """Registers of the wgmma accumulators that `loop`'s body starts itself
    (a promoted GEMM's partial tile, attention's scores): they are live in
    the loop beside its iter args, so the carried tiles must fit beside
    both (the 192-row FP8 tiles, counted by iter args alone, carried 35
    words into a loop holding 128: 340 bytes of spills, 2.3x slower)."""
    args, roots = set(loop.regions[0].blocks[0].arguments), set()
    for o in walk(loop):
        if o.name in WGMMA:
            v = o.operands[-1]   # the accumulator: back through the chain to its start
            while isinstance(v, ir.OpResult):
                owner = v.owner.operation if hasattr(v.owner, "operation") else v.owner
                if owner.name not in (*WGMMA, "tk.warpgroup_mma_wait"):
                    break
                v = owner.operands[-1 if owner.name in WGMMA else v.result_number]
            if v not in args:
                roots.add(v)
    return sum(len(flat_types(v.type)) for v in roots)


def _own_constants(registers, after) -> None:
    """Give the register part its own copies of the constants it reads (a
    subtile's indices), so constants the memory part also uses can move."""
    for op in registers:
        for i, v in enumerate(op.operands):
            owner = v.owner.operation if hasattr(v.owner, "operation") else None
            if owner is not None and owner.name == "arith.constant" and owner in after:
                with ir.InsertionPoint(op), op.location:
                    op.operands[i] = owner.clone().results[0]


def _feeds_only(op, registers) -> bool:
    """A constant whose every use is by the register part."""
    uses = [u.owner.operation if hasattr(u.owner, "operation") else u.owner
            for r in op.results for u in r.uses]
    return op.name == "arith.constant" and bool(uses) and all(u in registers for u in uses)


def _crosses(chunks) -> bool:
    made = [{r for o in chunk for r in _all_results(o)} for chunk in chunks]
    return any(v in made[i] for j, chunk in enumerate(chunks) for op in chunk
               for o in [op, *walk(op)] for v in o.operands for i in range(len(chunks)) if i != j)


def _register_op(op) -> bool:
    return op.name in REGISTER_OPS and all(isinstance(view(r.type), (RT, RV)) for r in op.results)


def _stores_in(ops) -> bool:
    return any(o.name == "tk.tma_store" for op in ops for o in [op, *walk(op)])


def _chunks(memory) -> list:
    """The memory ops split after each op that issues a TMA store."""
    chunks, cur = [], []
    for op in memory:
        cur.append(op)
        if _stores_in([op]):
            chunks.append(cur)
            cur = []
    if cur and chunks:
        chunks[-1] += cur
    return chunks


def _carried(memory, body, made_in_memory) -> list:
    """Values the memory part uses that the work item defines (its results
    in the register part, its coordinates): carried to the next item."""
    out, seen = [], set()
    mine = {r for o in body.operations for r in _all_results(o.operation)} | set(body.arguments)
    for op in memory:
        for o in [op, *walk(op)]:
            for v in o.operands:
                if v in mine and v not in made_in_memory and v not in seen and not _defined_in(v, op):
                    seen.add(v)
                    out.append(v)
    return out


def _all_results(op):
    yield from op.results
    for o in walk(op):
        yield from o.results


def _defined_in(value, op) -> bool:
    owner = value.owner
    owner = owner.operation if hasattr(owner, "operation") else None
    return owner is not None and inside(owner, op)


def _scalar(t) -> bool:
    return isinstance(t, (ir.IndexType, ir.IntegerType, ir.F32Type))


def _words(value) -> int:
    """32-bit registers a carried value takes (16-bit pairs packed)."""
    v = view(value.type)
    if isinstance(v, (RT, RV)):
        return len(flat_types(value.type))
    return 1


def _placeholder(value):
    """The carried value before the first item (never used: has_prev is false)."""
    if isinstance(view(value.type), (RT, RV)):
        return tk.init("zero", value.type)
    return arith.constant(value.type, 0)


def _true(loop):
    y = list(loop.body.operations)[-1].operation
    with ir.InsertionPoint(y), y.location:
        return arith.constant(ir.IntegerType.get_signless(1), 1)


def _clone(ops, mapping: dict) -> None:
    """Clone ops at the insertion point, every operand (nested ones too)
    through mapping, results into it."""
    for op in ops:
        new = op.clone()
        for o in [new, *walk(new)]:
            for i, v in enumerate(o.operands):
                if v in mapping:
                    o.operands[i] = mapping[v]
        for r, nr in zip(_all_results(op), _all_results(new)):
            mapping[r] = nr


def _guarded(cond, ops, mapping) -> None:
    branch = scf.IfOp(cond, [], has_else=False)
    with ir.InsertionPoint(branch.then_block):
        y = scf.YieldOp([])
    with ir.InsertionPoint(y):
        _clone(ops, dict(mapping))


def _in_loop(loop, chunks, mapping, has_prev) -> None:
    """Chunk j in iteration j of the loop, right after its wgmma issue."""
    f = loop.opview
    ops = [o.operation for o in f.body.operations]
    last = max(i for i, o in enumerate(ops) if o.name in WGMMA)
    with ir.InsertionPoint(ops[last + 1]), loop.location:
        for j, chunk in enumerate(chunks):
            k = arith.addi(f.lowerBound, arith.muli(f.step, index(j)))
            at_j = arith.cmpi(arith.CmpIPredicate.eq, f.induction_variable, k)
            _guarded(arith.andi(has_prev, at_j), chunk, mapping)


def _leftovers(loop, drain, chunks, mapping, has_prev) -> None:
    """Chunks the loop had no iteration for (trip count <= j), after it."""
    f = loop.opview
    with ir.InsertionPoint(_next(drain[-1] if drain else loop)), loop.location:
        trips = arith.ceildivsi(arith.subi(f.upperBound, f.lowerBound), f.step)
        for j, chunk in enumerate(chunks):
            short = arith.cmpi(arith.CmpIPredicate.sle, trips, index(j))
            _guarded(arith.andi(has_prev, short), chunk, mapping)


def _final(items, chunks, mapping, has_prev) -> None:
    """The last item's finish, after the work-item loop."""
    with ir.InsertionPoint(_next(items.operation)), items.location:
        _guarded(has_prev, [op for chunk in chunks for op in chunk], mapping)


def _next(op):
    """The op after `op` in its block."""
    parent = op.parent
    for region in parent.regions:
        for block in region.blocks:
            ops = [o.operation for o in block.operations]
            if op in ops:
                return ops[ops.index(op) + 1]
    raise ValueError("op not in its parent")
