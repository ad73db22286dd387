"""Multi-GPU checks, run by test/gpu/test_multi_gpu.py under
`torchrun --nproc-per-node=2 test/gpu/multi/run_peers.py` (any world of 2
to 8). Each rank exits non-zero with the reason on the first mismatch.

- the part-1 ring kernel (a tile pushed into every rank's buffer, the right
  neighbour's read back, barrier_all) against numpy;
- tkc.all_gather_matmul and tkc.matmul_reduce_scatter against NCCL +
  torch.matmul in sequence, at ragged-ish shapes (N and K not multiples of
  the tile, shards of 128-row tiles, and one that falls back to NCCL) and
  at 8192 rows a rank x 8192 x 8192, twice each (the flags' epochs and the
  parity buffers), within bf16 tolerance;
- both ops captured in a CUDA graph (the NCCL + tkc.matmul path there),
  replayed twice on new inputs;
- tkc.ring_attention, causal (zigzag order) and not, GQA, against
  tkc.attention over the all-gathered sequence.

Its kernels are module-level or library ones, so `tkc build
test/gpu/multi/run_peers.py` prebuilds them (the library has the fused
GEMMs for 2 to 8 ranks).
"""
import os

# NVLink multicast off before torch initialises distributed (docs/multi-gpu.md)
os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                   "NVSHMEM_DISABLE_NVLS": "1"})

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import tkc  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from peers_kernels import T, ring  # noqa: E402  (test/python: the interpreter tests' kernel)


def fail(rank, what):
    sys.stderr.write(f"rank {rank}: FAILED {what}\n")
    sys.exit(1)


def check_ring(group, rank, world):
    import torch
    from tkc.torchops.symm import buffer
    x = buffer(group, (world * T, T), torch.bfloat16, f"cuda:{rank}", "test.ring.x")
    flags = buffer(group, (1, 16), torch.int32, f"cuda:{rank}", "test.ring.flags")
    ys = [np.random.default_rng(r).integers(-8, 8, (T, T)).astype(np.float32) for r in range(world)]
    y = torch.tensor(ys[rank], dtype=torch.bfloat16, device=f"cuda:{rank}")
    out = torch.zeros(T, T, dtype=torch.bfloat16, device=f"cuda:{rank}")
    ring(x.peers, flags.peers, y, out)
    torch.cuda.synchronize()
    if not np.array_equal(x.tensor.float().cpu().numpy(), np.concatenate(ys)):
        fail(rank, "ring: the gathered buffer differs from numpy's")
    if not np.array_equal(out.float().cpu().numpy(), ys[(rank + 1) % world]):
        fail(rank, "ring: the neighbour's tile differs")
    want = np.zeros(16, np.int32)
    want[:world] = 1
    if not np.array_equal(flags.tensor.cpu().numpy()[0], want):
        fail(rank, f"ring: flags {flags.tensor.cpu().numpy()[0]}, want {want}")


def close(got, want, what, rank):
    """bf16 tolerance: relative 2-norm error (the products' accumulation order differs)."""
    import torch
    err = (torch.linalg.vector_norm((got.float() - want.float())) /
           torch.linalg.vector_norm(want.float()).clamp_min(1e-30)).item()
    if not err < 1e-2:
        fail(rank, f"{what}: relative error {err:.3g}")


def check_ops(group, rank, world, Ms, K, N):
    import torch
    import torch.distributed as dist
    dev = f"cuda:{rank}"
    g = torch.Generator(device=dev).manual_seed(1000 * rank + Ms + K + N)
    for call in range(2):
        a_shard = torch.randn(Ms, K, device=dev, generator=g).to(torch.bfloat16)
        b = torch.randn(K, N, device=dev, generator=g).to(torch.bfloat16) / K ** 0.5
        a_all, c = tkc.all_gather_matmul(a_shard, b, group)
        ref_a = a_shard.new_empty(world * Ms, K)
        dist.all_gather_into_tensor(ref_a, a_shard, group=group)
        if not torch.equal(a_all, ref_a):
            fail(rank, f"all_gather_matmul {Ms}x{K}x{N} call {call}: the gathered A differs")
        close(c, ref_a @ b, f"all_gather_matmul {Ms}x{K}x{N} call {call}", rank)
        a = torch.randn(world * Ms, K, device=dev, generator=g).to(torch.bfloat16)
        out = tkc.matmul_reduce_scatter(a, b, group)
        ref = a.new_empty(Ms, N)
        dist.reduce_scatter_tensor(ref, a @ b, group=group)
        close(out, ref, f"matmul_reduce_scatter {Ms}x{K}x{N} call {call}", rank)


