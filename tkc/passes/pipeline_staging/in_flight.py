"""Warpgroup mmas in flight: when a ring slot may be released.

An iteration's wgmma may still read its slot after the body ends. These
functions find the mmas a body leaves in flight, relax the body's final wait
where the mmas only feed the next iteration's (`relax_wgmma`), or find the
later wait that retires them (`held_until`: Mosaic GPU's delayed release),
and where a once-loaded tile is free again (`after_last_read`).
"""
from __future__ import annotations

from mlir import ir

from ...diagnostics import error
from ...dialect import walk
from ...dialect.types import ST, view
from ..rewrite import i64
from .ir_helpers import root_alloc, terminator

WGMMA = ("tk.warpgroup_mma_ab", "tk.warpgroup_mma_abt", "tk.warpgroup_mma_atb",
         "tk.warpgroup_mma_atbt")


def relax_wgmma(body):
    """The body's final wait, relaxed to keep this iteration's wgmma groups in
    flight, when every mma only feeds the next iteration's mmas and reads A
    from shared memory (else None). An A in registers must not: a wgmma reads
    its A registers until a wait retires it (PTX: writing them before is
    undefined), and the next iteration's A is made while this one's is in
    flight, where ptxas may reuse the registers (a GEMM with A loaded into
    registers each step gave wrong products on the H200 this way)."""
    tops = [o.operation for o in body.operations]
    mmas = [o for o in tops if o.name in WGMMA]
    waits = [o for o in tops if o.name == "tk.warpgroup_mma_wait"]
    nested = [o for t in tops for o in walk(t) if o.name in WGMMA + ("tk.warpgroup_mma_wait",)]
    if not mmas or len(waits) != 1 or nested:
        return None
    if any(not isinstance(view(m.operands[0].type), ST) for m in mmas):
        return None
    wait = waits[0]
    if _pending(wait) != 0 or tops.index(wait) < tops.index(mmas[-1]):
        return None
    y = tops[-1]
    results = {r for m in mmas for r in m.results}
    for m in mmas:
        for u in m.results[0].uses:
            user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
            if not (user == wait or (user.name in WGMMA and u.operand_number == 2)):
                return None
    if set(wait.operands) - results:
        return None
    args = list(body.arguments)
    for r in wait.results:
        for u in r.uses:
            user = u.owner.operation if hasattr(u.owner, "operation") else u.owner
            if user != y:
                return None
            arg = args[1 + u.operand_number]
            for au in arg.uses:
                au_user = au.owner.operation if hasattr(au.owner, "operation") else au.owner
                if not (au_user.name in WGMMA and au.operand_number == 2 and au_user in mmas):
                    return None
    wait.attributes["pending"] = i64(len(mmas))
    return wait


def after_last_read(block, tile):
    """The op of block before which tile (an alloc) is free again: after the
    last top-level op that uses it, once no warpgroup mma that reads it may
    still be in flight (_in_flight: waits at this level retire them, other
    mmas may stay; a loop whose iterations end retired adds none). The
    block's terminator when that never happens."""
    tops = [o.operation for o in block.operations]
    uses = [i for i, t in enumerate(tops) if _reads(t, tile)]
    for i in range(uses[-1] if uses else len(tops), len(tops) - 1):
        if not any(_reads(o, tile) for o in _in_flight(tops[:i + 1])):
            return tops[i + 1]
    return tops[-1]


def _reads(op, tile) -> bool:
    """Whether op (or an op nested in it) has a view of shared tile `tile` as an operand."""
    return any(isinstance(view(v.type), ST) and root_alloc(v) == tile for o in [op, *walk(op)] for v in o.operands)


def held_until(body, stages: int):
    """Mosaic GPU's delayed release, for a body that ends with warpgroup
    mmas in flight (e.g. an accumulation read only after the loop): its slot
    is held into the next iteration and released after that iteration's
    first top-level wait that retires them (pending = 0, or pending = n
    after n mmas of the body: groups complete in order). That wait, or None
    when the body ends retired. A body that cannot hold its slot is refused
    here, naming the mma and why."""
    mma = _unretired_mma(body)
    if mma is None:
        return None
    tops = [o.operation for o in body.operations]
    waits = [o for o in tops if _retires_earlier(tops, o)]
    why = None
    if stages < 2:
        why = "with one stage the consumers cannot hold a slot while the producer refills it"
    elif not waits:
        why = ("no wait at the loop body's top level (pending = 0, or pending = n after n "
               "mmas of the body) would retire it in the next iteration")
    elif any(o.name not in WGMMA for o in _in_flight(tops)):
        why = "an mma still in flight at the iteration's end is issued inside an if or a loop"
    if why is not None:
        raise error(mma, "this warpgroup mma is still in flight when the pipelined loop's "
                         "iteration ends, and its stage cannot be held into the next "
                         f"iteration: {why}. Wait for it (warpgroup.mma_async_wait) "
                         "before the iteration ends")
    return waits[0]


def trailing_positions(body) -> list:
    """The yielded values (their loop-result positions) that come from the
    mmas still in flight at the body's end."""
    trailing = {r for o in _in_flight([o.operation for o in body.operations]) for r in o.results}
    return [i for i, v in enumerate(terminator(body).operands) if v in trailing]


def carried_positions(loop, wait) -> list:
    """The loop results that carry the relaxed wait's tiles."""
    y = terminator(loop.body)
    return [i for i, v in enumerate(y.operands) if v in set(wait.results)]


def _unretired_mma(block):
    """The block's last top-level op issuing a warpgroup mma (itself or
    nested) that no later wait retires before the block ends, else None."""
    left = _in_flight([o.operation for o in block.operations])
    return left[-1] if left else None


def _in_flight(ops) -> list:
    """Of a block's top-level ops `ops`, those whose warpgroup mmas may
    still be in flight at its end (a wgmma, or an op with a nested one that
    its blocks leave in flight), in issue order. Groups complete in order,
    so a wait with pending = n retires every op that n top-level mmas
    followed (nested ones count for none: a loop may run no iteration, an
    if may skip its branch); an if whose two branches each wait for all
    retires everything before it."""
    left = []                            # [op, top-level mmas issued after it]
    for o in ops:
        if o.name == "tk.warpgroup_mma_wait":
            left = [e for e in left if e[1] < _pending(o)]
            continue
        nested = [b for r in o.regions for b in r.blocks]
        if o.name == "scf.if" and len(nested) == 2 and all(
                any(_is_wait_all(t.operation) for t in b.operations) for b in nested):
            left = []
        if o.name in WGMMA:
            for e in left:
                e[1] += 1
            left.append([o, 0])
        elif any(_unretired_mma(b) is not None for b in nested):
            left.append([o, 0])
    return [e[0] for e in left]


def _retires_earlier(tops, wait) -> bool:
    """Whether top-level op `wait` retires every mma issued before the
    block began: a wait for all, or one with pending = n after at least n
    top-level mmas of the block."""
    if wait.name != "tk.warpgroup_mma_wait":
        return False
    return sum(o.name in WGMMA for o in tops[:tops.index(wait)]) >= _pending(wait)


def _is_wait_all(op) -> bool:
    return op.name == "tk.warpgroup_mma_wait" and _pending(op) == 0


def _pending(wait) -> int:
    return ir.IntegerAttr(wait.attributes["pending"]).value
