"""Fused collective GEMMs on several GPUs (docs/multi-gpu.md): each op against
NCCL + cuBLAS in sequence and against PyTorch's fused symmetric-memory ops,
with the overlap efficiency (the matmul alone / the fused op); and ring
attention (causal, 32k tokens in all, 32 heads of 128, GQA 8 KV heads)
against all-gathering K and V and tkc.attention over them.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        torchrun --nproc-per-node=2 bench/multi_gpu.py [--rounds 20] [--ring-tokens 65536] [--only ag rs ring]

The GPU count is torchrun's world size. Shapes: 8192 rows a rank x 8192 x
8192, and Llama-70B tensor-parallel (hidden 8192, intermediate 28672): the
MLP's up projection column-parallel (all_gather_matmul: rows = 8192 tokens
a rank, K 8192, N 28672 / world) and its down projection row-parallel
(matmul_reduce_scatter: M = 8192 tokens a rank x world, K 28672 / world, N
8192); and the multi-GPU issue's shapes, 8192 rows in all with N (or K)
split. CUDA events around each call on every rank, the slowest rank's time (a
step lasts until its last rank is done), interleaved rounds, the median;
rank 0 prints the table: each call right after a barrier (its host time
counts: the GPU waits for it), and with the host ahead (the call queued
behind a GPU spin, as in a model's step, where the host runs ahead).
"""
import os

os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                   "NVSHMEM_DISABLE_NVLS": "1"})

import argparse  # noqa: E402
import statistics  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def timed(fn, group) -> float:
    """ms of one call, the slowest rank's: the ranks start together (a
    barrier), each times its own part, and the step lasts as long as the
    rank that finishes last (the all-gather baseline of ring attention
    leaves rank 0 a third of the last rank's causal work)."""
    return _timed(fn, group, ahead=False)


def queued(fn, group) -> float:
    """timed's ms with the host ahead of the GPU, as in a model's step: the
    call is made while the GPU still spins (~1.5 ms), so its launches wait
    in the queue and their host time is hidden (the fused ops' kernels
    cannot be captured in a graph: this is their kernel-time measure)."""
    return _timed(fn, group, ahead=True)


def _timed(fn, group, ahead: bool) -> float:
    dist.barrier(group=group)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if ahead:
        torch.cuda._sleep(3_000_000)
    start.record()
    fn()
    end.record()
    end.synchronize()
    ms = torch.tensor([start.elapsed_time(end)], device=torch.cuda.current_device())
    dist.all_reduce(ms, op=dist.ReduceOp.MAX, group=group)
    return ms.item()


