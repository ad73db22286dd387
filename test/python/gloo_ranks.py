"""Ranks as processes over gloo, for the CPU tests of tkc's torch.distributed
ops: `run(worker, world, tmp_path, *args)` forks `world` processes, each of
which joins one gloo group and returns worker(rank, world, *args) (tensors),
and gives their results in rank order; any rank's failure fails the test.

Forked, not spawned: a spawned process imports torch and tkc again (about 3 s
of CPU each on the CI's 2 cores) where a fork shares the test process's. The
children set one intra-op thread first: an OpenMP pool the parent started is
not theirs to use."""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(worker, world: int, tmp_path, *args, timeout: float = 180) -> list:
    _warm_compile()
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_rank, args=(worker, rank, world, str(tmp_path), args))
             for rank in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    for p in procs:
        if p.is_alive():
            p.kill()
    assert all(p.exitcode == 0 for p in procs), f"rank exit codes {[p.exitcode for p in procs]}"
    return [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(world)]


def _rank(worker, rank: int, world: int, path: str, args) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{path}/init", rank=rank, world_size=world)
    try:
        out = worker(rank, world, *args)
    finally:
        dist.destroy_process_group()
    torch.save(out, f"{path}/rank{rank}.pt")


def _warm_compile() -> None:
    """The workers call torch.compile: its first call imports dynamo and
    AOTAutograd (~1.5 s of CPU). Made here, once, the forks share it instead
    of each making it again (the test process has usually made it already)."""
    torch.compile(lambda x: x + 1, backend="aot_eager")(torch.zeros(1))

