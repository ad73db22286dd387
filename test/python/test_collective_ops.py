"""tkc.all_gather_matmul and tkc.matmul_reduce_scatter without a GPU: the
argument checks, the fused-or-fallback choice, the refusal to allocate
symmetric memory with NVLink multicast on (the GPU tests run them under
torchrun: test/gpu/test_multi_gpu.py)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tkc  # noqa: E402
from tkc.torchops import collective, symm  # noqa: E402

import gloo_ranks  # noqa: E402


def test_bad_operands_are_refused_where_called():
    a, b = torch.zeros(128, 64, dtype=torch.bfloat16), torch.zeros(32, 64, dtype=torch.bfloat16)
    with pytest.raises(tkc.diagnostics.TkcError, match="b must be \\[K, N\\] with a_shard's K = 64") as e:
        tkc.all_gather_matmul(a, b, None)
    assert e.value.where.startswith(__file__)
    with pytest.raises(tkc.diagnostics.TkcError, match="K = 60 and N = 64 must be multiples of 8"):
        tkc.matmul_reduce_scatter(torch.zeros(128, 60, dtype=torch.bfloat16),
                                  torch.zeros(60, 64, dtype=torch.bfloat16), None)
    with pytest.raises(tkc.diagnostics.TkcError, match="must be one of|bfloat16|dtype"):
        tkc.matmul_reduce_scatter(torch.zeros(128, 64), torch.zeros(64, 64), None)


def test_no_process_group_is_refused_where_called():
    """Without torch.distributed initialised and no group=, each multi-GPU op
    says so at the caller's line (it was an AttributeError of None)."""
    import torch.distributed as dist

    from tkc.bench.fake_driver import fake_driver
    assert not dist.is_initialized()
    x = torch.zeros(128, 64, dtype=torch.bfloat16)
    q = torch.zeros(1, 2, 64, 64, dtype=torch.bfloat16)
    w = x.t().contiguous()
    for call in (lambda: tkc.all_gather_matmul(x, w), lambda: tkc.matmul_reduce_scatter(x, w),
                 lambda: tkc.ring_attention(q, q, q)):
        with fake_driver(), pytest.raises(tkc.diagnostics.TkcError, match="no process group: torch.distributed "
                                                                          "is not initialised") as e:
            call()
        assert e.value.where.startswith(__file__)


def test_fused_or_fallback():
    assert collective.fused(16384, 8192, 8192, 2, 8192)
    assert not collective.fused(16384, 8192, 8192, 1, 16384)      # one rank: nothing to overlap
    assert not collective.fused(16384 - 128, 8192, 8192, 2, 8128)  # a shard of partial tiles
    assert not collective.fused(256, 256, 256, 2, 128)             # too small to win
    assert not collective.fused(16384, 8192, 8192, 16, 1024)       # past the 8 peer slots


def test_a_call_in_a_cuda_graph_takes_the_nccl_path(monkeypatch):
    """Under capture, a shape the fused kernels would serve runs NCCL and
    tkc.matmul (which graphs replay) and never reaches the fused kernels,
    whose flags count calls. The group and collectives faked: one process
    without a GPU."""
    class Group:
        def size(self):
            return 2

        def rank(self):
            return 0
    Ms, K, N = 8192, 8192, 8192
    assert collective.fused(2 * Ms, N, K, 2, Ms)

    def fused_path(*args):
        raise AssertionError("the fused kernels were reached under capture")
    monkeypatch.setattr(collective, "process_group", lambda name: Group())
    monkeypatch.setattr(collective, "buffer", fused_path)
    monkeypatch.setattr(collective, "matmul", lambda a, b: ("matmul", a.shape, b.shape))
    monkeypatch.setattr(collective, "_gather", lambda x, g: x.new_empty(2 * x.shape[0], x.shape[1]))
    monkeypatch.setattr(collective, "_scatter", lambda x, g: ("scatter", x))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    a = torch.empty(Ms, K, dtype=torch.bfloat16, device="meta")
    b = torch.empty(K, N, dtype=torch.bfloat16, device="meta")
    gathered, c = collective._ag_impl(a, b, "g", True)
    assert gathered.shape == (2 * Ms, K) and c == ("matmul", (2 * Ms, K), (K, N))
    assert collective._rs_impl(torch.empty(2 * Ms, K, device="meta"), b, "g") == ("scatter", ("matmul", (2 * Ms, K),
                                                                                                (K, N)))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    with pytest.raises(AssertionError, match="fused kernels were reached"):   # not capturing: fused
        collective._ag_impl(a, b, "g", True)


