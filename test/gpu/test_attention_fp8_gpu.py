"""tkc.attention_fp8 on the GPU, from prebuilt artifacts, against float64
attention of the dequantised inputs: D 64, 128 and 256, causal and not, GQA 4:1
and MQA, ragged lengths, Lq != Lk both ways, each schedule of the op's
space (not only the tables' pick), the log-sum-exp, the interpreter on a
small shape (bit-level agreement but for rounding ties), and V's layout
(tkc.fp8_v_layout) bit for bit against torch indexing. `tkc build
test/gpu/test_attention_fp8_gpu.py` builds every candidate (KERNELS)."""
import math

import numpy as np
import pytest

import tkc
from tkc.hopper.fp8_lanes import lane_permutation
from tkc.kernels.attention_fp8_v import fp8_v_layout_kernel, loads_for
from tkc.kernels.attention_hopper import attention_hopper
from tkc.kernels.attention_schedule import fp8_forward_space
from tkc.kernels.attention_tuned import FP8_FORWARD

pytestmark = pytest.mark.gpu
try:  # the kernels below must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None

# every schedule of every FP8 space, by (D, causal): the tests launch each
SCHEDULES = {(D, causal): [attention_hopper(D, causal, "bhld", s, dtype="f8e4m3")
                            for s in fp8_forward_space(D, causal)]
             for D in (64, 128, 256) for causal in (False, True)}
KERNELS = list(FP8_FORWARD.values()) + [k for ks in SCHEDULES.values() for k in ks] + \
    [fp8_v_layout_kernel(D, n) for D in (64, 128, 256) for n in loads_for(D)]

# B, Hq, Hkv, Lq, Lk
SHAPES = {"square": (2, 4, 4, 512, 512), "gqa4-ragged": (1, 8, 2, 1000, 1000),
          "mqa-77": (2, 4, 1, 77, 77), "lq<lk": (1, 4, 2, 300, 1000), "lq>lk": (1, 4, 2, 1000, 300),
          "long": (1, 2, 2, 4096, 4096)}


def inputs(B, Hq, Hkv, Lq, Lk, D, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = ((torch.randn(B, H, L, D, device="cuda", generator=g) * 3).to(torch.float8_e4m3fn)
               for H, L in ((Hq, Lq), (Hkv, Lk), (Hkv, Lk)))
    scales = [torch.rand(B, H, device="cuda", generator=g) + 0.5 for H in (Hq, Hkv, Hkv)]
    return q, k, v, *scales


def reference(q, k, v, qs, ks, vs, causal, scale):
    """float64 attention of the dequantised inputs (GQA, bottom-right mask,
    rows without a key 0) and its log-sum-exp."""
    g = q.shape[1] // k.shape[1]
    q = q.double() * qs.double()[..., None, None]
    k, v = ((t.double() * s.double()[..., None, None]).repeat_interleave(g, 1) for t, s in ((k, ks), (v, vs)))
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        lq, lk = s.shape[-2:]
        keep = torch.arange(lk, device=s.device)[None] <= torch.arange(lq, device=s.device)[:, None] + lk - lq
        s = s.masked_fill(~keep, -math.inf)
    return torch.softmax(s, -1).nan_to_num(0.0) @ v, torch.logsumexp(s, -1)


def rel_err(x, ref):
    return float((x.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_fp8_against_float64(shape, D, causal):
    """The op (its tables' pick): o within 3e-2 of float64 (P's e4m3 rounding:
    about 6e-3 in the interpreter's tests), the lse within 1e-3 where a row
    has a key (relative 2e-3: FP8 wgmma's accumulation)."""
    q, k, v, qs, ks, vs = inputs(*SHAPES[shape], D)
    o, lse = tkc.attention_fp8(q, k, v, qs, ks, vs, causal=causal, return_lse=True)
    torch.cuda.synchronize()
    want, lse_want = reference(q, k, v, qs, ks, vs, causal, D ** -0.5)
    assert o.dtype == torch.bfloat16 and o.shape == q.shape
    assert rel_err(o, want) < 3e-2
    finite = torch.isfinite(lse_want)
    # the scores come from FP8 wgmma, whose in-step accumulation keeps about 14 bits: the raw
    # scores (~500 here) are off by up to ~0.1, the lse (~50) by up to ~1e-2; a wrong scale,
    # ln 2 or P's 2^8 would be off by O(1)
    assert torch.allclose(lse.double()[finite], lse_want[finite], atol=1e-3, rtol=2e-3)


@pytest.mark.parametrize("D, causal", list(SCHEDULES))
def test_every_schedule_of_the_space(D, causal):
    """Each candidate the tables may pick, on GQA 4:1 with ragged lengths."""
    q, k, v, qs, ks, vs = inputs(1, 8, 2, 700, 1300, D, seed=1)
    vt = tkc.fp8_v_layout(v)
    want, _ = reference(q, k, v, qs, ks, vs, causal, D ** -0.5)
    for kernel in SCHEDULES[D, causal]:
        o = torch.empty(q.shape, device="cuda", dtype=torch.bfloat16)
        lse = torch.empty(1, 8, 1, 700, device="cuda")
        kernel(q, k, vt, o, lse, qs, ks, vs, D ** -0.5)
        torch.cuda.synchronize()
        assert rel_err(o, want) < 3e-2, kernel


def test_the_gpu_agrees_with_the_interpreter():
    """One block's worth of rows, ragged keys: the GPU's o against the
    interpreter's (the same P rounding: equal but for the rare tie that the
    GPU's ex2.approx moves), far closer than to float64."""
    q, k, v, qs, ks, vs = inputs(1, 2, 1, 128, 200, 64, seed=2)
    kernel = SCHEDULES[64, False][0]
    vt = tkc.fp8_v_layout(v)
    o = torch.empty(q.shape, device="cuda", dtype=torch.bfloat16)
    lse = torch.empty(1, 2, 1, 128, device="cuda")
    kernel(q, k, vt, o, lse, qs, ks, vs, 0.125)
    torch.cuda.synchronize()
    arrays = [t.float().cpu().numpy() for t in (q, k, vt, o, lse, qs, ks, vs)]
    arrays[3][:] = 0
    kernel.interpret(*arrays, 0.125)
    want, _ = reference(q, k, v, qs, ks, vs, False, 0.125)
    assert rel_err(o, torch.from_numpy(arrays[3]).cuda().double()) < 2e-3
    assert np.isfinite(arrays[3]).all() and rel_err(o, want) > 1e-3


@pytest.mark.parametrize("L", [4096, 1000, 77, 16, 5])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_v_layout_against_torch_indexing(D, L):
    """tkc.fp8_v_layout (one kernel, the padding past L included), and its
    kernel at each block size, bit for bit against V padded, its keys
    indexed by lane_permutation, transposed."""
    v = (torch.randn(2, 3, L, D, device="cuda") * 3).to(torch.float8_e4m3fn)
    vt = tkc.fp8_v_layout(v)
    L32 = -(-L // 32) * 32
    padded = torch.zeros(2, 3, L32, D, device="cuda", dtype=torch.uint8)
    padded[:, :, :L] = v.view(torch.uint8)
    want = padded[:, :, lane_permutation(L32)].transpose(2, 3)
    assert torch.equal(vt.view(torch.uint8), want)
    for loads in loads_for(D):   # every block size a table may pick, not only the pick
        other = torch.empty_like(vt)
        fp8_v_layout_kernel(D, loads)(v, other)
        assert torch.equal(other.view(torch.uint8), want), loads
