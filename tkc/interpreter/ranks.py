"""N ranks of one kernel on the CPU (docs/multi-gpu.md): every rank's blocks
run interleaved, round by round, with the ranks' buffers of each pgl
argument shared (peers.py), so flags set by one rank release another's
waits. When no block of any rank can move, that is a deadlock across ranks,
reported at a flag wait; a block stuck on its own barriers is a deadlock
of that block, as on one GPU (machine.py).

`engines` model what the host queues beside the kernel on a stream of its
own, one engine a rank (the fused all-gather's pushes by the copy engines,
tkc/torchops/collective.py): each runs its actions in order,
interleaved with the blocks, as one more agent of the race check:
("wait", buf, at, value) until the flag buf[at] is at least value (and
acquires what was released into it: cuStreamWaitValue32), ("copy", dst,
key, (src, src_key)) dst[key] = src[src_key] (cuMemcpyDtoDAsync), and
("write", buf, at, value) buf[at] = value, releasing (cuStreamWriteValue32,
which fences first). buf and dst are the PeerBuffers a pgl's arrays become.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..diagnostics import TkcError, error
from ..dialect.kernel import MAX_PEERS, parallel_args
from . import peers as peer_memory
from .args import bind, find_kernel, signature
from .machine import BlockRun, BlockState, Program, Warp, _check_grid, _grid
from .peers import FlagWaiting, PeerWorld, buffers
from .program import execute


def run_ranks(module, rank_args: list, *, kernel: str | None = None, grid: tuple | None = None,
              races: bool = True, sms: int = 4, engines=None) -> None:
    """Interpret the tk kernel of `module` as len(rank_args) ranks: rank r's
    arguments are rank_args[r] (numpy arrays, updated in place); module may
    be a Program (machine.prepare) as for machine.run; a pgl
    argument's arrays, one per rank, are that pgl's symmetric buffers (one
    shape). grid, races, sms: as machine.run, per rank. engines(pgls) ->
    one list of actions a rank (module doc), pgls: {argument name: the
    ranks' PeerBuffers}."""
    prepared = module if isinstance(module, Program) else None   # machine.prepare's
    sig = prepared.sig if prepared is not None else signature(find_kernel(module, kernel))
    world = len(rank_args)
    if not 1 <= world <= MAX_PEERS:
        raise error(sig.func, f"a launch spans 1 to {MAX_PEERS} ranks (the peer buffers a pgl "
                              f"passes), got {world}")
    bound = [bind(sig, list(args)) for args in rank_args]
    names = [f"rank {r} block {idx}" for r, (_, env) in enumerate(bound)
             for idx in _blocks(sig, env, grid, sms)]
    if engines is not None:
        names += [f"rank {r}'s copy engine" for r in range(world)]
    world_state = PeerWorld(len(names), names)
    pgls = {}
    for i in parallel_args(sig.func):
        arrays = [values[i] for values, _ in bound]
        if any(a.shape != arrays[0].shape for a in arrays):
            raise error(sig.func, f"pgl argument '{sig.arg_names[i]}': the ranks' arrays have shapes "
                                  f"{[a.shape for a in arrays]}; a symmetric buffer has one shape")
        pgls[sig.arg_names[i]] = buffers(arrays, sig.arg_names[i], world_state)
        for values, b in zip((v for v, _ in bound), pgls[sig.arg_names[i]]):
            values[i] = b
    program, runs = prepared if prepared is not None else Program(sig), []
    for r, (values, env) in enumerate(bound):
        blocks = _blocks(sig, env, grid, sms)
        for idx in blocks:
            block = BlockState(idx, blocks.grid, sig.warps, races)
            block.rank, block.world, block.agent, block.peers = r, world, len(runs), world_state
            warps = []
            for w in range(sig.warps):
                slots = [None] * program.nslots
                for s, v in zip(program.body.arg_slots, values):
                    slots[s] = v
                warps.append(execute(program.body, slots, Warp(w, block)))
            runs.append((f"rank {r}, block {idx}", BlockRun(warps, block)))
    if engines is not None:
        runs += [(f"rank {r}'s copy engine", _Engine(world_state, len(runs) + r, f"rank {r}'s copy engine",
                                                      actions))
                 for r, actions in enumerate(engines(pgls))]
    try:
        with np.errstate(all="ignore"):
            _schedule(runs)
    finally:
        peer_memory.ACTIVE[0] = None


class _Blocks(list):
    grid: tuple


def _blocks(sig, env, grid, sms) -> _Blocks:
    g = _grid(sig, {"sms": int(sms), **env}) if grid is None else _check_grid(sig, grid)
    out = _Blocks((x, y, z) for z, y, x in itertools.product(*(range(n) for n in reversed(g))))
    out.grid = g
    return out


def _schedule(runs: list) -> None:
    """Round after round, every live block's warps move; a block that cannot
    move and waits on no flag is deadlocked by itself; when no block moves,
    the ranks are."""
    live = list(runs)
    while live:
        moved = False
        for name, run in live:
            peer_memory.ACTIVE[0] = run.block
            try:
                step = run.step()
                if not step and not _on_flags(run):
                    raise run.deadlock()
            except TkcError as e:
                raise TkcError(f"{e.message} ({name})", e.where) from e
            moved |= step
            if not run.stopped:
                run.block.check_groups()
        live = [(n, r) for n, r in live if r.stopped]
        if live and not moved:
            raise _deadlock(live)


def _on_flags(run: BlockRun) -> bool:
    return any(isinstance(at, FlagWaiting) for at in run.stopped.values())


class _Engine:
    """A rank's copy engine (module doc): a run of the schedule whose one
    "warp" takes the actions in order, an agent of the race check of its own."""

    def __init__(self, world: PeerWorld, agent: int, name: str, actions):
        self.peers, self.agent, self.site, self.current_op = world, agent, name, None
        self.block = self   # (the block whose accesses peer memory records: ACTIVE)
        self.actions = iter(actions)
        self.action = next(self.actions, None)
        self.stopped = {0: None} if self.action is not None else {}

    def step(self) -> bool:
        moved = False
        while self.action is not None:
            kind, buf, at, value = self.action
            if kind == "wait":
                waiting = FlagWaiting(None, np.asarray(buf), at, value, buf)
                if not waiting.ready():
                    self.stopped = {0: waiting}
                    return moved
                self.peers.acquire(self.agent, (id(buf), at))
            elif kind == "copy":   # both accesses the engine's (peer memory: checked)
                src, key = value
                buf[at] = src[key]
            elif kind == "write":
                self.peers.release(self.agent, (id(buf), at))
                np.asarray(buf)[at] = value
            else:
                raise ValueError(f"a copy engine's action is wait, copy or write, got {kind!r}")
            moved = True
            self.action = next(self.actions, None)
        self.stopped = {}
        return moved

    def check_groups(self) -> None:
        pass


def _deadlock(live: list) -> TkcError:
    waits = sorted(((name, w, at) for name, run in live for w, at in run.stopped.items()
                    if isinstance(at, FlagWaiting)), key=lambda x: x[2].op is None)   # a kernel's first
    said = [f"{n}{'' if a.op is None else f' warp {v}'} waits for {a.describe()}" for n, v, a in waits]
    text = f"deadlock across ranks: {said[0]}, which no rank signals" + \
        (f"; {'; '.join(said[1:])}" if said[1:] else "")
    return error(waits[0][2].op, text) if waits[0][2].op is not None else TkcError(text)