def test_pushed_chunks():
    """A quarter of the shard a chunk; a half, or the whole, where a quarter
    is not whole 128-row tiles or under CHUNK_BYTES."""
    mib = 1 << 20
    assert collective.chunk_tiles(32, 64 * mib) == 8
    assert collective.chunk_tiles(6, 64 * mib) == 3
    assert collective.chunk_tiles(5, 64 * mib) == 5
    assert collective.chunk_tiles(32, 12 * mib) == 16        # quarters of 3 MiB: halves
    assert collective.chunk_tiles(32, 6 * mib) == 32


def test_symmetric_memory_needs_multicast_off(monkeypatch):
    for k in symm.NO_MULTICAST:
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(tkc.diagnostics.TkcError, match="NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1"):
        symm.check_no_multicast()
    symm.no_multicast()
    symm.check_no_multicast()
    import os
    assert os.environ["NVSHMEM_DISABLE_NVLS"] == "1"


def _cpu_matmul(a, b):
    return (a.float() @ b.float()).bfloat16()


def _worker(rank, world, ins):
    """One rank over gloo: both ops (their NCCL + matmul path, a CPU matmul for tkc.matmul's),
    forward and backward, eager and under torch.compile (the custom ops and their fake impls)."""
    from tkc.torchops import checks
    checks.DEVICE_TYPE = "cpu"
    collective.matmul = _cpu_matmul
    a_shards, b_cols, w_c, w_a, a_rows, b_rows = ins
    x = a_shards[rank].clone().requires_grad_()
    y = b_cols[rank].clone().requires_grad_()
    a, c = tkc.all_gather_matmul(x, y)
    ((c.float() * w_c[rank]).sum() + (a.float() * w_a[rank]).sum()).backward()
    _, c_only = tkc.all_gather_matmul(x.detach(), y.detach(), return_A=False)
    p = a_rows[rank].clone().requires_grad_()
    q = b_rows[rank].clone().requires_grad_()
    o = tkc.matmul_reduce_scatter(p, q)
    (o.float() * w_c[rank][:o.shape[0], :o.shape[1]]).sum().backward()

    def both(x, y, p, q):
        return tkc.all_gather_matmul(x, y)[1], tkc.matmul_reduce_scatter(p, q)
    compiled = torch.compile(both, backend="aot_eager")(x.detach(), y.detach(), p.detach(), q.detach())
    return [t.detach() for t in (a, c, x.grad, y.grad, c_only, o, p.grad, q.grad, *compiled)]


@pytest.mark.parametrize("world", [2, 4, 8])
def test_ops_and_their_gradients_over_torch_distributed(tmp_path, world):
    """Both ops on 2, 4 and 8 gloo ranks against one process's float64 autograd over the whole problem:
    the outputs, every rank's gradients (a loss on each rank's outputs, the gathered A's too), the
    return_A=False call, and torch.compile's (the custom ops traced through their fake impls)."""
    Ms, K, N = 8, 16, 24
    g = torch.Generator().manual_seed(3)
    r = lambda *s: torch.randn(*s, generator=g).bfloat16()  # noqa: E731
    ins = ([r(Ms, K) for _ in range(world)], [r(K, N) for _ in range(world)],
           [r(world * Ms, N).float() for _ in range(world)], [r(world * Ms, K).float() for _ in range(world)],
           [r(world * Ms, K) for _ in range(world)], [r(K, N) for _ in range(world)])
    got = gloo_ranks.run(_worker, world, tmp_path, ins)
    a_shards, b_cols, w_c, w_a, a_rows, b_rows = ins
    d = lambda ts: [t.double().requires_grad_() for t in ts]  # noqa: E731
    xs, ys, ps, qs = d(a_shards), d(b_cols), d(a_rows), d(b_rows)
    A = torch.cat(xs)
    cs = [A @ y for y in ys]
    total = sum(p @ q for p, q in zip(ps, qs))
    os = list(total.chunk(world))
    loss = sum((c * wc).sum() + (A * wa).sum() for c, wc, wa in zip(cs, w_c, w_a))
    loss = loss + sum((o * wc[:Ms]).sum() for o, wc in zip(os, w_c))
    loss.backward()
    close = lambda got, want: float((got.double() - want).norm() / want.norm()) < 1e-2  # noqa: E731
    for k in range(world):
        a, c, gx, gy, c_only, o, gp, gq, c_comp, o_comp = got[k]
        assert torch.equal(a, torch.cat(a_shards)) and close(c, cs[k].detach())
        assert torch.equal(c_only, c) and torch.equal(c_comp, c) and torch.equal(o_comp, o)
        assert close(o, os[k].detach())
        for mine, want in ((gx, xs[k].grad), (gy, ys[k].grad), (gp, ps[k].grad), (gq, qs[k].grad)):
            assert close(mine, want)
