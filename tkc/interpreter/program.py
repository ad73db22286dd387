"""Compiling a kernel function into closures, and walking them.

Each MLIR block becomes a `Block`: a list of `Step`s (one closure per op,
found once in the handler table by op name) and the slots its terminator
yields. Every SSA value gets an integer slot; a warp's registers are a list
indexed by slot, so running an op is a closure call and two list lookups.

A step is either plain, `fn(env, warp)`, or a generator (`gen=True`) for the
ops that can reach a `tk.sync` (the sync itself, and an scf.for or scf.if
whose body has a generator step): the walker `yield from`s those, and the
warp scheduler (machine.py) sees each barrier as a value yielded by the
warp's generator. A block without generator steps runs with `run_plain`, a
plain call: most loop bodies reach no barrier, and a generator per
iteration cost more than their ops.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..diagnostics import TkcError, error

# op name -> handler(compiler, op) -> Step. Filled by the handler modules as
# they are imported (ops.py imports the tile ops' ones; machine.py the rest).
HANDLERS: dict[str, Callable] = {}

TERMINATORS = ("scf.yield", "func.return")


def handler(*names: str):
    """Register a handler for ops named `names` (e.g. "tk.add")."""
    def deco(fn):
        for n in names:
            HANDLERS[n] = fn
        return fn
    return deco


class Unlocated(Exception):
    """An error found below a handler (a race in peer memory, seen by the
    array's accesses), located by `execute` at the op being run."""


@dataclass
class Step:
    fn: Callable
    op: object  # the ir.Operation, for located errors
    gen: bool = False


@dataclass
class Block:
    steps: list[Step]
    arg_slots: list[int]
    yield_slots: list[int] = field(default_factory=list)
    gen: bool = False  # a step is a generator: run with execute, else run_plain


class Compiler:
    """Assigns slots to values and compiles blocks of one kernel function."""

    def __init__(self, warps: int, blocks: int = 1, group_warps: int | None = None):
        self.warps, self.blocks = warps, blocks  # blocks an SM (tk.blocks_per_sm)
        # the warps that run the author's group ops (dialect.kernel.group_warps)
        self.group_warps = group_warps or warps
        self.slots: dict = {}

    @property
    def nslots(self) -> int:
        return len(self.slots)

    def slot(self, value) -> int:
        s = self.slots.get(value)
        if s is None:
            s = self.slots[value] = len(self.slots)
        return s

    def operand_slots(self, op) -> list[int]:
        return [self.slot(v) for v in op.operands]

    def result_slot(self, op) -> int:
        return self.slot(op.results[0])

    def block(self, mblock) -> Block:
        out = Block([], [self.slot(a) for a in mblock.arguments])
        for op in mblock.operations:
            op = op.operation  # an OpView may shadow .name (func.func's is sym_name)
            if op.name in TERMINATORS:
                out.yield_slots = self.operand_slots(op)
                break
            out.steps.append(self.step(op))
        out.gen = any(step.gen for step in out.steps)
        return out

    def region(self, region) -> Block | None:
        """The single block of `region`, or None when it is empty."""
        blocks = list(region.blocks)
        if not blocks:
            return None
        if len(blocks) > 1:
            raise error(region.blocks[1].operations[0],
                        "the interpreter supports single-block regions only")
        return self.block(blocks[0])

    def step(self, op) -> Step:
        fn = HANDLERS.get(op.name)
        if fn is None:
            raise error(op, f"the interpreter does not know the op '{op.name}'")
        step = fn(self, op)
        return step if isinstance(step, Step) else Step(step, op)


def execute(block: Block, env: list, warp):
    """Run `block` for one warp (a generator); returns the yielded values."""
    step, state = None, warp.block
    try:
        for step in block.steps:
            state.current_op = step.op   # where a peer-memory access is (peers.py)
            if step.gen:
                yield from step.fn(env, warp)
            else:
                step.fn(env, warp)
    except Exception as e:
        _reraise_located(e, step)
    return [env[s] for s in block.yield_slots]


def run_plain(block: Block, env: list, warp) -> list:
    """execute() for a block without generator steps (block.gen False): the
    same, as a plain call."""
    step, state = None, warp.block
    try:
        for step in block.steps:
            state.current_op = step.op
            step.fn(env, warp)
    except Exception as e:
        _reraise_located(e, step)
    return [env[s] for s in block.yield_slots]


def _reraise_located(e: Exception, step: Step):
    """Raise what a failure while running `step` becomes: a TkcError as it is,
    an Unlocated one located at the step's op (its chain dropped: the message
    says it all), anything else located with `e` as its cause."""
    if isinstance(e, TkcError):
        raise e
    if isinstance(e, Unlocated):
        raise _located(e, step) from None
    raise _located(e, step) from e


def _located(e: Exception, step: Step) -> TkcError:
    """The located error for `e`, raised while running `step`."""
    if isinstance(e, Unlocated):  # found inside an array access (peer memory): this op's
        return error(step.op, f"{step.op.name}: {e}")
    # numpy/Python failure inside one op: locate it
    return error(step.op, f"interpreting '{step.op.name}' failed: {type(e).__name__}: {e}")

