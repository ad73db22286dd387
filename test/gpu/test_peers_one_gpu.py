"""Multi-rank kernels on ONE GPU: each rank's launch on its own stream of one
process, the peers' buffers plain device pointers of that process, and the
persistent kernels' grids cut to SMs / world so that every rank's blocks are
resident at once (a rank's blocks spin on flags only other ranks raise).
This runs the peer pointers, the peer tensor maps, signal / wait_signal and
barrier_all on the hardware where no 2-GPU machine is at hand; the same
kernels under torchrun on several GPUs: test_multi_gpu.py."""
import sys
import time
from pathlib import Path

import pytest

from tkc.kernels.collective_gemm import FLAGS, all_gather_gemm, gemm_reduce_scatter, rs_barrier
from tkc.runtime import driver
from tkc.runtime.peers import Peers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from peers_kernels import T, ring  # noqa: E402

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
KERNELS = [ring, rs_barrier, all_gather_gemm, *(gemm_reduce_scatter(w) for w in (2, 4))]


def peers(ts, r):
    return Peers(ts[r], [t.data_ptr() for t in ts], r)


def concurrently(world, launch, join=True):
    streams = [torch.cuda.Stream() for _ in range(world)]
    torch.cuda.synchronize()
    for r in range(world):
        with torch.cuda.stream(streams[r]):
            launch(r, streams[r])
    if join:
        torch.cuda.synchronize()


def rel(x, ref):
    return float((x.float() - ref).norm() / ref.norm())


@pytest.fixture
def sms_per_rank(monkeypatch):
    real = driver.multiprocessors

    def cut(world, spare=0):
        monkeypatch.setattr(driver, "multiprocessors", lambda device: (real(device) - spare) // world)
    return cut


@pytest.mark.parametrize("world", [2, 4, 8])
def test_ring_exchanges_tiles(world):
    xs = [torch.zeros(world * T, T, device="cuda", dtype=torch.bfloat16) for _ in range(world)]
    flags = [torch.zeros(1, 16, device="cuda", dtype=torch.int32) for _ in range(world)]
    ys = [torch.randint(-8, 8, (T, T), device="cuda").bfloat16() for _ in range(world)]
    outs = [torch.zeros(T, T, device="cuda", dtype=torch.bfloat16) for _ in range(world)]
    concurrently(world, lambda r, s: ring(peers(xs, r), peers(flags, r), ys[r], outs[r], stream=s))
    for r in range(world):
        assert torch.equal(xs[r], torch.cat(ys))
        assert torch.equal(outs[r], ys[(r + 1) % world])


@pytest.mark.parametrize("world, Ms, K, N", [(2, 256, 512, 512), (2, 1024, 3080, 3000), (4, 1024, 3080, 3000)])
def test_all_gather_gemm_on_one_gpu(sms_per_rank, world, Ms, K, N):
    """The op's schedule with every rank a stream: its own shard copied in,
    the kernel launched, then the copy engines' pushes (collective.push) on a
    stream of their own, issued 2 ms later: every kernel reaches its peers'
    rows first, and must wait for them."""
    from tkc.torchops.collective import push
    sms_per_rank(world, spare=8)   # (a copy within one GPU may take SMs: ranks on two GPUs copy by NVLink)
    M = Ms * world
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / K ** 0.5
    want = a.float() @ b.float()
    ag = [torch.zeros(2, M, K, device="cuda", dtype=torch.bfloat16) for _ in range(world)]
    flags = [torch.zeros(1, FLAGS, device="cuda", dtype=torch.int32) for _ in range(world)]
    cs = [torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(world)]
    pushes = [torch.cuda.Stream() for _ in range(world)]
    shards = [a[r * Ms:(r + 1) * Ms] for r in range(world)]
    outs = [torch.full((M, K), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(world)]
    epochs = {e: torch.full((1, 1, 1, 1), e, device="cuda", dtype=torch.int32) for e in (1, 2)}
    for epoch, chunk in ((1, 1), (2, Ms // 128 // 2)):   # a flag a row tile, then two chunks a shard
        def launch(r, s):   # the gathered A kept (stored by the kernel) on the first call only
            ag[r][epoch % 2, r * Ms:(r + 1) * Ms].copy_(shards[r])
            all_gather_gemm(peers(ag, r), b, cs[r], outs[r], peers(flags, r), epochs[epoch], chunk,
                            int(epoch == 1), stream=s)
        concurrently(world, launch, join=False)
        time.sleep(0.002)
        for r in range(world):
            push(shards[r], peers(ag, r), peers(flags, r), epoch, chunk, pushes[r].cuda_stream)
        torch.cuda.synchronize()
        for r in range(world):
            assert rel(cs[r], want) < 5e-3
            assert torch.equal(ag[r][epoch % 2], a)   # every rank gathered every shard
            assert torch.equal(outs[r], a)            # the kept A (the second call's stores clipped)
            assert int(flags[r].max()) == epoch


@pytest.mark.parametrize("world, Ms, K, N", [(2, 256, 256, 512), (2, 1024, 1536, 3000), (4, 1024, 768, 3000)])
def test_gemm_reduce_scatter_on_one_gpu(sms_per_rank, world, Ms, K, N):
    sms_per_rank(world)
    M = Ms * world
    As = [torch.randn(M, K, device="cuda", dtype=torch.bfloat16) for _ in range(world)]
    Bs = [torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / K ** 0.5 for _ in range(world)]
    full = sum(x.float() @ y.float() for x, y in zip(As, Bs))
    rs = [torch.zeros(2, Ms, N, device="cuda", dtype=torch.bfloat16) for _ in range(world)]
    flags = [torch.zeros(1, 16, device="cuda", dtype=torch.int32) for _ in range(world)]
    kernel = gemm_reduce_scatter(world)

    def launch(r, s):
        kernel(As[r], Bs[r], peers(rs, r), epoch, stream=s)
        rs_barrier(peers(flags, r), stream=s)
    for epoch in (1, 2):
        concurrently(world, launch)
        for r in range(world):   # bf16 adds of world partial tiles: a rounding each
            assert rel(rs[r][epoch % 2], full[r * Ms:(r + 1) * Ms]) < 1e-2
            rs[r][epoch % 2].zero_()
