"""8-bit floats on the GPU: conversions of register tiles bit for bit against
the interpreter (rounding to nearest even, saturation, NaN), TMA round trips
of 8-bit tiles, 8-bit register tiles loaded from shared memory, FP8 wgmma
against float64 (A from shared memory, and from registers in
k_order="lanes" against the interpreter), tkc.scaled_mm (per-tensor and
row-wise scales, bf16 and f32 out) against torch._scaled_mm and a float32
reference, tkc.quantize_fp8 against torch bit for bit, and tkc.scaled_mm with
block scales against a float32 reference (and torch._scaled_mm where it takes
them). Kernels at module level: `tkc build test/gpu/test_fp8_gpu.py`."""
import sys
from pathlib import Path

import numpy as np
import pytest

import tkc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from fp8_kernels import (SHARED_LOADS, convert, mma_f8, mma_f8_lanes, shared_load_at,  # noqa: E402
                         store_ragged, tma_roundtrip)  # (built by `tkc build`)
from tkc.kernels.scaled_mm_grouped import grouped_masked  # noqa: E402

grouped_masked_192 = grouped_masked("f32", BM=192)   # the masked GEMM at the other tuned height (`tkc build`)
KERNELS = list(SHARED_LOADS.values())

pytestmark = pytest.mark.gpu
try:  # the kernels above the tests must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None


def _bits(t):
    return t.view(torch.uint8) if t.element_size() == 1 else t.view(torch.int16)


def test_conversions_match_the_interpreter_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, 64, generator=g) * torch.exp2(torch.randint(-20, 20, (128, 64), generator=g).float())
    x[0, :6] = torch.tensor([float("inf"), float("-inf"), float("nan"), 1e9, -1e9, 464.0])
    x[1, :] = torch.linspace(-500, 500, 64)             # ties and saturation
    xs = x.cuda()
    q4 = torch.empty(128, 64, device="cuda", dtype=torch.float8_e4m3fn)
    q5 = torch.empty(128, 64, device="cuda", dtype=torch.float8_e5m2)
    back = torch.empty(2, 128, 64, device="cuda", dtype=torch.bfloat16)
    convert(xs, q4, q5, back)
    torch.cuda.synchronize()
    n = [np.zeros((128, 64), np.float32) for _ in range(2)] + [np.zeros((2, 128, 64), np.float32)]
    convert.interpret(x.numpy().copy(), *n)
    for got, want in ((q4, n[0]), (q5, n[1]), (back, n[2])):
        got = got.float().cpu().numpy()
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (got[~same][:8], want[~same][:8])


def test_wide_8bit_stores_at_ragged_edges_match_the_interpreter():
    """16-byte stores (the two lanes of a row trade halves), clipped at ragged rows and columns."""
    x = torch.randn(37, 112, generator=torch.Generator().manual_seed(2)) * 8
    q = torch.empty(37, 112, device="cuda", dtype=torch.float8_e4m3fn)
    store_ragged(x.cuda(), q)
    want = np.zeros((37, 112), np.float32)
    store_ragged.interpret(x.numpy().copy(), want)
    got = q.float().cpu().numpy()
    assert (got.view(np.uint32) == want.view(np.uint32)).all()


def test_tma_round_trip_of_8bit_tiles():
    a = (torch.randn(80, 272, device="cuda") * 1000).to(torch.float8_e5m2)
    o = torch.zeros_like(a)
    tma_roundtrip(a, o)
    assert torch.equal(_bits(o), _bits(a))


@pytest.mark.parametrize("W", sorted(SHARED_LOADS))
def test_8bit_tiles_load_from_shared_memory_bit_for_bit(W):
    """TMA into an st of W-byte rows (each width's swizzle), ld.shared of each
    warp's byte pairs, a store to a gl: the tile comes back unchanged, ragged
    rows clipped."""
    a = (torch.randn(100, W, device="cuda") * 8).to(torch.float8_e4m3fn)
    o = torch.zeros_like(a)
    SHARED_LOADS[W](a, o)
    assert torch.equal(_bits(o), _bits(a))