def check_capture(group, rank, world):
    """Both ops captured in a CUDA graph (which takes the NCCL + tkc.matmul
    path: the fused kernels' flags count calls) replay right on new inputs."""
    import torch
    import torch.distributed as dist
    dev = f"cuda:{rank}"
    Ms, K, N = 2048, 4104, 4104   # a shape the fused kernels serve outside a graph
    g = torch.Generator(device=dev).manual_seed(77 + rank)
    a_shard = torch.zeros(Ms, K, device=dev, dtype=torch.bfloat16)
    a = torch.zeros(world * Ms, K, device=dev, dtype=torch.bfloat16)
    b = (torch.randn(K, N, device=dev, generator=g) / K ** 0.5).to(torch.bfloat16)
    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):   # warm-up off the default stream, as torch.cuda.graphs asks
        for _ in range(2):
            tkc.all_gather_matmul(a_shard, b, group)
            tkc.matmul_reduce_scatter(a, b, group)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        a_all, c = tkc.all_gather_matmul(a_shard, b, group)
        out = tkc.matmul_reduce_scatter(a, b, group)
    for call in range(2):
        a_shard.copy_(torch.randn(Ms, K, device=dev, generator=g))
        a.copy_(torch.randn(world * Ms, K, device=dev, generator=g))
        graph.replay()
        ref_a = a_shard.new_empty(world * Ms, K)
        dist.all_gather_into_tensor(ref_a, a_shard, group=group)
        if not torch.equal(a_all, ref_a):
            fail(rank, f"captured all_gather_matmul replay {call}: the gathered A differs")
        close(c, ref_a @ b, f"captured all_gather_matmul replay {call}", rank)
        ref = a.new_empty(Ms, N)
        dist.reduce_scatter_tensor(ref, a @ b, group=group)
        close(out, ref, f"captured matmul_reduce_scatter replay {call}", rank)


def check_ring_attention(group, rank, world):
    import torch
    import torch.distributed as dist
    from tkc.torchops.ring import unzigzag, zigzag
    dev = f"cuda:{rank}"
    g = torch.Generator(device=dev).manual_seed(7)   # the same whole sequence on every rank
    for causal, H, Hkv, L in ((True, 8, 2, 4096 * world), (False, 4, 4, 1024 * world), (True, 4, 4, 512 * world)):
        q = torch.randn(2, H, L, 128, device=dev, generator=g).to(torch.bfloat16)
        k, v = (torch.randn(2, Hkv, L, 128, device=dev, generator=g).to(torch.bfloat16) for _ in range(2))
        parts = [zigzag(x, world)[rank] if causal else x.chunk(world, 2)[rank].contiguous() for x in (q, k, v)]
        o = tkc.ring_attention(*parts, group=group, causal=causal)
        outs = [torch.empty_like(o) for _ in range(world)]
        dist.all_gather(outs, o.contiguous(), group=group)
        got = unzigzag(outs) if causal else torch.cat(outs, 2)
        close(got, tkc.attention(q, k, v, causal=causal), f"ring_attention causal={causal} L={L}", rank)


def main():
    import torch
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device(f"cuda:{rank}"))
    group = dist.group.WORLD
    check_ring(group, rank, world)
    # fused: K and N past whole tiles (6000 = 93.75 K steps, 3080 and 4104 columns); fallback:
    # too small (128 x 200 x 264), shards of partial tiles (1000 rows)
    from tkc.torchops.collective import fused
    for Ms, K, N, path in ((128, 200, 264, False), (1536, 6000, 3080, True), (2048, 4104, 4104, True),
                           (1000, 512, 512, False), (8192, 8192, 8192, True)):
        if fused(world * Ms, N, K, world, Ms) != path:
            fail(rank, f"{Ms}x{K}x{N} is meant to take the {'fused' if path else 'NCCL'} path")
        check_ops(group, rank, world, Ms, K, N)
    check_capture(group, rank, world)
    check_ring_attention(group, rank, world)
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: ok")


if __name__ == "__main__":
    main()
