"""Complex tiles and the FFT convolution on the CPU: the complex arithmetic
and wgmma signs (conjugates on either side, negate) through the interpreter
against numpy; tkc/kernels/fftconv.py against numpy's FFT at each N, circular
and causal; the torch op with the interpreter standing in for the GPU; what
the compiled kernel is made of; refusals."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import Launch

import tkc
from tkc import bf16, f32, gl, warpgroup
from tkc.diagnostics import TkcError
from tkc.kernels import reference
from tkc.kernels.fftconv import fftconv, filter_layout, operands, shape
from tkc.kernels.reference import round_bf16
from tkc.ops import zero

pytest.importorskip("mlir")


def rel_err(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


M, O = gl(bf16, 1, 1, 64, 64), gl(f32, 1, 1, 64, 64)


@tkc.kernel(warps=4, grid=lambda *_: (1,))
def complex_ops(a_re: M, a_im: M, b_re: M, b_im: M, o1r: O, o1i: O, o2r: O, o2i: O, o3r: O,
                o3i: O, o4r: O, o4i: O, o5r: O, o5i: O):
    """o1 = a conj(b) - a b (shared operands), o2 = conj(a) b + b (register A),
    o3 = a * conj(b) + conj(a) * b elementwise, o4 = conj(a) * conj(b) - a, o5 = conj(a) stored."""
    a, b = tkc.cst(bf16, 64, 64), tkc.cst(bf16, 64, 64)
    tkc.ops.group_load(a, tkc.cgl(a_re, a_im), (0, 0, 0, 0))
    tkc.ops.group_load(b, tkc.cgl(b_re, b_im), (0, 0, 0, 0))
    tkc.sync()
    acc = zero(tkc.crt(f32, 16, 64))
    warpgroup.mma_AB(acc, a, b.conj())
    warpgroup.mma_AB(acc, a, b, negate=True)
    ar = warpgroup.load(tkc.crt(bf16, 16, 64), a)
    br = warpgroup.load(tkc.crt(f32, 16, 64), b)
    o2 = warpgroup.mma_AB(ar.conj(), b, br)
    acc, o2 = warpgroup.mma_async_wait(acc, o2)
    x = warpgroup.load(tkc.crt(f32, 16, 64), a)
    at = (0, 0, 0, 0)
    warpgroup.store(tkc.cgl(o1r, o1i), acc, at)
    warpgroup.store(tkc.cgl(o2r, o2i), o2, at)
    warpgroup.store(tkc.cgl(o3r, o3i), x * br.conj() + x.conj() * br, at)
    warpgroup.store(tkc.cgl(o4r, o4i), x.conj() * br.conj() - x, at)
    warpgroup.store(tkc.cgl(o5r, o5i), x.conj(), at)


def test_complex_ops():
    rng = np.random.default_rng(1)
    a, b = (round_bf16(rng.standard_normal((64, 64))) + 1j * round_bf16(rng.standard_normal((64, 64)))
            for _ in range(2))
    outs = [np.full((1, 1, 64, 64), np.nan, np.float32) for _ in range(10)]
    planes = [p.astype(np.float32)[None, None].copy() for z in (a, b) for p in (z.real, z.imag)]
    complex_ops.interpret(*planes, *outs)
    got = [outs[i][0, 0] + 1j * outs[i + 1][0, 0] for i in range(0, 10, 2)]
    want = [a @ b.conj() - a @ b, a.conj() @ b + b, a * b.conj() + a.conj() * b,
            a.conj() * b.conj() - a, a.conj()]
    for i, (g, w) in enumerate(zip(got, want)):
        assert rel_err(g, w) < 1e-5, i


def test_complex_refusals():
    @tkc.kernel(warps=4, grid=lambda *_: (1,))
    def mixed(a_re: M, a_im: M, o: O):
        a = tkc.cst(bf16, 64, 64)
        tkc.ops.group_load(a, a_re, (0, 0, 0, 0))

    with pytest.raises(TkcError, match=r"test_fftconv.py:\d+.*a_re is real while another operand is complex"):
        mixed.interpret(*(np.zeros((1, 1, 64, 64), np.float32) for _ in range(3)))

    @tkc.kernel(warps=4, grid=lambda *_: (1,))
    def conj_store(a_re: M, a_im: M, o: M):
        a = tkc.cst(bf16, 64, 64)
        tkc.ops.group_load(a.conj(), tkc.cgl(a_re, a_im), (0, 0, 0, 0))

    with pytest.raises(TkcError, match=r"test_fftconv.py:\d+.*conjugate of st<bf16, 64, 64.*only be read"):
        conj_store.interpret(*(np.zeros((1, 1, 64, 64), np.float32) for _ in range(3)))


def _inputs(B, D, L, N, taps, seed):
    rng = np.random.default_rng(seed)
    u = round_bf16(rng.standard_normal((B, D, L)))
    k = rng.standard_normal((D, taps)) * np.exp(-np.arange(taps) / (taps / 4))
    return u, k


def _plane(x):
    return round_bf16(x).astype(np.float32)[None, None].copy()


@pytest.mark.parametrize("N,L,B,D,pairs", [
    (1024, 1024, 2, 8, 1), (1024, 512, 3, 8, 2), (1024, 256, 1, 16, 1), (2048, 1024, 1, 4, 1),
    (2048, 2048, 1, 8, 1), (4096, 4096, 2, 2, 1), (4096, 3072, 1, 4, 1),
    (1024, 512, 5, 8, 1), (1024, 1024, 5, 8, 2),   # the batch's pairs split over blocks, ragged
])
def test_fftconv(N, L, B, D, pairs):
    """pairs: the batch's row pairs a block takes (all of them, or fewer: the
    grid's second axis splits the batch; a last block's pairs past it are idle)."""
    N1, N2, R, _ = shape(N, L)
    u, k = _inputs(B, D, L, N, N if L == N else N - L + 1, seed=N + L)
    kf = filter_layout(np.fft.fft(k, n=N), N).reshape(D * N1, N2)
    y = np.full((B, 1, D * R, N2), np.nan, np.float32)
    fftconv(N, L).interpret(u.reshape(B, 1, D * R, N2).astype(np.float32), _plane(kf.real),
                            _plane(kf.imag), *map(_plane, operands(N, L)), y, pairs)
    ref = reference.fftconv(u, k, N)
    assert not np.isnan(y).any()
    assert rel_err(y.reshape(B, D, L), ref) < 1e-2   # bf16 DFT matrices and operands


def test_causal_is_linear_convolution():
    """With L <= N - taps + 1 the circular convolution is the causal one."""
    u, k = _inputs(1, 1, 512, 1024, 513, seed=4)
    ref = reference.fftconv(u, k, 1024)[0, 0]
    direct = np.convolve(u[0, 0], k[0])[:512]
    assert np.allclose(ref, direct)


def test_refusals():
    with pytest.raises(TkcError, match="FFT size N = 512"):
        fftconv(512)
    with pytest.raises(TkcError, match="L = 1000"):
        fftconv(1024, 1000)


def test_compiled():
    """HGMMA, TMA loads and stores, no spills."""
    from tkc import sass
    if sass.cuobjdump() is None:
        pytest.skip("no cuobjdump")
    for N in (1024, 4096):
        art = fftconv(N).build()
        ops = sass.opcodes(sass.disassemble(art.cubin))
        assert ops.get("HGMMA", 0) >= 12 and ops.get("UTMALDG", 0) > 0 and ops.get("UTMASTG", 0) > 0
        assert art.manifest["resources"]["spill_stores"] == 0
        assert "-1, 1, 1, 1" in art.ptx or "-1, 1, 0, 1" in art.ptx or ", -1, 1" in art.ptx


# ---------------------------------------------------------------- the torch op

torch = pytest.importorskip("torch")


@pytest.fixture
def ops(monkeypatch):
    from tkc.torchops import long_conv as fftconv_ops

    def interpreted(N, L, consumers):
        def run(*args):
            *tensors, pairs = args
            arrays = [a.detach().float().contiguous().numpy().copy() for a in tensors]
            fftconv(N, L, consumers).interpret(*arrays, pairs)
            with torch.no_grad():
                tensors[-1].copy_(torch.from_numpy(arrays[-1]).view(tensors[-1].shape))
        return Launch(run)
    monkeypatch.setattr(fftconv_ops, "_kernel", interpreted)
    monkeypatch.setattr(fftconv_ops, "sms", lambda device: 132)  # the H200's
    return fftconv_ops


@pytest.fixture
def h200_tables(monkeypatch, tmp_path):
    """The package's tables as shipped, for the H200, no machine's own picks."""
    from tkc.torchops import long_conv
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TKC_DEVICE_NAME", raising=False)
    from tkc.tune import tables
    monkeypatch.setattr(tables, "device_name", lambda: tables.REFERENCE_GPU)
    for space in long_conv.SCHEDULE.values():
        space.forget()
    yield long_conv
    for space in long_conv.SCHEDULE.values():
        space.forget()


def test_batch_split_fill_rule():
    """The batch pairs a block takes where no table has the key: all of them
    when the channel groups fill the SMs, else split over just enough blocks
    a group to fill one wave; the library's consumer warpgroups."""
    from tkc.torchops.long_conv import _fill
    pick = lambda N, D, P, sms=132: tuple(_fill((N, D, P, sms)).values())  # noqa: E731
    assert pick(1024, 1024, 8) == (4, 8)     # 128 groups: one wave already
    assert pick(4096, 1024, 8) == (2, 8)     # 512 groups: 3.9 waves either way
    assert pick(1024, 768, 8) == (4, 8)      # 96 groups: a second block a group overfills
    assert pick(1024, 256, 8) == (4, 2)      # 32 groups: 4 blocks a group
    assert pick(1024, 512, 6) == (4, 3)      # 64 groups: 2 blocks a group
    assert pick(1024, 8, 1) == (4, 1) and pick(1024, 8, 32, 4) == (4, 8)
    assert pick(1024, 32, 32) == (4, 1)      # few groups, a long batch: one pair a block