def test_8bit_subtiles_load_from_shared_memory_bit_for_bit():
    """A subtile at a column offset inside a 64-byte swizzle row, and an 8-row one."""
    a = (torch.randn(32, 64, device="cuda") * 8).to(torch.float8_e4m3fn)
    o16 = torch.zeros(16, 32, device="cuda", dtype=torch.float8_e4m3fn)
    o8 = torch.zeros(8, 32, device="cuda", dtype=torch.float8_e4m3fn)
    shared_load_at(a, o16, o8)
    assert torch.equal(_bits(o16), _bits(a[16:, 32:].contiguous()))
    assert torch.equal(_bits(o8), _bits(a[24:, 32:].contiguous()))


def test_fp8_wgmma_against_float64():
    M, N, K = 192, 136, 400
    a = (torch.randn(M, K, device="cuda") * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(N, K, device="cuda") * 4).to(torch.float8_e5m2)
    c = torch.zeros(M, N, device="cuda")
    mma_f8(a, b, c)
    want = a.double() @ b.double().t()
    # FP8 wgmma adds its products with fewer than f32's bits (DeepSeek-V3: about 14), so
    # the check is of the whole (relative 2-norm), not of elements that cancel to near zero
    assert float((c.double() - want).norm() / want.norm()) < 1e-3


def test_fp8_wgmma_with_a_in_registers_in_lane_order():
    """A (f32) rounded to e4m3 in registers and fed in k_order="lanes": against
    the interpreter (which applies fp8_lane_order) and float64 of the same
    order; a B given in lane order gives the plain product A8 V^T."""
    from tkc.hopper.fp8_lanes import lane_permutation
    M, N = 192, 136
    g = torch.Generator().manual_seed(1)
    a = torch.randn(M, 64, generator=g) * 4
    v = (torch.randn(N, 64, generator=g) * 4).to(torch.float8_e4m3fn)
    b = v[:, lane_permutation(64)].contiguous()          # B's K in lane order
    c = torch.zeros(M, N, device="cuda")
    mma_f8_lanes(a.cuda(), b.cuda(), c)
    torch.cuda.synchronize()
    want = a.to(torch.float8_e4m3fn).double() @ v.double().t()
    assert float((c.cpu().double() - want).norm() / want.norm()) < 1e-3
    interp = np.zeros((M, N), np.float32)
    mma_f8_lanes.interpret(a.numpy(), b.float().numpy(), interp)
    assert float((c.cpu().double() - torch.from_numpy(interp).double()).norm() / want.norm()) < 1e-3


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("M, N, K, rowwise, out_dtype", [
    (8192, 8192, 8192, False, torch.bfloat16),
    (4096, 7168, 16384, True, torch.bfloat16),
    (777, 1000, 528, True, torch.bfloat16),
    (1024, 2048, 4096, False, torch.float32),
    (300, 264, 64, True, torch.float32),
])
def test_scaled_mm_against_torch_and_float32(M, N, K, rowwise, out_dtype, fast):
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda", generator=g).to(torch.float8_e4m3fn).t()
    sa = torch.rand(M, 1, device="cuda", generator=g) + 0.5 if rowwise else torch.tensor(0.7, device="cuda")
    sb = torch.rand(1, N, device="cuda", generator=g) + 0.5 if rowwise else torch.tensor(1.3, device="cuda")
    c = tkc.scaled_mm(a, b, sa, sb, out_dtype=out_dtype, use_fast_accum=fast)
    want = (a.float() @ b.float()) * sa * sb             # float32 reference
    err = float((c.float() - want).norm() / want.norm())
    if N % 16 == 0:   # torch._scaled_mm takes N a multiple of 16 only
        peer = torch._scaled_mm(a, b, sa, sb, out_dtype=out_dtype, use_fast_accum=fast)
        bound = 2 * float((peer.float() - want).norm() / want.norm())
    else:             # bf16's rounding (2^-9 an element, relative), or f32 accumulation's
        bound = 2 ** -9 if out_dtype == torch.bfloat16 else 1e-4
    assert err < max(bound, 1e-5 if out_dtype == torch.float32 and not fast else 1e-3), (err, bound)


