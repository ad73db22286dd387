"""The FFT convolution on the GPU through its torch op (tkc.fftconv with
tkc.fftconv_filter), against a float64 torch.fft reference, circular and
causal at each FFT size of the library; refusals; torch.compile without a
graph break; CUDA-graph capture."""
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def rel_err(x, ref):
    return float((x.double() - ref.double()).norm() / ref.double().norm())


def reference(u, k, N):
    L = u.shape[-1]
    y = torch.fft.irfft(torch.fft.rfft(u.double(), n=N) * torch.fft.rfft(k.double(), n=N), n=N)
    return y[..., :L]


def inputs(B, D, L, N):
    taps = N if L == N else N - L + 1
    u = torch.randn(B, D, L, device="cuda").bfloat16()
    k = torch.randn(D, taps, device="cuda") * torch.exp(-torch.arange(taps, device="cuda") / (taps / 4))
    return u, k


@pytest.mark.parametrize("N", [1024, 2048, 4096])
@pytest.mark.parametrize("causal", [False, True])
def test_fftconv(N, causal):
    import tkc
    L = N // 2 if causal else N
    u, k = inputs(3, 256, L, N)
    y = tkc.fftconv(u, tkc.fftconv_filter(k, N))
    assert y.shape == u.shape and y.dtype == torch.bfloat16
    assert rel_err(y, reference(u, k, N)) < 1e-2


def test_causal_matches_direct_convolution():
    import tkc
    u, k = inputs(1, 8, 512, 1024)
    y = tkc.fftconv(u, tkc.fftconv_filter(k, 1024))
    direct = torch.nn.functional.conv1d(torch.nn.functional.pad(u.double(), (k.shape[-1] - 1, 0)),
                                        k.double().flip(-1)[:, None], groups=8)
    assert rel_err(y, direct) < 1e-2


def test_refusals():
    import tkc
    from tkc.diagnostics import TkcError
    u, k = inputs(1, 8, 1024, 1024)
    kf = tkc.fftconv_filter(k, 1024)
    with pytest.raises(TkcError, match="L = 1000"):
        tkc.fftconv(u[..., :1000], kf)
    with pytest.raises(TkcError, match="kf has 8 channels"):
        tkc.fftconv(torch.zeros(1, 16, 1024, device="cuda", dtype=torch.bfloat16), kf)
    with pytest.raises(TkcError, match="u must be a bf16 tensor"):
        tkc.fftconv(u.float(), kf)


def test_compile_graph_and_opcheck():
    import tkc
    from tkc.torchops import long_conv as fftconv_ops
    u, k = inputs(2, 8, 2048, 2048)
    kf = tkc.fftconv_filter(k, 2048)
    f = torch.compile(lambda u: tkc.fftconv(u, kf) * 2, fullgraph=True)
    assert rel_err(f(u), 2 * reference(u, k, 2048)) < 1e-2
    torch.library.opcheck(fftconv_ops._fftconv.custom_op, (u, kf))
    y = tkc.fftconv(u, kf)          # warm: the module is loaded before capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = tkc.fftconv(u, kf)
    u.copy_(torch.randn_like(u.float()).bfloat16())
    g.replay()
    torch.cuda.synchronize()
    assert rel_err(y, reference(u, k, 2048)) < 1e-2


@pytest.mark.parametrize("N", [1024, 2048])
def test_batch_split_gives_the_same_outputs(N):
    """The batch's pairs over one block or several (the op's pick at D 768):
    each pair's outputs are the same bits; a ragged last block's idle pairs
    write nothing past the batch."""
    import tkc
    from tkc.kernels.fftconv import fftconv, operands, shape
    B, D = 7, 768
    u, k = inputs(B, D, N, N)
    kf = tkc.fftconv_filter(k, N)
    N1, N2, R, _ = shape(N, N)
    consts = [torch.from_numpy(x).to("cuda", torch.bfloat16)[None, None].contiguous()
              for x in operands(N, N)]
    outs = []
    for pairs in (4, 1, 3):
        y = torch.full((B + 1, D, N), 7.0, device="cuda", dtype=torch.bfloat16)  # a row past B
        fftconv(N)(u.view(B, 1, D * R, N2), kf[0].view(1, 1, D * N1, N2), kf[1].view(1, 1, D * N1, N2),
                   *consts, y[:B].view(B, 1, D * R, N2), pairs)
        assert (y[B] == 7.0).all()
        outs.append(y[:B])
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])
    assert rel_err(outs[0], reference(u, k, N)) < 1e-2


def test_three_consumer_warpgroups_at_d768():
    """D 768 at N 1024 (circular and causal): the op picks the kernel with
    three consumer warpgroups (128 blocks of 6 channels fill the SMs)."""
    import tkc
    from tkc.torchops.long_conv import _schedule
    assert _schedule(1024, 768, 4, 132)[0] == 3
    for L in (1024, 512):
        u, k = inputs(4, 768, L, 1024)
        y = tkc.fftconv(u, tkc.fftconv_filter(k, 1024))
        assert rel_err(y, reference(u, k, 1024)) < 1e-2


@pytest.mark.parametrize("N, D", [(1024, 1024), (2048, 1024), (1024, 8)])
def test_one_consumer_warpgroup_fewer_at_any_d(N, D):
    """The kernel of one consumer warpgroup fewer where its channel groups
    (6 at N 1024, 3 at 2048) do not divide D: the last group partial (its
    missing channels load as zeros, TMA stores nothing for them), the values
    right, and the pairs a block (a launch argument, as tuning binds it)
    change nothing; tkc tune may pick such a schedule (tkc.fftconv.schedule.nN)."""
    from tkc.kernels.fftconv import SPLITS
    from tkc.torchops import long_conv
    N1, N2 = SPLITS[N]
    u, k = inputs(5, D, N, N)
    kf = long_conv.fftconv_filter(k, N)
    args = [u.view(5, 1, D * N // N2, N2), kf[0].view(1, 1, D * N1, N2), kf[1].view(1, 1, D * N1, N2),
            *long_conv._operands(N, N, u.device)]
    outs = []
    for pairs in (1, 3):
        y = torch.full_like(u, 7.0)
        long_conv.SCHEDULE[N].kernel({"consumers": 3, "pairs": pairs})(*args, y.view(5, 1, D * N // N2, N2))
        outs.append(y)
    assert torch.equal(outs[0], outs[1])
    assert rel_err(outs[0], reference(u, k, N)) < 1e-2