def cases(world, rank):
    """(name, op, rows a rank, K, N): the products each rank computes."""
    return [("all_gather_matmul", "ag", 8192, 8192, 8192),
            ("matmul_reduce_scatter", "rs", 8192, 8192, 8192),
            ("llama70b up (col-parallel)", "ag", 8192, 8192, 28672 // world),
            ("llama70b down (row-parallel)", "rs", 8192, 28672 // world, 8192),
            # the multi-GPU issue's own measurement: 8192 rows in all, N or K split
            ("all_gather_matmul, 8192 rows in all", "ag", 8192 // world, 8192, 8192 // world),
            ("matmul_reduce_scatter, 8192 rows in all", "rs", 8192 // world, 8192 // world, 8192),
            # the gathered A returned too (return_A=True, the op's default: a training step's)
            ("all_gather_matmul, 8192 rows in all, A", "ag_a", 8192 // world, 8192, 8192 // world)]


def runners(kind, Ms, K, N, world, group, dev):
    import tkc
    name = group.group_name
    bf = torch.bfloat16
    if kind in ("ag", "ag_a"):
        keep = kind == "ag_a"
        a_shard = torch.randn(Ms, K, device=dev).to(bf)
        b = torch.randn(K, N, device=dev).to(bf)
        a_full = torch.empty(world * Ms, K, device=dev, dtype=bf)

        def seq():
            dist.all_gather_into_tensor(a_full, a_shard, group=group)
            return a_full @ b
        return {"tkc": lambda: tkc.all_gather_matmul(a_shard, b, group, return_A=keep),
                "nccl+cublas": seq,
                "torch fused": lambda: torch.ops.symm_mem.fused_all_gather_matmul(
                    a_shard, [b], 0, name, return_A=keep),
                "matmul alone": lambda: a_full @ b}, 2 * world * Ms * K * N
    a = torch.randn(world * Ms, K, device=dev).to(bf)
    b = torch.randn(K, N, device=dev).to(bf)
    out = torch.empty(Ms, N, device=dev, dtype=bf)

    def seq():
        dist.reduce_scatter_tensor(out, a @ b, group=group)
    return {"tkc": lambda: tkc.matmul_reduce_scatter(a, b, group),
            "nccl+cublas": seq,
            "torch fused": lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, name),
            "matmul alone": lambda: a @ b}, 2 * world * Ms * K * N


def ring_row(world, rank, group, dev, rounds, L=32768):
    """(ms of tkc.ring_attention, ms of all_gather K/V + tkc.attention):
    B 1, L tokens, this rank's L / world of them (zigzag parts for the
    ring, contiguous ones for the all-gather, which tkc.attention serves
    with the causal mask aligned at the end)."""
    import tkc
    bf = torch.bfloat16
    Ls = L // world
    q = torch.randn(1, 32, Ls, 128, device=dev).to(bf)
    k, v = (torch.randn(1, 8, Ls, 128, device=dev).to(bf) for _ in range(2))
    kv_all = torch.empty(world, 2, 1, 8, Ls, 128, device=dev, dtype=bf)

    def gathered():
        dist.all_gather_into_tensor(kv_all, torch.stack([k, v]), group=group)
        ks, vs = (kv_all[:, i].permute(1, 2, 0, 3, 4).reshape(1, 8, L, 128)[:, :, :(rank + 1) * Ls]
                  for i in range(2))
        return tkc.attention(q, ks, vs, causal=True)
    run = {"tkc ring": lambda: tkc.ring_attention(q, k, v, group=group, causal=True),
           "all-gather + attention": gathered}
    for fn in run.values():
        fn()
    times = {n: [] for n in run}
    for _ in range(rounds):
        for n, fn in run.items():
            times[n].append(timed(fn, group))
    return {n: statistics.median(t) for n, t in times.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--ring-tokens", type=int, default=32768, help="ring attention's sequence, all ranks' tokens")
    p.add_argument("--only", nargs="+", choices=("ag", "rs", "ring"), default=("ag", "rs", "ring"),
                   help="the rows to run: all_gather_matmul's, matmul_reduce_scatter's, ring attention's")
    args = p.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dev = torch.device(f"cuda:{rank}")
    dist.init_process_group("nccl", device_id=dev)
    group = dist.group.WORLD
    import torch.distributed._symmetric_memory as symm_mem
    symm_mem.enable_symm_mem_for_group(group.group_name)
    rows = []
    for title, kind, Ms, K, N in cases(world, rank):
        if kind.split("_")[0] not in args.only:
            continue
        run, flops = runners(kind, Ms, K, N, world, group, dev)
        times = {(k, how): [] for k in run for how in (timed, queued)}
        for fn in run.values():   # warm-up: builds, rendezvous, workspaces
            fn()
        for _ in range(args.rounds):   # interleaved rounds
            for k, fn in run.items():
                for how in (timed, queued):
                    times[(k, how)].append(how(fn, group))
        med = {k: statistics.median(times[(k, timed)]) for k in run}
        ahead = {k: statistics.median(times[(k, queued)]) for k in run}
        rows.append((title, Ms, K, N, med, ahead, flops))
    if rank == 0:
        print(f"{world} GPUs ({torch.cuda.get_device_name()}), median of {args.rounds} interleaved rounds, ms")
        print(f"{'op':40} {'rows/rank x K x N':>22} {'tkc':>7} {'nccl+cublas':>11} {'torch fused':>11} "
              f"{'matmul':>7} {'vs seq':>7} {'vs torch':>8} {'overlap eff':>11} | host ahead: "
              f"{'tkc':>7} {'vs seq':>7} {'vs torch':>8} {'overlap eff':>11}")
        for title, Ms, K, N, m, q, flops in rows:
            print(f"{title:40} {f'{Ms} x {K} x {N}':>22} {m['tkc']:7.3f} {m['nccl+cublas']:11.3f} "
                  f"{m['torch fused']:11.3f} {m['matmul alone']:7.3f} {m['nccl+cublas'] / m['tkc']:6.2f}x "
                  f"{m['torch fused'] / m['tkc']:7.2f}x {m['matmul alone'] / m['tkc']:10.2f} | "
                  f"{'':11} {q['tkc']:7.3f} {q['nccl+cublas'] / q['tkc']:6.2f}x {q['torch fused'] / q['tkc']:7.2f}x "
                  f"{q['matmul alone'] / q['tkc']:10.2f}")
    ring = ring_row(world, rank, group, dev, args.rounds, args.ring_tokens) if "ring" in args.only else None
    if rank == 0 and ring:
        print(f"ring attention, causal, {args.ring_tokens // 1024}k tokens, 32 heads (8 KV) of 128: tkc "
              f"{ring['tkc ring']:.3f} ms, "
              f"all-gather + tkc.attention {ring['all-gather + attention']:.3f} ms "
              f"({ring['all-gather + attention'] / ring['tkc ring']:.2f}x)")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