# f32 output of promoted FP8 GEMMs: a K step's four k32 wgmmas add into their partial with
# the tensor cores' FP8 accumulation (about 14 bits: DeepSeek-V3's report), 2^-13 relative
# (1.2-1.3e-4 measured on the H200 at K 128 to 4096, one step or many); the interpreter's
# exact sums meet 1e-5 (test/python/test_scaled_mm_blockwise.py)
F32_BOUND = 2.5e-4


def quantize_reference(x):
    """tkc.quantize_fp8's rule in torch on the GPU, float32 throughout (its
    divisions not correctly rounded: tkc.torchops.quantize.reference says why)."""
    from tkc.torchops.quantize import reference
    return reference(x)


@pytest.mark.parametrize("M, K", [(4096, 7168), (1000, 384), (8, 128)])
def test_quantize_fp8_matches_torch_bit_for_bit(M, K):
    from fp8_blocks import data
    x = data(M, K, K, seed=1, spread=12, device="cuda")[0].to(torch.bfloat16)
    x[0, :128] = 0
    x[1, 5], x[2, 7], x[3, 200 % K] = float("inf"), float("nan"), -float("inf")
    q, s = tkc.quantize_fp8(x)
    want_q, want_s = quantize_reference(x)
    assert s.shape == (M, K // 128) and s.stride() == (1, M)
    same_q = (_bits(q) == _bits(want_q)) | (q.float().isnan() & want_q.float().isnan())
    assert same_q.all(), (q[~same_q][:8], want_q[~same_q][:8])
    assert torch.equal(s, want_s)


@pytest.mark.parametrize("M, N, K, out_dtype", [
    (4096, 7168, 16384, torch.bfloat16),
    (8192, 8192, 8192, torch.bfloat16),
    (777, 1000, 512, torch.bfloat16),
    (300, 264, 128, torch.float32),
    (1024, 2048, 4096, torch.float32),
])
def test_blockwise_scaled_mm_against_float32(M, N, K, out_dtype):
    """a from tkc.quantize_fp8 (1x128), b from torch (128x128); against the float32 product of
    the dequantised operands, and its error against the unquantised product no worse than
    per-tensor scaling's (the worst row's: fp8_blocks / test_scaled_mm_blockwise.py say why)."""
    from fp8_blocks import blocks, data, dequantised_product
    x, w = data(M, N, K, seed=2, spread=8, device="cuda")
    x = x.to(torch.bfloat16).float()
    a, sa = tkc.quantize_fp8(x.to(torch.bfloat16))
    qb, sb = blocks(w, 128)
    b, sb = qb.t(), sb.t()
    c = tkc.scaled_mm(a, b, sa, sb, out_dtype=out_dtype)
    want = dequantised_product(a, b, sa, sb, torch.float32)
    err = float((c.float() - want).norm() / want.norm())
    assert err < (2 ** -8 if out_dtype == torch.bfloat16 else F32_BOUND), err
    if M * N * K <= 2 ** 33:
        exact = x @ w.t()
        sx, sw = x.abs().max() / 448, w.abs().max() / 448
        tensor = tkc.scaled_mm((x / sx).to(torch.float8_e4m3fn), (w / sw).to(torch.float8_e4m3fn).t(),
                               sx.reshape(()), sw.reshape(()), out_dtype=out_dtype)
        worst = [float(((y.float() - exact).norm(dim=1) / exact.norm(dim=1)).max()) for y in (c, tensor)]
        assert worst[0] <= worst[1], worst


def test_blockwise_scaled_mm_against_torch():
    """torch._scaled_mm with BlockWise1x128 / BlockWise128x128 scales, where this torch and GPU
    take them (cuBLASLt's block scaling needs CUDA 12.9 and, in some torch builds, sm_100)."""
    from fp8_blocks import data, quantised
    M, N, K = 2048, 4096, 4096
    a, b, sa, sb = quantised(*data(M, N, K, seed=4, device="cuda"))
    c = tkc.scaled_mm(a, b, sa, sb)
    try:
        peer = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    except (RuntimeError, NotImplementedError, ValueError) as e:
        pytest.skip(f"torch {torch.__version__} refuses block scales here: {str(e).splitlines()[0]}")
    assert float((c.float() - peer.float()).norm() / peer.float().norm()) < 2 ** -7


def test_blockwise_scale_a_off_tma_alignment():
    """scale_a 4 bytes into its storage (TMA reads it: tkc.torchops.scaled.tma_scales copies
    it aligned): the same result as from an aligned copy."""
    from fp8_blocks import data, quantised
    M, N, K = 512, 1024, 1024
    a, b, sa, sb = quantised(*data(M, N, K, seed=6, device="cuda"))
    store = torch.zeros(1 + sa.numel(), device="cuda")
    store[1:] = sa.t().reshape(-1)
    moved = store[1:].view(K // 128, M).t()
    assert moved.stride() == sa.stride() and moved.data_ptr() % 16
    assert torch.equal(tkc.scaled_mm(a, b, moved, sb), tkc.scaled_mm(a, b, sa, sb))


@pytest.mark.parametrize("counts, N, K", [([1000, 0, 3000, 128, 517], 4096, 7168), ([5, 0, 0, 300], 264, 256)])
def test_grouped_contiguous_against_float32(counts, N, K):
    """tkc.grouped_scaled_mm, contiguous layout (experts without rows, a block of padding only)
    against each expert's float32 product of the dequantised operands."""
    from fp8_blocks import contiguous_rows, dequantised_product, experts
    b, sb = experts(len(counts), N, K, device="cuda")
    a, sa, groups = contiguous_rows(counts, K, device="cuda", padding_blocks=1)
    c = tkc.grouped_scaled_mm(a, b, sa, sb, groups)
    r = 0
    for e, m in enumerate(counts):
        want = dequantised_product(a[r:r + m], b[e], sa[r:r + m], sb[e], torch.float32)
        if m:
            assert float((c[r:r + m].float() - want).norm() / want.norm()) < 2 ** -8
        r += -(-m // 128) * 128


@pytest.mark.parametrize("counts, max_m", [([0, 37, 256, 1], 256), ([129, 0], 384), ([130, 7], 130), ([0, 0, 0], 256),
                                           ([700, 0, 1500, 3, 2048, 0, 1111, 900], 2048)])
def test_grouped_masked_against_float32(counts, max_m):
    """tkc.grouped_scaled_mm, masked layout (empty experts, counts not multiples of 128): rows
    below each count against float32; row blocks wholly past a count are not written."""
    from fp8_blocks import dequantised_product, experts, masked_rows
    N, K = 2048, 1024
    b, sb = experts(len(counts), N, K, device="cuda")
    a, sa, groups = masked_rows(counts, max_m, K, device="cuda")
    c = tkc.grouped_scaled_mm(a, b, sa, sb, groups, out_dtype=torch.float32)
    for e, m in enumerate(counts):
        if m:
            want = dequantised_product(a[e, :m], b[e], sa[e, :m], sb[e], torch.float32)
            assert float((c[e, :m] - want).norm() / want.norm()) < F32_BOUND
    from tkc.torchops import grouped
    marked = torch.full_like(c, 7.0)
    grouped._kernel("f32", "masked")(*grouped._views(a, b, sa, sb, groups), marked.view(1, *marked.shape))
    for e, m in enumerate(counts):
        assert (marked[e, -(-m // 128) * 128:] == 7).all()


@pytest.mark.parametrize("BM", [128, 192])
@pytest.mark.parametrize("counts, N, K", [([1024, 0, 2976, 128, 512], 4096, 7168), ([32, 0, 0, 288], 264, 256),
                                          ([1000, 0, 3000, 124, 516, 4], 4096, 7168), ([8, 0, 196], 264, 256)])
def test_grouped_by_counts_against_float32(counts, N, K, BM):
    """tkc.grouped_scaled_mm, contiguous layout by counts (experts back to back, counts
    multiples of 4, an empty one, rows after the last) at each tile height, against each expert's float32
    product; the rows after the experts are not written."""
    from fp8_blocks import counts_rows, dequantised_product, experts
    from tkc.torchops import grouped, plans
    b, sb = experts(len(counts), N, K, device="cuda")
    a, sa, cnt = counts_rows(counts, K, device="cuda", extra=48)
    choose = grouped.COUNTS_TILE.choose
    grouped.COUNTS_TILE.choose = lambda key, args=None: {"BM": BM}
    try:
        plans.forget()
        c = tkc.grouped_scaled_mm(a, b, sa, sb, counts=cnt, out_dtype=torch.float32)
        marked = torch.full_like(c, 7.0)
        grouped._kernel("f32", "counts", BM)(*grouped._views(a, b, sa, sb, cnt), cnt.cumsum(0, dtype=torch.int32)
                                             .view(1, 1, 1, -1), marked.view(1, 1, *marked.shape))
    finally:
        grouped.COUNTS_TILE.choose = choose
        plans.forget()
    r = 0
    for e, m in enumerate(counts):
        if m:
            want = dequantised_product(a[r:r + m], b[e], sa[r:r + m], sb[e], torch.float32)
            assert float((c[r:r + m] - want).norm() / want.norm()) < F32_BOUND
        r += m
    assert (marked[r:] == 7).all() and (marked[:r] != 7).all()


def test_grouped_masked_bf16_in_a_cuda_graph():
    """The masked layout as decode runs it: captured once in a CUDA graph, the counts
    changed on the device, replayed (its blocks find the live tiles from the new counts;
    the issue-45 shape's structure: 8 experts, 2 empty); bf16 output against each
    expert's float32 product, row blocks (of the tuned height) past the counts unwritten."""
    from fp8_blocks import dequantised_product, experts, masked_rows
    E, max_m, N, K = 8, 1024, 2048, 1024
    b, sb = experts(E, N, K, device="cuda")
    a, sa, groups = masked_rows([max_m] * E, max_m, K, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            tkc.grouped_scaled_mm(a, b, sa, sb, groups)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = tkc.grouped_scaled_mm(a, b, sa, sb, groups)
    counts = [1000, 0, 513, 1024, 0, 1, 129, 700]
    from tkc.torchops import grouped
    from tkc.tune import bucket
    bm = grouped.MASKED_TILE.choose((bucket(max_m), bucket(N)))["BM"]   # the height the op runs (tuned)
    groups.copy_(torch.tensor(counts, dtype=torch.int32, device="cuda"))
    c.fill_(7.0)
    g.replay()
    torch.cuda.synchronize()
    for e, m in enumerate(counts):
        if m:
            want = dequantised_product(a[e, :m], b[e], sa[e, :m], sb[e], torch.float32)
            assert float((c[e, :m].float() - want).norm() / want.norm()) < 2 ** -8
        assert (c[e, -(-m // bm) * bm:] == 7).all()


def test_grouped_masked_192_row_tiles():
    """The masked kernel with 192-row tiles (three consumer warpgroups): an expert has
    ceil(count / 192) row blocks; rows below each count against float32, the row blocks
    past it unwritten."""
    from fp8_blocks import dequantised_product, experts, masked_rows
    from tkc.torchops import grouped
    counts, max_m, N, K = [193, 0, 1000, 384, 5], 1000, 2048, 1024
    b, sb = experts(len(counts), N, K, device="cuda")
    a, sa, groups = masked_rows(counts, max_m, K, device="cuda")
    c = torch.full((len(counts), max_m, N), 7.0, device="cuda")
    grouped_masked_192(*grouped._views(a, b, sa, sb, groups), c.view(1, *c.shape))
    for e, m in enumerate(counts):
        if m:
            want = dequantised_product(a[e, :m], b[e], sa[e, :m], sb[e], torch.float32)
            assert float((c[e, :m] - want).norm() / want.norm()) < F32_BOUND
        assert (c[e, -(-m // 192) * 192:] == 7).all()
