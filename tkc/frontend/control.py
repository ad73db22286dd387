"""Control flow: `for i in tkc.range(...)` (scf.for) and `with tkc.if_(c):` (scf.if).

Register handles are mutable names for SSA values, so a loop or an if must
turn "handles changed inside" into results:

- Every register handle holding a visible value when the region starts is a
  candidate. Its value inside the region is tracked by identity; and since
  authors also write the functional form (`o = o * 2`), the author's local
  names bound to candidates are compared before and after, and a name rebound
  to a new handle of the same type counts as a change of the old handle (both
  handles get the result afterwards).
- The region is first traced into a scratch op carrying every candidate
  (loops: as iter_args); then a clean op is built carrying only the changed
  ones, the ops are moved into it and the scratch op is erased. The emitted IR
  therefore carries exactly the values the body changes.
- A handle first assigned inside a region has no value after it (its scope is
  closed): using it is a located error.
- Scalars (values, not handles) are carried by the author's names: carry.py.
"""
from __future__ import annotations

from .carry import Scalars
from .tiles import Reg
from .trace import author_frame, author_where, current, emitting, fail, frame_position
from .values import Bool, as_index


class _Capture:
    """The candidates of a region and the author's names bound to them."""

    def __init__(self, st, frame):
        self.frame = frame
        self.handles = st.live_handles()
        self.start = {h: (h._value, h._scope) for h in self.handles}
        self.entry = {h: v for h, (v, _) in self.start.items()}  # loops: their iter_args
        self.names = {n: h for n, h in _named(_locals(frame)).items() if h in self.start}

    def finals(self):
        """({candidate: value at region end}, {candidate: [alias handles]}).
        A name rebound to a new handle is a functional update of the old one
        (`o = o * 2`, `p = s.to(bf16)` carrying p to the next iteration),
        unless the old handle also changed in place and the new value does
        not depend on the old one's: then the name was reused for an
        unrelated tile of the same type (`for s in tiles: ...` before a loop
        that makes `s = zero(...)` while an mma accumulates into tiles[-1]),
        and the old handle keeps its own value. A new handle holding the old
        one's very value is the same update seen through an inner region (an
        if/else whose branches both rebind the name: the if's result went to
        both handles), and so is a handle that an inner region made an alias
        of the old one (or of its aliases: the name, rebound in the if/else,
        then updated in a nested loop): an alias whatever its value depends on."""
        finals = {h: h._value for h in self.handles}
        aliases = {}
        now = _named(_locals(self.frame))
        for n, h0 in self.names.items():
            h = now.get(n)
            if isinstance(h, Reg) and h is not h0 and h.view == h0.view and h._value is not None \
                    and current().visible(h._scope) \
                    and (h0._value == self.entry[h0] or h._value == h0._value
                         or _alias_of(h, h0) or _depends(h._value, self.entry[h0])):
                finals[h0] = h._value
                aliases.setdefault(h0, []).append(h)
        return finals, aliases

    def restore(self, aliases) -> None:
        """Give candidates (and their aliases) their values from the region start."""
        for h, (v, s) in self.start.items():
            h._value, h._scope = v, s
            for a in aliases.get(h, ()):
                a._value, a._scope = v, s

    def rebind(self, results: dict, aliases, scope) -> None:
        """After the region: changed candidates and their aliases get results
        (and each alias remembers whose it is, for _alias_of)."""
        for h, v in results.items():
            for x in (h, *aliases.get(h, ())):
                x._value, x._scope = v, scope
            for x in aliases.get(h, ()):
                x._alias_of = h


def _alias_of(h, h0) -> bool:
    """Whether handle h was made an alias of h0, directly or through aliases."""
    seen = set()
    while h is not None and id(h) not in seen:
        if h is h0:
            return True
        seen.add(id(h))
        h = getattr(h, "_alias_of", None)
    return False


