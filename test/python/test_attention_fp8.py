"""The FP8 attention forward on the CPU (docs/attention.md, "FP8 forward"):
the kernel (attention_hopper, dtype="f8e4m3") in the interpreter against a
numpy reference that rounds P to e4m3 the way the kernel does (tight) and
against float64 attention of the dequantised inputs (loose), over ragged
lengths, the causal mask, GQA, D 64, 128 and 256 and each schedule of its space;
and tkc.attention_fp8 with the interpreter standing in for the GPU: V's
layout, results, empty inputs, fake tensors, and the refusals at the
caller's line. The GPU twin: test/gpu/test_attention_fp8_gpu.py."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")
ml_dtypes = pytest.importorskip("ml_dtypes")

from helpers import interpreted, refused_here  # noqa: E402
from tkc.diagnostics import TkcError  # noqa: E402
from tkc.hopper.fp8_lanes import lane_permutation  # noqa: E402
from tkc.kernels.attention_hopper import P_SHIFT, attention_hopper  # noqa: E402
from tkc.kernels.attention_schedule import ForwardSchedule, fp8_forward_space  # noqa: E402
from tkc.kernels.attention_fp8_v import fp8_v_layout_kernel, loads_for  # noqa: E402
from tkc.kernels.attention_tuned import fp8_forward_kernel  # noqa: E402
from tkc.torchops import attn_fp8 as op  # noqa: E402
from tkc.torchops import checks  # noqa: E402

E4M3 = torch.float8_e4m3fn
LOG2E = math.log2(math.e)


def _e4m3(x):
    """PTX's cvt.rn.satfinite to e4m3, as float32."""
    return np.clip(np.asarray(x, np.float32), -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)


def _inputs(B, Hq, Hkv, Lq, Lk, D, seed=0, spread=3.0):
    """e4m3 q, k, v of normal values times `spread` (3: scores of a few units,
    a softmax with a few keys in front; 1: a flat one) and per-head scales."""
    rng = np.random.default_rng(seed)
    q, k, v = (_e4m3(rng.standard_normal((B, H, L, D)) * spread) for H, L in ((Hq, Lq), (Hkv, Lk), (Hkv, Lk)))
    qs, ks, vs = ((rng.random((B, H)) + 0.5).astype(np.float32) for H in (Hq, Hkv, Hkv))
    return q, k, v, qs, ks, vs


def _vt(v):
    """V as the kernel reads it (what tkc.fp8_v_layout makes): V^T, keys in lane order, padded."""
    B, H, L, D = v.shape
    L32 = -(-L // 32) * 32
    padded = np.zeros((B, H, L32, D), np.float32)
    padded[:, :, :L] = v
    return np.ascontiguousarray(padded[:, :, lane_permutation(L32)].transpose(0, 1, 3, 2))


def _mask(Lq, Lk, causal):
    return np.arange(Lk)[None] <= np.arange(Lq)[:, None] + Lk - Lq if causal else np.ones((Lq, Lk), bool)


def _quantised_reference(q, k, v, qs, ks, vs, causal, scale, KV):
    """The kernel's arithmetic in numpy: per KV tile the online softmax in f32
    (exp2 of one FFMA, P * 2^8), P rounded to e4m3, O += P V (exact products,
    float64 sums), v_scale and 1 / l at the end; rows with no key 0."""
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, 1), np.repeat(v, g, 1)
    c = np.float32(scale * LOG2E) * (qs[:, :, None, None] * np.repeat(ks, g, 1)[:, :, None, None])
    s = np.where(_mask(q.shape[2], k.shape[2], causal), (q.astype(np.float64) @ k.transpose(0, 1, 3, 2)
                                                         .astype(np.float64)).astype(np.float32), -np.inf)
    m = np.full(s.shape[:3] + (1,), -np.inf, np.float32)
    l = np.zeros_like(m)
    o = np.zeros(q.shape, np.float64)
    with np.errstate(invalid="ignore"):
        for j in range(0, s.shape[3], KV):
            t = s[..., j:j + KV]
            m_new = np.maximum(m, t.max(-1, keepdims=True))
            ms = np.where(m_new == -np.inf, 0, m_new).astype(np.float32)
            p = np.exp2(t * c - ms * c + P_SHIFT).astype(np.float32)
            alpha = np.exp2((m - ms) * c).astype(np.float32)
            l = l * alpha + p.sum(-1, keepdims=True)
            o = o * alpha + _e4m3(p).astype(np.float64) @ v[:, :, j:j + KV]
            m = m_new
    return np.where(l > 0, o / np.where(l > 0, l, 1) * np.repeat(vs, g, 1)[:, :, None, None], 0)