def test_schedule_space_and_keys(monkeypatch):
    """One space per N: the library's consumer warpgroups and one fewer (never
    one), 1 to 16 pairs a block, the first configuration the library's W at
    one pair; a call's key is (N, D, ceil(B / 2), SMs); a candidate is the W
    kernel built at L = N with its pairs bound."""
    from tkc.kernels.fftconv import SPLITS
    from tkc.torchops import long_conv
    monkeypatch.setattr(long_conv, "sms", lambda device: 132)
    for N, Ws in ((1024, (4, 3)), (2048, (4, 3)), (4096, (2,))):
        tuned = long_conv.SCHEDULE[N]
        assert tuned.name == f"tkc.fftconv.schedule.n{N}"
        assert tuned.configs == [{"consumers": W, "pairs": n} for W in Ws for n in range(1, 17)]
        bound = tuned.kernel({"consumers": Ws[-1], "pairs": 5})
        assert bound.kernel is long_conv._kernel(N, N, Ws[-1]) and list(bound.values.values()) == [5]
        assert len(tuned.kernels()) == len(Ws)   # the pairs share their W's kernel
        N1, N2 = SPLITS[N]
        u = torch.zeros(5, 1, 24 * N // N2, N2)
        kf = torch.zeros(1, 1, 24 * N1, N2)
        key = tuned.key([u, kf, kf, *[None] * 10, u])
        assert key == (N, 24, 3, 132)


def test_schedule_picks_are_tuned_data(h200_tables):
    """(consumer warpgroups, pairs a block): the shipped table's pick for the
    examples' keys (tuned on the H200: one warpgroup fewer where its smaller
    channel groups fill the SMs, D 768 at N 1024: 128 blocks of 6 channels,
    33.6 µs against 53.2 for W 4 n 1), the fill rule for others (another D,
    another GPU's SM count)."""
    from tkc.torchops.long_conv import EXAMPLES, _schedule
    assert (768, 16) in EXAMPLES and (1024, 2) in EXAMPLES
    assert _schedule(1024, 768, 16, 132) == (3, 8)
    assert _schedule(1024, 768, 15, 132) == (3, 8)     # the same pairs
    assert _schedule(1024, 1024, 16, 132) == (4, 8)
    assert _schedule(2048, 768, 16, 132) == (3, 8)     # measured: 63.4 µs, W 4 n 4 (the old model's) 65.4
    assert _schedule(4096, 768, 16, 132) == (2, 8)     # not 1 warpgroup
    assert _schedule(1024, 768, 4, 132) == (3, 2)
    assert _schedule(1024, 256, 16, 132) == (4, 2)     # no key: filled (256 is no multiple of 6)
    assert _schedule(1024, 768, 16, 114) == (4, 8)     # no key for 114 SMs: filled


def test_a_pick_whose_channel_groups_do_not_divide_d(ops, h200_tables, monkeypatch):
    """A tuned pick of 3 consumer warpgroups at D 16 (groups of 6 channels:
    the last one partial, its missing channels loaded as zeros and stored
    nowhere by TMA): tuning checked it against the library's W at this very
    key, and the op's values through it are right."""
    from tkc.tune import tables
    u, k = _inputs(2, 16, 1024, 1024, 1024, seed=11)
    monkeypatch.setattr(tables, "lookup", lambda name, key: {"consumers": 3, "pairs": 1})
    assert h200_tables._schedule(1024, 16, 2, 132) == (3, 1)
    y = ops._fftconv(torch.from_numpy(u).bfloat16(), ops.fftconv_filter(torch.from_numpy(k).float(), 1024))
    assert rel_err(y.float().numpy(), reference.fftconv(u, k, 1024)) < 1e-2


def test_op_with_three_consumers(ops, h200_tables, monkeypatch):
    """With 4 SMs to fill and D 24 at N 1024, a table picking 3 consumer
    warpgroups (4 groups of 6 channels against 3 of 8): the op's values
    through that kernel."""
    from tkc.tune import tables
    u, k = _inputs(2, 24, 1024, 1024, 1024, seed=9)
    ut, kt = torch.from_numpy(u).bfloat16(), torch.from_numpy(k).float()
    picks = {repr((1024, 24, 1, 4)): {"config": {"consumers": 3, "pairs": 1}}}
    monkeypatch.setattr(tables, "lookup", lambda name, key: picks.get(repr(key), {}).get("config"))
    from tkc.torchops.long_conv import _schedule
    assert _schedule(1024, 24, 2, 4) == (3, 1)
    made = []
    interpreted = ops._kernel
    monkeypatch.setattr(ops, "_kernel", lambda N, L, W: made.append(W) or interpreted(N, L, W))
    ops.sms = lambda device: 4  # noqa: E731  (the monkeypatched module attribute)
    y = ops._fftconv(ut, ops.fftconv_filter(kt, 1024))
    assert made == [3]
    assert rel_err(y.float().numpy(), reference.fftconv(u, k, 1024)) < 1e-2


def test_op(ops):
    u, k = _inputs(1, 4, 1024, 2048, 1025, seed=7)
    ut, kt = torch.from_numpy(u).bfloat16(), torch.from_numpy(k).float()
    kf = ops.fftconv_filter(kt, 2048)
    N1, N2, _, _ = shape(2048, 1024)
    want = filter_layout(np.fft.fft(k, n=2048), 2048)
    assert tuple(kf.shape) == (2, 4, N1, N2)
    assert rel_err(kf[0].double().numpy() + 1j * kf[1].double().numpy(), want) < 1e-2
    y = ops._fftconv(ut, kf)
    assert rel_err(y.float().numpy(), reference.fftconv(u, k, 2048)) < 1e-2
    torch.library.opcheck(ops._fftconv.custom_op, (ut, kf), test_utils=("test_schema", "test_faketensor"))


def test_op_errors(ops):
    u = torch.zeros(1, 8, 1024, dtype=torch.bfloat16)
    kf = ops.fftconv_filter(torch.zeros(8, 100), 1024)
    with pytest.raises(TkcError, match=r"test_fftconv.py:\d+.*u must be a bf16 tensor \[B, D, L\]"):
        tkc.fftconv(u.float(), kf)
    with pytest.raises(TkcError, match="kf must be fftconv_filter"):
        tkc.fftconv(u, kf[0])
    with pytest.raises(TkcError, match="kf has 8 channels, u has D = 16"):
        tkc.fftconv(torch.zeros(1, 16, 1024, dtype=torch.bfloat16), kf)
    with pytest.raises(TkcError, match="D = 4 must be a multiple of 8"):
        tkc.fftconv(u[:, :4], kf[:, :4])
    with pytest.raises(TkcError, match=r"test_fftconv.py:\d+.*L = 1000"):
        tkc.fftconv(u[..., :1000], kf)
    with pytest.raises(TkcError, match="CUDA device"):
        tkc.fftconv(u, kf)
    with pytest.raises(TkcError, match="N = 3000"):
        tkc.fftconv_filter(torch.zeros(4, 100), 3000)
    with pytest.raises(TkcError, match="2000 taps"):
        tkc.fftconv_filter(torch.zeros(4, 2000), 1024)


def test_a_non_finite_value_spreads_only_where_the_docstring_says(ops):
    """A NaN at (batch 2, channel 5), N 1024 (N1 = 32: two channels a
    warpgroup's 64 rows): NaN exactly at batches {2, 3} (one complex
    sequence) x channels {4, 5} (one block-diagonal DFT), finite elsewhere."""
    u, k = _inputs(4, 8, 1024, 1024, 1024, seed=9)
    u[2, 5, 100] = np.nan
    y = ops._fftconv(torch.from_numpy(u).bfloat16(), ops.fftconv_filter(torch.from_numpy(k), 1024))
    bad = torch.isnan(y.float()).any(-1).numpy()
    want = np.zeros((4, 8), bool)
    want[2:4, 4:6] = True
    assert (bad == want).all()