def _depends(value, on) -> bool:
    """Whether `value` is `on` or computed from it (through the operands of
    its defining ops and of the ops nested in their regions)."""
    from mlir import ir

    from ..dialect import walk
    seen, todo = set(), [value]
    while todo:
        v = todo.pop()
        if v == on:
            return True
        owner = v.owner
        if isinstance(owner, ir.Block):
            continue
        op = owner.operation if hasattr(owner, "operation") else owner
        if op in seen:
            continue
        seen.add(op)
        todo.extend(op.operands)
        todo.extend(x for inner in walk(op) for x in inner.operands)
    return False


def _named(names: dict) -> dict:
    """The register handles the author's names hold: {name: handle}, and
    {(name, i): handle} for the elements of a list or tuple (`state = [x * c
    for x in state]` updates each element functionally) and for the parts of
    a complex tile (i = "re", "im")."""
    from .complex import Complex
    out = {}
    for n, x in names.items():
        if isinstance(x, Reg):
            out[n] = x
        elif isinstance(x, Complex):
            out.update(((n, p), getattr(x, p)) for p in ("re", "im") if isinstance(getattr(x, p), Reg))
        elif isinstance(x, (list, tuple)):
            out.update(((n, i), h) for i, h in enumerate(x) if isinstance(h, Reg))
    return out


def _locals(frame) -> dict:
    return dict(frame.f_locals) if frame is not None else {}


def _here():
    f = author_frame()
    return f, (frame_position(f) if f is not None else None)


# ------------------------------------------------------------------ range

class range:
    """`for i in tkc.range(stop)` / `tkc.range(start, stop, step=1)`: an scf.for.

    `stages=N` (or "auto") makes it a pipelined loop (docs/pipelining.md): its
    `tma.load`s run N iterations ahead in a producer warpgroup while the
    kernel's warps compute (tk-pipeline-staging); `registers=(producer,
    consumer)` overrides the setmaxnreg split the pass picks; `store_warp=True`
    has a warp of the producer's issue the loop's tma.stores (the consumers
    only arrive on a barrier) instead of the consumers' warp 0 after they
    meet (an error says why where it cannot); with it, `store_slots=1`
    single-buffers the stored tiles (2 by default: the consumers then wait
    at each iteration's top for the last one's stores to have read them)."""

    def __init__(self, start, stop=None, step=1, *, stages=None, registers=None, store_warp=None,
                 store_slots=None):
        if stop is None:
            start, stop = 0, start
        self.pipeline = _pipeline_options(stages, registers, store_warp, store_slots)
        self.bounds = [as_index(x, "tkc.range bound") for x in (start, stop, step)]
        whole = getattr(self.bounds[1], "whole_tiles", None)
        if whole:  # `range(x.c // 64)` walks whole tiles: x.c must be a multiple of 64
            current().require_divisible(*whole)
        if self.bounds[2].const is not None and self.bounds[2].const <= 0:
            raise fail(f"tkc.range step must be positive, got {self.bounds[2].const}")
        self.frame, self.pos = _here()
        self.where = author_where()

    def __iter__(self):
        return self._loop()

    def _loop(self):
        st = current()
        st.flush()
        from . import emit
        lb, ub, step = (b.ir() for b in self.bounds)
        cap = _Capture(st, self.frame)
        scalars = Scalars(st, self.frame, f"tkc.range loop at {self.where}")
        with emitting(self.pos):
            scratch = emit.for_op(lb, ub, step, [h._value for h in cap.handles] + scalars.inits())
        scope = st.push(scratch.body, "tkc.range loop", self.where)
        args = list(scratch.inner_iter_args)
        for h, arg in zip(cap.handles, args):
            h._value, h._scope = arg, scope
            cap.entry[h] = arg
        scalars.enter_loop(args[len(cap.handles):], scope)
        from .values import Index
        try:
            yield Index(scratch.induction_variable)
        except GeneratorExit:
            # `break`/`return` in the body (or an exception unwinding it).
            st.poisoned = st.poisoned or fail(
                f"leaving a tkc.range loop early (break/return) is not supported: the loop "
                f"at {self.where} runs every iteration")
            raise
        self._finish(st, cap, scalars, scratch, (lb, ub, step))

    def _finish(self, st, cap, scalars, scratch, bounds):
        """The clean loop: it carries the handles and scalar names the body changed."""
        from . import emit
        st.flush()
        finals, aliases = cap.finals()
        sfinals = scalars.loop_finals()    # emitted at the body's end
        args = list(scratch.inner_iter_args)
        changed = [h for h, a in zip(cap.handles, args) if finals[h] != a]
        names = list(sfinals)
        with st.ctx, st.location(self.pos), st.ips[-1]:
            emit.yield_([finals[h] for h in changed] + [sfinals[n] for n in names])
        st.pop()
        with emitting(self.pos):
            loop = emit.for_op(*bounds, [cap.start[h][0] for h in changed]
                               + [scalars.start[n].ir() for n in names])
        if self.pipeline is not None:
            with st.ctx:
                loop.operation.attributes["tk.pipeline"] = _dict_attr(self.pipeline)
        scratch.induction_variable.replace_all_uses_with(loop.induction_variable)
        inner = list(loop.inner_iter_args)
        new_args = dict(zip(changed + names, inner))
        for h, a in zip(cap.handles, args):
            a.replace_all_uses_with(new_args[h] if h in new_args else cap.start[h][0])
        for n, a in zip(scalars.start, args[len(cap.handles):]):
            a.replace_all_uses_with(new_args[n] if n in new_args else scalars.start[n].ir())
        emit.move_ops(scratch.body, loop.body)
        scratch.operation.erase()
        cap.restore({})
        results = list(loop.results)
        cap.rebind(dict(zip(changed, results)), aliases, st.scope)
        scalars.leave_loop(dict(zip(names, results[len(changed):])), st.scope)


