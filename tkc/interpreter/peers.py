"""Several GPUs in the interpreter: the multi-GPU ops and the race check of
peer memory (docs/multi-gpu.md).

ranks.py runs N ranks of one kernel, each with its own blocks. A pgl
argument's buffers, one per rank, are `PeerBuffer`s (numpy arrays that see
their own accesses) listing each other in `peers`; tk.peer picks one by rank.

Races: global memory is not ordered between blocks (of one rank or of
several) except by flags, so every access to a PeerBuffer is checked against
happens-before, with vector clocks, one agent per (rank, block): the warps of
one block are one agent (they order their global accesses with tk.sync, as
on one GPU, where global memory is not tracked either). An agent's epoch
advances at each tk.signal, which releases its clock into the flag (per
element); a tk.wait_signal that passes acquires the flag's clock. A read of
an element is ordered after its last write when the writer's epoch then is
within the reader's clock; a write likewise after the last write and every
read since it. A race is reported at the second access, naming the first.
A tk.signal by a warp whose TMA stores into peer memory may not have
completed their writes (no tma.store_async_wait(writes=True) since) is an
error too: the release would not cover them. A TMA reduce-add into peer
memory is atomic: adds of several agents need no order among them, but a
read or a plain write after another agent's add does, and an add after its
read.

Not modelled (missed, never invented): a wait acquires every release into
its flag so far, not only those its value needed; TMA stores pending in
other warps of the signalling block are not checked; proxy fences are not.
"""
from __future__ import annotations

import numpy as np

from ..diagnostics import error, where
from .hopper import Waiting
from .operands import expect
from .program import Step, Unlocated, handler

ACTIVE: list = [None]   # the BlockState whose warp runs now (set by ranks.py)


class PeerBuffer(np.ndarray):
    """One rank's buffer of a pgl argument (4-D). Indexing it records the
    access with the active block's agent; what indexing returns is a plain
    array (a copy's source, never written through)."""

    def __getitem__(self, key):
        out = np.asarray(self)[key]
        self._access(key, write=False)
        return out

    def __setitem__(self, key, value):
        np.asarray(self)[key] = value
        self._access(key, write=True)

    def reduce_add(self, key, combine) -> None:
        """self[key] = combine(self[key]) as one atomic reduction (a TMA
        reduce-add): adds of several agents need no order among them, only
        with reads and plain writes."""
        raw = np.asarray(self)
        raw[key] = combine(raw[key])
        self._access(key, write="add")

    def _access(self, key, write) -> None:
        block = ACTIVE[0]
        world = getattr(self, "world", None)
        if block is not None and world is not None and block.peers is world:
            world.access(self, key, block, write)


def buffers(arrays: list, name: str, world) -> list:
    """PeerBuffers over the ranks' 4-D arrays of one pgl argument (views:
    writes reach the callers' arrays), each listing all of them."""
    out = []
    for r, a in enumerate(arrays):
        b = a.view(PeerBuffer)
        b.name, b.owner, b.world, b.peers = name, r, world, out
        out.append(b)
    return out


class PeerWorld:
    """The ranks' shared happens-before state: per agent (rank, block) a
    vector clock; per flag element the clock released into it; per
    PeerBuffer element its last write and the reads since."""

    def __init__(self, agents: int, names: list):
        self.names = names   # agent -> "rank r block (x, y, z)"
        self.clock = np.eye(agents, dtype=np.int64)
        self.flags: dict = {}    # (id of the buffer, flat element) -> released clock
        self.memory: dict = {}   # id of a PeerBuffer -> its _Cells
        self.sites: dict = {}    # id of an op (its Step keeps it alive) -> where(op)

    def release(self, agent: int, key) -> None:
        have = self.flags.get(key)
        self.flags[key] = self.clock[agent].copy() if have is None else np.maximum(have, self.clock[agent])
        self.clock[agent, agent] += 1

    def acquire(self, agent: int, key) -> None:
        have = self.flags.get(key)
        if have is not None:
            np.maximum(self.clock[agent], have, out=self.clock[agent])

    def access(self, buf: PeerBuffer, key, block, write: bool) -> None:
        cells = self.memory.get(id(buf))
        if cells is None:
            cells = self.memory[id(buf)] = _Cells(buf, len(self.names))
        op = block.current_op
        site = self.sites.get(id(op)) if op is not None else getattr(block, "site", "?")
        if site is None:   # located once an op: an access per box and rank
            site = self.sites[id(op)] = where(op)
        cells.access(self, key, block.agent, write, site)


