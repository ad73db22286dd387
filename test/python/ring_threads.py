"""Ranks as threads of one process, for tkc.ring_attention's tests (CPU and
one GPU): an in-process stand-in for torch.distributed's point-to-point
calls, a group per rank, and a runner that fails on any rank's error."""
from __future__ import annotations

import queue
import threading
from collections import namedtuple

import torch

from tkc.torchops import ring


class Ring:
    """torch.distributed's point-to-point calls between threads: a queue per
    (sender, receiver); a batch posts its sends, and its request's wait takes
    what its receives expect."""
    P2POp = namedtuple("P2POp", "op tensor peer group")

    def __init__(self):
        self.queues, self.lock = {}, threading.Lock()

    def _q(self, src, dst):
        with self.lock:
            return self.queues.setdefault((src, dst), queue.Queue())

    def isend(self):
        pass

    def irecv(self):
        pass

    def get_global_rank(self, group, rank):
        return rank

    def batch_isend_irecv(self, ops):
        for o in ops:
            if o.op == self.isend:
                copy = o.tensor.clone()
                if copy.is_cuda:   # another thread's stream reads it: done before it is posted
                    torch.cuda.current_stream(copy.device).synchronize()
                self._q(o.group.rank(), o.peer).put(copy)
        recvs = [o for o in ops if o.op == self.irecv]

        class Req:
            def wait(_):
                for o in recvs:
                    o.tensor.copy_(self._q(o.peer, o.group.rank()).get(timeout=60))
        return [Req()]


class Group:
    def __init__(self, rank, world):
        self._rank, self._world = rank, world
        self.group_name = f"ring-threads-{id(self)}"   # ring_attention passes groups by name

    def rank(self):
        return self._rank

    def size(self):
        return self._world


def run_ranks(monkeypatch, world: int, call) -> list:
    """call(rank, group) on `world` threads over one Ring: their results in rank order."""
    fake = Ring()
    monkeypatch.setattr(ring, "_dist", lambda: fake)
    groups = [Group(r, world) for r in range(world)]
    named = {g.group_name: g for g in groups}
    monkeypatch.setattr(ring, "_named", named.__getitem__)
    out, errors = {}, []

    def rank(r):
        try:
            out[r] = call(r, groups[r])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return [out[r] for r in range(world)]