def _pipeline_options(stages, registers, store_warp=None, store_slots=None) -> dict | None:
    """tk.pipeline's entries from tkc.range's keywords (None: a plain loop)."""
    if stages is None and registers is None and store_warp is None and store_slots is None:
        return None
    if stages is None or stages == "auto":
        opts = {"stages": 0}
    elif isinstance(stages, int) and not isinstance(stages, bool) and 1 <= stages <= 16:
        opts = {"stages": stages}
    else:
        raise fail(f"tkc.range stages must be \"auto\" or an int in 1..16, got {stages!r}")
    if registers is not None:
        ok = (isinstance(registers, tuple) and len(registers) == 2 and all(
            isinstance(r, int) and not isinstance(r, bool) and 24 <= r <= 256 and r % 8 == 0
            for r in registers))
        if not ok:
            raise fail("tkc.range registers must be (producer, consumer) setmaxnreg counts, "
                       f"multiples of 8 in 24..256, got {registers!r}")
        opts["producer_registers"], opts["consumer_registers"] = registers
    if store_warp is not None:
        if not isinstance(store_warp, bool):
            raise fail(f"tkc.range store_warp must be True or False, got {store_warp!r}")
        opts["store_warp"] = int(store_warp)
    if store_slots is not None:
        if store_slots not in (1, 2) or isinstance(store_slots, bool) or not store_warp:
            raise fail(f"tkc.range store_slots must be 1 or 2, with store_warp=True, got {store_slots!r}"
                       + ("" if store_warp else " without store_warp"))
        opts["store_slots"] = store_slots
    return opts


def _dict_attr(entries: dict):
    from mlir import ir
    i64 = ir.IntegerType.get_signless(64)
    return ir.DictAttr.get({k: ir.IntegerAttr.get(i64, v) for k, v in entries.items()})


# ------------------------------------------------------------------ if / else