class _Cells:
    """The access history of one PeerBuffer's elements, as arrays of the
    buffer's shape indexed by an access's own key (a TMA box is a slice: no
    gathers), one per agent for the reads and adds."""

    def __init__(self, buf: PeerBuffer, agents: int):
        self.buf, shape = buf, buf.shape
        self.w_agent = np.full(shape, -1, np.int32)
        self.w_epoch = np.zeros(shape, np.int64)
        self.w_site = np.zeros(shape, np.int32)
        # per agent: the epoch of its read (or reduce-add) since the last write,
        # 0: none; None until the agent's first (most agents never read a buffer)
        self.r_epoch, self.r_site = [None] * agents, [None] * agents
        self.a_epoch, self.a_site = [None] * agents, [None] * agents
        # per agent, the largest read (add) epoch it ever recorded: an agent
        # whose largest is ordered before the access (<= the clock) cannot
        # race, whatever the cells (most agents, most accesses; 24 agents at 8 ranks)
        self.r_max, self.a_max = [0] * agents, [0] * agents
        self.sites: list[str] = []

    def _site(self, text: str) -> int:
        if text not in self.sites:
            self.sites.append(text)
        return self.sites.index(text)

    def access(self, world: PeerWorld, key, agent: int, write, site: str) -> None:
        """write: False (a read), True (a plain write) or "add" (a reduce-add)."""
        wa = np.asarray(self.w_agent[key])
        if not wa.size:
            return
        clock = world.clock[agent]
        bad = (wa >= 0) & (wa != agent)
        if bad.any():
            bad &= np.asarray(self.w_epoch[key]) > clock[wa]   # wa -1 (never written) is not bad anyway
            if bad.any():
                i = int(np.argmax(bad))
                self._race(world, agent, "overwrites" if write else "reads", key, i, "written",
                           int(wa.flat[i]), self.sites[np.asarray(self.w_site[key]).flat[i]])
        s = self._site(site)
        what = {False: "reads", True: "overwrites", "add": "adds to"}[write]
        # a read or write after other agents' adds, a write or add after their reads; the
        # first other agent (by number) that raced, at its first element
        for since, epochs, sites, most in (("added to", self.a_epoch, self.a_site, self.a_max),
                                           ("read", self.r_epoch, self.r_site, self.r_max)):
            if (since == "read") == (write is False) or (since == "added to" and write == "add"):
                continue
            for other in range(len(epochs)):
                if other == agent or most[other] <= clock[other]:
                    continue
                late = np.asarray(epochs[other][key]) > clock[other]   # an epoch is >= 1: 0 never is
                if late.any():
                    i = int(np.argmax(late))
                    self._race(world, agent, what, key, i, since, other,
                               self.sites[np.asarray(sites[other][key]).flat[i]])
        if write is False or write == "add":
            epochs, sites, most = (self.r_epoch, self.r_site, self.r_max) if write is False else \
                (self.a_epoch, self.a_site, self.a_max)
            if epochs[agent] is None:
                epochs[agent] = np.zeros(self.buf.shape, np.int64)
                sites[agent] = np.zeros(self.buf.shape, np.int32)
            epochs[agent][key] = clock[agent]
            sites[agent][key] = s
            most[agent] = max(most[agent], int(clock[agent]))
            return
        for a in self.a_epoch + self.r_epoch:
            if a is not None:
                a[key] = 0
        self.w_agent[key], self.w_epoch[key], self.w_site[key] = agent, clock[agent], s

    def _race(self, world, agent, what, key, i, did, other, site):
        """Raise for the i-th element (row-major) of the access `key`."""
        flat = np.arange(self.buf.size).reshape(self.buf.shape)[key]
        at = np.unravel_index(int(np.asarray(flat).flat[i]), self.buf.shape)
        raise Unlocated(
            f"race on peer memory: {world.names[agent]} {what} {self.buf.name}"
            f"[{', '.join(map(str, at))}] of rank {self.buf.owner}, {did} by {world.names[other]} "
            f"at {site} with no signal/wait_signal ordering them")