def _float_reference(q, k, v, qs, ks, vs, causal, scale):
    """float64 attention of the dequantised inputs (GQA by repeating k, v)."""
    g = q.shape[1] // k.shape[1]
    q = q.astype(np.float64) * qs[:, :, None, None]
    k, v = (np.repeat(t.astype(np.float64) * sc[:, :, None, None], g, 1) for t, sc in ((k, ks), (v, vs)))
    s = np.where(_mask(q.shape[2], k.shape[2], causal), q @ k.transpose(0, 1, 3, 2) * scale, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isinf(m), 0, m))
    l = p.sum(-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = np.where(l[..., 0] > 0, np.log(l[..., 0]) + np.where(np.isinf(m), 0, m)[..., 0], np.inf)
    return np.where(l > 0, p @ v / np.where(l > 0, l, 1), 0), lse


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


CASES = [  # (D, causal, B, Hq, Hkv, Lq, Lk, spread): ragged lengths, GQA, Lq != Lk both ways
    (64, False, 1, 2, 1, 100, 150, 3.0),
    (64, True, 2, 2, 2, 130, 77, 3.0),
    (128, False, 1, 4, 2, 65, 290, 3.0),
    (128, True, 1, 3, 1, 200, 260, 3.0),
    (256, True, 1, 2, 1, 100, 140, 3.0),
    (128, False, 1, 2, 1, 64, 300, 1.0),
]


@pytest.mark.parametrize("D, causal, B, Hq, Hkv, Lq, Lk, spread", CASES)
def test_the_kernel_rounds_p_to_e4m3_and_nothing_else(D, causal, B, Hq, Hkv, Lq, Lk, spread):
    """Each schedule of the op's space in the interpreter: o is the numpy
    reference that quantises P as the kernel does, rounded to bf16, but for
    a rare e4m3 or bf16 tie that f32's rounding order moves (1e-3 in the
    norm, several times below P's rounding); and within 5e-2 of float64
    attention of the dequantised inputs. That bound is P's rounding: e4m3
    keeps 3 mantissa bits, so each probability is off by up to 2^-4 of
    itself (3.6e-2 RMS); O averages V over the probabilities and so do the
    errors, both shrinking alike, so O's relative error stays near that
    RMS times the share of the weight on inexact probabilities: about 2.5e-2
    for a flat softmax (spread 1), 6e-3 when the row maxima (P = 2^8, exact)
    dominate (spread 3); bf16's output rounding adds 2^-9. The lse against
    float64's (P's rounding does not enter l); a row with no key gives o =
    0, lse = +inf."""
    q, k, v, qs, ks, vs = _inputs(B, Hq, Hkv, Lq, Lk, D, spread=spread)
    scale = D ** -0.5
    want, lse_want = _float_reference(q, k, v, qs, ks, vs, causal, scale)
    for schedule in fp8_forward_space(D, causal):
        o = np.zeros((B, Hq, Lq, D), np.float32)
        lse = np.zeros((B, Hq, 1, Lq), np.float32)
        attention_hopper(D, causal, "bhld", schedule, dtype="f8e4m3").interpret(
            q, k, _vt(v), o, lse, qs, ks, vs, scale)
        tight = _quantised_reference(q, k, v, qs, ks, vs, causal, scale, schedule.KV)
        assert _rel(o, tight.astype(ml_dtypes.bfloat16).astype(np.float32)) < 1e-3, schedule
        assert _rel(o, want) < (5e-2 if spread < 2 else 1.5e-2), schedule
        assert _rel(tight, want) > 3e-3          # the tight reference does see P's rounding
        finite = np.isfinite(lse_want)
        assert np.allclose(lse[:, :, 0][finite], lse_want[finite], atol=1e-4, rtol=1e-5)
        assert np.all(lse[:, :, 0][~finite] == np.inf) and np.all(o[~np.isfinite(lse_want)] == 0)


def test_a_kernel_that_forgets_the_lane_order_is_wrong():
    """V^T with its keys in natural order: the interpreter multiplies P's
    columns in wgmma's order, so the answer is wrong, as on the GPU."""
    q, k, v, qs, ks, vs = _inputs(1, 1, 1, 64, 96, 64)
    o = np.zeros((1, 1, 64, 64), np.float32)
    natural = np.ascontiguousarray(v.transpose(0, 1, 3, 2))
    attention_hopper(64, False, "bhld", ForwardSchedule(stages=2, consumers=1), dtype="f8e4m3").interpret(
        q, k, natural, o, np.zeros((1, 1, 1, 64), np.float32), qs, ks, vs, 0.125)
    assert _rel(o, _float_reference(q, k, v, qs, ks, vs, False, 0.125)[0]) > 0.1


@pytest.mark.parametrize("kwargs, words", [
    (dict(D=256, o_via_q=True), ("head dims (64, 128, 256)", "no o_via_q")),
    (dict(layout="varlen"), ("layout 'bhld'",)),
    (dict(dtype="f16"), ("dtype must be 'bf16' or 'f8e4m3'",)),
    (dict(dtype="bf16", KV=192), ("KV = 192 is the FP8 forward's",)),
])
def test_the_builder_refuses_what_the_fp8_forward_is_not(kwargs, words):
    args = dict(D=128, causal=False, layout="bhld", dtype="f8e4m3", KV=128, o_via_q=False) | kwargs
    with pytest.raises(TkcError) as info:
        attention_hopper(args["D"], args["causal"], args["layout"],
                         ForwardSchedule(KV=args["KV"], o_via_q=args["o_via_q"]), dtype=args["dtype"])
    assert all(w in info.value.message for w in words), info.value.message


# ---------------------------------------------------------------- the op

@pytest.fixture
def cpu_op(monkeypatch):
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")
    monkeypatch.setattr(op, "fp8_forward_kernel", lambda *key: interpreted(fp8_forward_kernel(*key)))
    monkeypatch.setattr(op, "v_layout_kernel", lambda D, loads: interpreted(fp8_v_layout_kernel(D, loads)))


def _tensors(B, Hq, Hkv, Lq, Lk, D, seed=1):
    return [torch.from_numpy(t).to(E4M3) if i < 3 else torch.from_numpy(t)
            for i, t in enumerate(_inputs(B, Hq, Hkv, Lq, Lk, D, seed))]


@pytest.mark.parametrize("L", [77, 64, 16, 5, 0])
def test_v_layout_is_the_lane_order_transposed_and_padded(cpu_op, L):
    """The op's one kernel gives V^T with each 32 keys in lane order, zero
    past L (none at L 0)."""
    v = torch.from_numpy(_e4m3(np.random.default_rng(3).standard_normal((2, 3, L, 64)) * 3)).to(E4M3)
    vt = op.fp8_v_layout(v)
    assert vt.dtype == E4M3 and vt.shape == (2, 3, 64, -(-L // 32) * 32) and vt.is_contiguous()
    assert np.array_equal(vt.float().numpy(), _vt(v.float().numpy()))


@pytest.mark.parametrize("L, D", [(48, 128), (77, 64), (5, 256), (130, 128), (300, 64), (600, 128)])
def test_the_v_layout_kernel_alone(L, D):
    """fp8_v_layout_kernel in the interpreter, at each block size a table may
    pick: every column of vt, V's L keys transposed in lane order and the
    padding to a multiple of 32 zero (TMA reads the keys past L as zeros), at
    ragged L and with a last block of fewer loads too."""
    v = _e4m3(np.random.default_rng(5).standard_normal((1, 2, L, D)) * 3)
    L32 = -(-L // 32) * 32
    for loads in loads_for(D):
        vt = np.full((1, 2, D, L32), 7.0, np.float32)
        fp8_v_layout_kernel(D, loads).interpret(v, vt)
        assert np.array_equal(vt, _vt(v)), loads


def test_the_v_layout_space():
    """tkc.fp8_v_layout's block size is tuned data: a space per head dim (two
    loads only at D 64, where they do not spill), the default with no table
    entry, every candidate at D 64 and 128 in the library; a bad size is
    refused."""
    from tkc.kernels import library
    assert loads_for(64) == (1, 2) and loads_for(128) == loads_for(256) == (1,)
    assert op.V_LAYOUT[128].choose(12345)["loads"] == 1
    names = {k.name for k in library()}
    for D in (64, 128):
        assert {k.name for k in op.V_LAYOUT[D].kernels()} <= names
    with pytest.raises(ValueError, match="loads must be one of"):
        fp8_v_layout_kernel(128, 2)


@pytest.mark.parametrize("causal", [False, True])
def test_the_op_against_float64(cpu_op, causal):
    """GQA 2:1, ragged Lq < Lk: o (bf16) and lse against float64 attention
    of the dequantised inputs (P's e4m3 rounding, as above); the _vt form
    gives the same bits."""
    q, k, v, qs, ks, vs = _tensors(1, 4, 2, 70, 100, 64)
    o, lse = op.attention_fp8(q, k, v, qs, ks, vs, causal=causal, return_lse=True)
    assert o.dtype == torch.bfloat16 and o.shape == (1, 4, 70, 64) and lse.shape == (1, 4, 70)
    want, lse_want = _float_reference(*(t.float().numpy() for t in (q, k, v, qs, ks, vs)), causal, 0.125)
    assert _rel(o.float().numpy(), want) < 1.5e-2
    assert np.allclose(lse.numpy(), lse_want, atol=1e-4)
    again = op.attention_fp8_vt(q, k, op.fp8_v_layout(v), qs, ks, vs, causal=causal)
    assert torch.equal(again, o)


@pytest.mark.parametrize("shape", [(0, 2, 2, 16, 16), (1, 2, 2, 0, 16), (1, 2, 2, 16, 0)],
                         ids=["no batch", "no query", "no key"])
def test_empty_inputs_give_empty_or_zero_outputs(cpu_op, shape):
    B, Hq, Hkv, Lq, Lk = shape
    q, k, v, qs, ks, vs = _tensors(B, Hq, Hkv, Lq, Lk, 64)
    o, lse = op.attention_fp8(q, k, v, qs, ks, vs, return_lse=True)
    assert o.shape == (B, Hq, Lq, 64) and o.dtype == torch.bfloat16 and not o.float().abs().sum()
    assert lse.shape == (B, Hq, Lq)
    assert torch.isposinf(lse).all()      # no key: +inf, as the kernel's rows with no key


def test_fake_tensors_give_shapes_and_dtypes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q, k = torch.empty(2, 8, 300, 128, dtype=E4M3), torch.empty(2, 2, 500, 128, dtype=E4M3)
        vt = torch.empty(2, 2, 128, 512, dtype=E4M3)
        o, lse = op._fwd.custom_op(q, k, vt, torch.ones(2, 8), torch.ones(2, 2), torch.ones(2, 2), True, 0.1)
        assert o.shape == (2, 8, 300, 128) and o.dtype == torch.bfloat16
        assert lse.shape == (2, 8, 300) and lse.dtype == torch.float32


def _call(**over):
    q, k, v = (torch.zeros(1, 4, 64, 64, dtype=E4M3), torch.zeros(1, 2, 96, 64, dtype=E4M3),
               torch.zeros(1, 2, 96, 64, dtype=E4M3))
    args = dict(q=q, k=k, v=v, q_scale=torch.ones(1, 4), k_scale=torch.ones(1, 2), v_scale=torch.ones(1, 2))
    args.update(over)
    return lambda: op.attention_fp8(**args)


@pytest.mark.parametrize("make, message", [
    (lambda: _call(q=torch.zeros(1, 4, 64, 64, dtype=torch.bfloat16)), "q must be float8_e4m3fn, got bfloat16"),
    (lambda: _call(k=torch.zeros(1, 2, 96, 64, dtype=torch.float8_e5m2)), "k must be float8_e4m3fn"),
    (lambda: _call(v=torch.zeros(2, 96, 64, dtype=E4M3)), "v must be [B, H, L, D]"),
    (lambda: _call(q=torch.zeros(1, 4, 64, 96, dtype=E4M3), k=torch.zeros(1, 2, 96, 96, dtype=E4M3),
                   v=torch.zeros(1, 2, 96, 96, dtype=E4M3)), "head dim 96 is not supported (one of (64, 128, 256))"),
    (lambda: _call(k=torch.zeros(1, 2, 96, 128, dtype=E4M3)), "k must be [B, Hkv, Lk, D] with q's B = 1 and D = 64"),
    (lambda: _call(v=torch.zeros(1, 2, 80, 64, dtype=E4M3)), "v must have shape (1, 2, 96, 64)"),
    (lambda: _call(k=torch.zeros(1, 3, 96, 64, dtype=E4M3), v=torch.zeros(1, 3, 96, 64, dtype=E4M3),
                   k_scale=torch.ones(1, 3), v_scale=torch.ones(1, 3)), "query heads (4) must be a multiple"),
    (lambda: _call(q_scale=torch.ones(4)), "q_scale must be [B, Hq] (one scale a head)"),
    (lambda: _call(k_scale=torch.ones(1, 4)), "k_scale must be [B, Hkv] = (1, 2)"),
    (lambda: _call(v_scale=torch.ones(1, 2, dtype=torch.float16)), "v_scale must be float32"),
])
def test_refusals_name_the_argument_at_the_callers_line(cpu_op, make, message):
    refused_here(make(), message, __file__)


def test_tensors_off_the_gpu_are_refused():
    refused_here(_call(), "q must be on a CUDA device, got cpu", __file__)
    refused_here(lambda: op.fp8_v_layout(torch.zeros(1, 2, 32, 64, dtype=E4M3)),
                 "v must be on a CUDA device, got cpu", __file__)


@pytest.mark.parametrize("make, message", [
    (lambda: op.fp8_v_layout(torch.zeros(1, 2, 32, 64, dtype=torch.bfloat16)), "v must be float8_e4m3fn"),
    (lambda: op.fp8_v_layout(torch.zeros(2, 32, 64, dtype=E4M3)), "v must be [B, H, L, D]"),
    (lambda: op.fp8_v_layout(torch.zeros(1, 2, 32, 80, dtype=E4M3)), "head dim 80 is not supported"),
])
def test_v_layout_refusals(cpu_op, make, message):
    refused_here(make, message, __file__)


def test_opcheck_and_compile(cpu_op):
    """torch.library.opcheck of the custom op (fake tensors, dispatch; not its
    schema test, which multiplies the inputs: torch has no CPU mul of e4m3)
    and a torch.compile'd call (V's layout and the op in one graph) giving
    the eager call's values."""
    q, k, v, qs, ks, vs = _tensors(1, 2, 1, 64, 96, 64, seed=4)
    utils = ("test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(op._fwd.custom_op, (q, k, op.fp8_v_layout(v), qs, ks, vs, True, 0.125),
                          test_utils=utils)
    torch.library.opcheck(op._v_layout.custom_op, (v,), test_utils=utils)
    compiled = torch.compile(lambda *a: op.attention_fp8(*a, causal=True), backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(q, k, v, qs, ks, vs), op.attention_fp8(q, k, v, qs, ks, vs, causal=True))


def test_the_op_passes_the_runtimes_argument_checks():
    """Through the fake driver (the runtime's argument checks: contiguity,
    divisibility, dims; no GPU), a ragged L, causal, GQA: the V-layout
    kernel and the forward, one launch each."""
    import tkc
    from tkc.bench.fake_driver import fake_driver
    q, k, v, qs, ks, vs = _tensors(1, 4, 2, 70, 100, 64)
    with fake_driver() as cuda:
        before = cuda.state.launches
        o = tkc.attention_fp8(q, k, v, qs, ks, vs, causal=True)
        assert cuda.state.launches - before == 2 and o.shape == (1, 4, 70, 64)


@pytest.mark.parametrize("Lk", [100, 128])
def test_repeated_eager_calls_run_the_kept_plan(monkeypatch, Lk):
    """A repeated eager call (its key seen) runs its plan: the V layout and
    the forward, one launch each (attention_fp8_vt: the forward alone), never
    through the custom ops; whole 32-key groups (128) lay V out by the kernel
    alone, a ragged Lk (100) as fp8_v_layout does."""
    import tkc
    from tkc.bench.fake_driver import fake_driver
    monkeypatch.setattr(op._v_layout, "custom_op", None)   # would fail if called
    monkeypatch.setattr(op._fwd, "custom_op", None)
    q, k, v, qs, ks, vs = _tensors(1, 4, 2, 70, Lk, 64)
    with fake_driver() as cuda:
        for _ in range(3):
            before = cuda.state.launches
            o, lse = tkc.attention_fp8(q, k, v, qs, ks, vs, causal=True, return_lse=True)
            assert cuda.state.launches - before == 2 and o.shape == (1, 4, 70, 64) and lse.shape == (1, 4, 70)
        assert len(op._plain.plans) == 1
        vt = torch.empty(1, 2, 64, -(-Lk // 32) * 32, dtype=E4M3)
        for _ in range(2):
            before = cuda.state.launches
            assert tkc.attention_fp8_vt(q, k, vt, qs, ks, vs).shape == (1, 4, 70, 64)
            assert cuda.state.launches - before == 1
        assert len(op._plain.plans) == 2


def test_a_repeated_v_layout_call_skips_the_checks(monkeypatch):
    """fp8_v_layout called again with one layout (its key) runs the layout
    itself at once; a bad argument is still refused where called."""
    import tkc
    from tkc.bench.fake_driver import fake_driver
    v = torch.from_numpy(_e4m3(np.random.default_rng(4).standard_normal((1, 2, 64, 64)))).to(E4M3)
    with fake_driver() as cuda:
        for _ in range(3):
            before = cuda.state.launches
            assert tkc.fp8_v_layout(v).shape == (1, 2, 64, 64) and cuda.state.launches - before == 1
        assert len(op._plain.plans) == 1
        with pytest.raises(tkc.diagnostics.TkcError, match="head dim 48"):
            tkc.fp8_v_layout(v[..., :48].contiguous())