class _PendingIf:
    """An if whose then-branch is traced; an else_ may still follow."""

    def __init__(self, st, cond, scratch, cap, scalars, then, pos):
        self.st, self.cond, self.scratch, self.cap, self.scalars, self.then, self.pos = \
            st, cond, scratch, cap, scalars, then, pos

    def finish(self, other, other_scalars=None) -> None:
        """Build the clean scf.if from the branches' final values (handles',
        then the scalar names' a branch changed: carry.py)."""
        from . import emit
        st, cap = self.st, self.cap
        then_f, then_a, then_s = self.then
        else_f, else_a = other or ({h: v for h, (v, _) in cap.start.items()}, {})
        else_s = other_scalars or {}
        changed = [h for h in cap.handles
                   if then_f[h] != cap.start[h][0] or else_f[h] != cap.start[h][0]]
        names = [n for n in self.scalars.start if n in then_s or n in else_s]
        start = {n: self.scalars.start[n]._v for n in names}
        has_else = bool(changed or names) or len(self.scratch.else_block.operations) > 0
        with emitting(self.pos):
            op = emit.if_op(self.cond, [h._value.type for h in changed] + [start[n].type for n in names],
                            has_else)
        for src, dst, finals, sfinals in ((self.scratch.then_block, op.then_block, then_f, then_s),
                                          (self.scratch.else_block, op.else_block if has_else else None,
                                           else_f, else_s)):
            if dst is None:
                continue
            emit.move_ops(src, dst)
            with st.ctx, st.location(self.pos), _ip(dst):
                emit.yield_([finals[h] for h in changed] + [sfinals.get(n, start[n]) for n in names])
        self.scratch.operation.erase()
        aliases = {h: then_a.get(h, []) + else_a.get(h, []) for h in changed}
        results = list(op.results)
        cap.rebind(dict(zip(changed, results)), aliases, st.scope)
        self.scalars.if_results(dict(zip(names, results[len(changed):])), st.scope)


def _ip(block):
    from mlir import ir
    return ir.InsertionPoint(block)


class if_:
    """`with tkc.if_(cond):` ... [`with tkc.else_():` ...]: an scf.if."""

    def __init__(self, cond):
        from .elementwise import Mask
        if isinstance(cond, Mask):
            raise fail("tkc.if_ takes a scalar condition; a tile comparison is a mask, one "
                       "truth value per element: use where(mask, x, y)")
        if not isinstance(cond, (Bool, bool)):
            raise fail(f"tkc.if_ takes a comparison of traced values (e.g. warpid() == 0) or a "
                       f"bool, got {type(cond).__name__}")
        self.cond = cond
        self.frame, self.pos = _here()
        self.where = author_where()

    def __enter__(self):
        st = current()
        st.flush()
        from . import emit
        with emitting(self.pos):
            c = emit.constant("i1", int(self.cond)) if isinstance(self.cond, bool) else self.cond.ir()
            self.scratch = emit.if_op(c, [], True)
        self.c = c
        self.cap = _Capture(st, self.frame)
        self.scalars = Scalars(st, self.frame, f"tkc.if_ at {self.where}")
        st.push(self.scratch.then_block, "tkc.if_ branch", self.where)
        return self

    def __exit__(self, exc_type, exc, tb):
        st = current()
        if exc_type is not None:
            st.pop()
            return False
        st.flush()
        then = self.cap.finals()
        then_s = self.scalars.branch_end()
        st.pop()
        self.cap.restore(then[1])
        st.pending_if = _PendingIf(st, self.c, self.scratch, self.cap, self.scalars, (*then, then_s),
                                   self.pos)
        return False


class else_:
    """`with tkc.else_():` right after a `with tkc.if_(...):` block."""

    def __init__(self):
        self.frame, self.pos = _here()
        self.where = author_where()

    def __enter__(self):
        st = current()
        p = st.pending_if
        if p is None or p.cap.frame is not self.frame:
            if st.poisoned is not None:
                raise st.poisoned
            raise fail("tkc.else_() must directly follow a `with tkc.if_(...):` block "
                       "(no tile ops in between)")
        st.pending_if = None
        self.pending = p
        st.push(p.scratch.else_block, "tkc.else_ branch", self.where)
        return self

    def __exit__(self, exc_type, exc, tb):
        st = current()
        if exc_type is not None:
            st.pop()
            return False
        st.flush()
        other = self.pending.cap.finals()
        other_s = self.pending.scalars.branch_end()
        st.pop()
        self.pending.cap.restore(other[1])
        self.pending.finish(other, other_s)
        return False