# ---- ops

def _peers(arr) -> list:
    """The ranks' buffers of a pgl argument's value (one rank: itself)."""
    return getattr(arr, "peers", None) or [arr]


@handler("tk.peer")
def _peer(c, op):
    src, rank, out = c.slot(op.operands[0]), c.slot(op.operands[1]), c.result_slot(op)

    def step(env, w):
        peers, r = _peers(env[src]), int(env[rank])
        expect(0 <= r < len(peers), op, f"rank {r} is outside the {len(peers)} ranks")
        env[out] = peers[r]
    return step


@handler("tk.rank", "tk.world_size")
def _rank(c, op):
    out, is_rank = c.result_slot(op), op.name == "tk.rank"

    def step(env, w):
        env[out] = w.block.rank if is_rank else w.block.world
    return step


def _flag(c, op):
    """(the flag's place in env, the value slot): flags, b, d, r, c, value."""
    g, idx, value = c.slot(op.operands[0]), [c.slot(v) for v in op.operands[1:5]], c.slot(op.operands[5])

    def place(env):
        arr, at = env[g], tuple(int(env[i]) for i in idx)
        expect(all(0 <= x < n for x, n in zip(at, arr.shape)), op,
               f"flag element {at} is out of bounds of shape {tuple(arr.shape)}")
        return np.asarray(arr), at, (id(arr), at), arr
    return place, value


@handler("tk.signal")
def _signal(c, op):
    place, value = _flag(c, op)

    def step(env, w):
        raw, at, key, arr = place(env)
        pending = [s for s, a in w.block.tma_writes.get(w.warpid, []) if isinstance(a, PeerBuffer)]
        if pending:
            raise error(op, f"tk.signal: the TMA store at {where(pending[0])} into peer memory may "
                            "not have completed its writes, which this release would not cover: "
                            "tma.store_async_wait(writes=True) before signalling")
        if w.block.peers is not None:
            w.block.peers.release(w.block.agent, key)
        raw[at] = np.int32(np.int64(raw[at]) + int(env[value]))   # i32 wraps, as red.add
    return step


class FlagWaiting(Waiting):
    """A warp blocked in tk.wait_signal: ready once the flag reaches the value."""
    __slots__ = ("raw", "at", "value", "arr")

    def __init__(self, op, raw, at, value: int, arr):
        self.op, self.raw, self.at, self.value, self.arr = op, raw, at, value, arr

    def ready(self) -> bool:
        return int(self.raw[self.at]) >= self.value

    def describe(self) -> str:
        owner = getattr(self.arr, "owner", 0)
        name = getattr(self.arr, "name", "the flags")
        return (f"{name}[{', '.join(map(str, self.at))}] of rank {owner} to reach {self.value} "
                f"(it is {int(self.raw[self.at])})")


@handler("tk.wait_signal")
def _wait_signal(c, op):
    place, value = _flag(c, op)

    def step(env, w):
        raw, at, key, arr = place(env)
        waiting = FlagWaiting(op, raw, at, int(env[value]), arr)
        while not waiting.ready():
            yield waiting
        if w.block.peers is not None:
            w.block.peers.acquire(w.block.agent, key)
    return Step(step, op, gen=True)
