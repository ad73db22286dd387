"""tkc.attention on the GPU, from prebuilt artifacts, against a float32
PyTorch reference: forward values and log-sum-exp, gradients, causal and
not, D 64, 128 and 256, GQA 8:1 and MQA, ragged lengths (77, 1000), Lq !=
Lk, FlashAttention's memory layout, a varlen batch of mixed lengths;
torch.compile with loss.backward(); CUDA-graph capture; refusals; the
persistent forward; one space of each direction tuned end to end.
`tkc build test/gpu/test_attention_gpu.py` builds every kernel the tuned
tables may pick (the library has only the common shapes') and the variants
beyond them (KERNELS)."""
import math

import pytest

from tkc.diagnostics import TkcError
from tkc.kernels.attention_hopper import attention_hopper
from tkc.kernels.attention_schedule import ForwardSchedule
from tkc.kernels.attention_tuned import all_kernels

pytestmark = pytest.mark.gpu
try:  # the kernels below must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None

# the persistent forward, also where no table picks it (causal, varlen)
PERSISTENT = {(D, causal, layout): attention_hopper(D, causal, layout, ForwardSchedule(persistent=True))
              for D in (64, 128) for causal in (False, True) for layout in ("bhld", "varlen")}
KERNELS = all_kernels() + list(PERSISTENT.values())


def rel_err(x, ref):
    x, ref = x.detach().double(), ref.detach().double()
    return float((x - ref).norm() / ref.norm())


def reference(q, k, v, causal, scale=None):
    """float32 attention in [B, H, L, D] with GQA and bottom-right causal masks
    (SDPA with an explicit mask; rows without a key give 0), differentiable."""
    q, k, v = (t.float() for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    lq, lk = q.shape[2], k.shape[2]
    s = q @ k.transpose(-1, -2) * (scale or 1 / math.sqrt(q.shape[-1]))
    if causal:
        keep = torch.arange(lk, device=q.device)[None, :] <= torch.arange(lq, device=q.device)[:, None] + lk - lq
        s = s.masked_fill(~keep, -math.inf)
    return torch.softmax(s, -1).nan_to_num(0.0) @ v


def inputs(B, Hq, Hkv, Lq, Lk, D, blhd=False, grad=True):
    def make(H, L):
        t = torch.randn(B, L, H, D, device="cuda", dtype=torch.bfloat16)
        t = t.transpose(1, 2) if blhd else t.transpose(1, 2).contiguous()
        return t.requires_grad_(grad)
    return make(Hq, Lq), make(Hkv, Lk), make(Hkv, Lk)


# B, Hq, Hkv, Lq, Lk
SHAPES = {"square": (2, 4, 4, 256, 256), "gqa8-ragged": (1, 8, 1, 1000, 1000),
          "mqa-77": (2, 4, 1, 77, 77), "lq<lk": (1, 4, 2, 300, 1000), "lq>lk": (1, 4, 2, 1000, 300),
          "mid-ragged": (1, 4, 2, 1500, 3000),   # 3000 keys: D 128's long forwards (zigzag if causal)
          "long-ragged": (1, 4, 2, 2100, 8250),  # Lk past 8192: the long (ping-pong) forward everywhere
          "chunk": (2, 4, 2, 200, 4500)}   # a prefill's chunk over its cache: the forward's (4096, 128) row


@pytest.mark.parametrize("D", [64, 96, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_attention(shape, causal, D):
    import tkc
    q, k, v = inputs(*SHAPES[shape], D)
    o, lse = tkc.attention(q, k, v, causal=causal, return_lse=True)
    ref = reference(q, k, v, causal)
    assert not o.isnan().any() and rel_err(o, ref) < 1e-2
    do = torch.randn_like(o)
    o.backward(do)
    grads = [t.grad for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    ref.backward(do.float())
    for g, t in zip(grads, (q, k, v)):
        assert g.shape == t.shape and not g.isnan().any()
        assert rel_err(g, t.grad) < 2e-2


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", ["gqa8-ragged", "lq>lk", "long-ragged"])
def test_head_dim_256_lse_and_layouts(shape, causal):
    """D = 256 (gradients: test_attention): lse, FlashAttention's layout, and
    a varlen batch of one against the fixed-length reference."""
    import tkc
    q, k, v = inputs(*SHAPES[shape], 256, grad=False)
    o, lse = tkc.attention(q, k, v, causal=causal, return_lse=True)
    ref = reference(q, k, v, causal)
    assert not o.isnan().any() and rel_err(o, ref) < 1e-2
    g = q.shape[1] // k.shape[1]
    s = q.float() @ k.float().repeat_interleave(g, 1).transpose(-1, -2) / 16
    if causal:
        lq, lk = s.shape[-2:]
        s = s.masked_fill(torch.arange(lk, device="cuda")[None] > torch.arange(lq, device="cuda")[:, None] + lk - lq,
                          -math.inf)
    fin = torch.logsumexp(s, -1).isfinite()
    assert (lse[fin] - torch.logsumexp(s, -1)[fin]).abs().max() < 1e-3 and (lse[~fin] == math.inf).all()
    qt, kt, vt = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    assert rel_err(tkc.attention(qt, kt, vt, causal=causal), ref) < 1e-2
    flat = lambda t: t[0].transpose(0, 1).contiguous()  # noqa: E731
    one = lambda n: torch.tensor([0, n], device="cuda", dtype=torch.int32)  # noqa: E731
    ov = tkc.attention_varlen(flat(q), flat(k), flat(v), one(q.shape[2]), one(k.shape[2]),
                              q.shape[2], k.shape[2], causal=causal)
    assert rel_err(ov.transpose(0, 1)[None], ref[:1]) < 1e-2


def test_lse_matches():
    import tkc
    q, k, v = inputs(1, 4, 2, 333, 333, 128, grad=False)
    _, lse = tkc.attention(q, k, v, return_lse=True)
    s = q.float() @ k.float().repeat_interleave(2, 1).transpose(-1, -2) / math.sqrt(128)
    assert (lse - torch.logsumexp(s, -1)).abs().max() < 1e-3


def _packed(B, Hq, Hkv, L, D):
    """q, k, v unbound from one [B, L, Hq + 2 Hkv, D] projection, as [B, H, L, D] views."""
    x = torch.randn(B, L, Hq + 2 * Hkv, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    q, k, v = x.split([Hq, Hkv, Hkv], 2)
    return x, [t.transpose(1, 2) for t in (q, k, v)]


@pytest.mark.parametrize("D,L", [(64, 600), (96, 600), (128, 600), (256, 600), (64, 2600)])   # D 64 from 2048 keys:
@pytest.mark.parametrize("memory", ["blhd", "packed"])                         # dK, dV from registers
@pytest.mark.parametrize("causal", [False, True])
def test_strided_layouts_without_copies(causal, memory, D, L):
    """q, k, v as FlashAttention's [B, L, H, D] memory (transposes) or
    unbound from one packed projection (every stride a whole 16 bytes): the
    strided kernels take them as they are; values and gradients against
    float32, the output (and each gradient) in its input's memory order."""
    import tkc
    if memory == "blhd":
        q, k, v = inputs(2, 8, 2, L - 100, L, D, blhd=True)
        leaves = (q, k, v)
    else:
        x, (q, k, v) = _packed(2, 8, 2, L, D)
        leaves = (x,)
    o = tkc.attention(q, k, v, causal=causal)
    assert o.transpose(1, 2).is_contiguous()    # q's memory order
    ref = reference(*(t.detach().requires_grad_() for t in (q, k, v)), causal)
    assert rel_err(o, ref) < 1e-2
    do = torch.randn_like(o)
    o.backward(do)
    got = [t.grad.clone() for t in leaves]
    rq, rk, rv = (t.detach().float().requires_grad_() for t in (q, k, v))
    reference(rq, rk, rv, causal).backward(do.float())
    want = [rq.grad, rk.grad, rv.grad] if memory == "blhd" else \
        [torch.cat([g.transpose(1, 2) for g in (rq.grad, rk.grad, rv.grad)], 2)]
    for g, w in zip(got, want):
        assert rel_err(g, w) < 2e-2


@pytest.mark.parametrize("D", [64, 96, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", ["short", "long", "chunks"])
def test_varlen(case, causal, D):
    """long: one sequence of 8200 keys (max_k past 8192: the long, ping-pong
    forward); chunks: at most 200 queries over up to 4500 keys (the forward's
    short-query row of 128 queries over 4096 keys)."""
    import tkc
    lq, lk = [1000, 77, 1, 300, 513], [1000, 200, 30, 300, 64]
    if case == "long":
        lq, lk = lq + [700], lk + [8200]
    if case == "chunks":
        lq, lk = [200, 77, 1, 130], [4500, 3000, 30, 4100]
    cu = lambda ls: torch.tensor([0, *torch.tensor(ls).cumsum(0).tolist()], device="cuda", dtype=torch.int32)  # noqa: E731
    cu_q, cu_k = cu(lq), cu(lk)
    q = torch.randn(sum(lq), 8, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(sum(lk), 2, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    o = tkc.attention_varlen(q, k, v, cu_q, cu_k, max(lq), max(lk), causal=causal)
    do = torch.randn_like(o)
    o.backward(do)
    for b in range(len(lq)):
        sq, sk = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        qb, kb, vb = (t.detach()[s].transpose(0, 1)[None].requires_grad_() for t, s in ((q, sq), (k, sk), (v, sk)))
        ref = reference(qb, kb, vb, causal)
        assert rel_err(o[sq].transpose(0, 1)[None], ref) < 1e-2
        ref.backward(do[sq].transpose(0, 1)[None].float())
        for t, s, r in ((q, sq, qb), (k, sk, kb), (v, sk, vb)):
            assert rel_err(t.grad[s].transpose(0, 1)[None], r.grad) < 2e-2


@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_on_a_packed_projection(causal, D):
    """q, k, v split from one [T, 3H, D] projection go to the varlen kernels as
    strided views: outputs equal those of contiguous copies, the projection's
    gradient too up to the order of dQ's adds."""
    import tkc
    lens = [1000, 77, 1, 300, 2100]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], device="cuda", dtype=torch.int32)
    x = torch.randn(sum(lens), 12, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = x.detach().clone().requires_grad_()
    o = tkc.attention_varlen(*x.split(4, 1), cu, cu, max(lens), max(lens), causal=causal)
    o2 = tkc.attention_varlen(*(t.contiguous() for t in y.split(4, 1)), cu, cu, max(lens), max(lens),
                              causal=causal)
    do = torch.randn_like(o)
    o.backward(do)
    o2.backward(do)
    assert torch.equal(o, o2)
    assert rel_err(x.grad, y.grad) < 2e-3   # dQ's adds meet in any order: the last bits may differ


@pytest.mark.parametrize("direction,D,causal,layout", [("forward", 128, True, "bhld"),
                                                      ("backward", 64, False, "bhld")])
def test_a_space_tunes_end_to_end(direction, D, causal, layout):
    """A space of each direction tuned at one of its examples (1024 keys), not
    recorded: every candidate runs, matches the default's output and is
    timed (a space holds nothing that could not win)."""
    from tkc.kernels import attention_tuned as tuned
    space = (tuned.FORWARD if direction == "forward" else tuned.BACKWARD)[D, causal, layout]
    example = space.examples()[tuned.EXAMPLE_KEYS.index(1024)]
    result = space.tune(*example(), rounds=1, record=False)
    assert result.key == (D, causal, layout, 1024)
    assert len(result.rows) > 1 and all(r["status"] in ("ok", "best") for r in result.rows), result.table()


def test_compiled_model_backward():
    """A small model calling tkc.attention, compiled (one graph: fullgraph),
    trains a step: loss.backward() through the custom ops, as eager does."""
    import tkc

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(256, 3 * 256, dtype=torch.bfloat16, device="cuda")

        def forward(self, x):
            B, L, _ = x.shape
            q, k, v = self.qkv(x).view(B, L, 3, 4, 64).unbind(2)
            o = tkc.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
            return o.transpose(1, 2).reshape(B, L, 256)

    torch.manual_seed(0)
    model = Block()
    x = torch.randn(2, 300, 256, device="cuda", dtype=torch.bfloat16)
    loss = model(x).float().square().mean()
    loss.backward()
    eager = model.qkv.weight.grad.clone()
    model.qkv.weight.grad = None
    compiled = torch.compile(model, fullgraph=True)
    closs = compiled(x).float().square().mean()
    closs.backward()
    assert abs(closs.item() - loss.item()) < 1e-2 * abs(loss.item())
    assert rel_err(model.qkv.weight.grad, eager) < 2e-2


def test_cuda_graph_capture():
    """Forward and backward captured in a CUDA graph and replayed on new inputs."""
    import tkc
    q, k, v = inputs(2, 4, 2, 512, 512, 128)
    static = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up: module loads happen outside the capture
        tkc.attention(*static, causal=True).sum().backward()
    torch.cuda.current_stream().wait_stream(side)
    for t in static:
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = tkc.attention(*static, causal=True)
        out.float().square().sum().backward()
    with torch.no_grad():
        for s, t in zip(static, (q, k, v)):
            s.copy_(torch.randn_like(t))
    graph.replay()
    torch.cuda.synchronize()
    ref = reference(*(s.detach() for s in static), True)
    assert rel_err(out, ref) < 1e-2
    assert all(s.grad is not None and not s.grad.isnan().any() for s in static)


def test_opcheck():
    q, k, v = inputs(1, 4, 2, 200, 300, 64)
    torch.library.opcheck(torch.ops.tkc.attention_fwd.default, (q, k, v, True, 0.125))


def test_refusals():
    import tkc
    q, k, v = inputs(1, 4, 2, 64, 64, 64, grad=False)
    with pytest.raises(TkcError, match="bf16"):
        tkc.attention(q.half(), k, v)
    with pytest.raises(TkcError, match=r"query heads \(3\) must be a multiple"):
        tkc.attention(q[:, :3], k, v)
    with pytest.raises(TkcError, match="head dim 80"):
        z = torch.zeros(1, 2, 8, 80, device="cuda", dtype=torch.bfloat16)
        tkc.attention(z, z, z)
    with pytest.raises(TkcError, match="CUDA device"):
        tkc.attention(q, k.cpu(), v)
    cu = torch.tensor([0, 30, 60], device="cuda", dtype=torch.int32)
    with pytest.raises(TkcError, match="must rise from 0 to 64"):
        tkc.attention_varlen(q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1),
                             cu, cu, 30, 30)
    # a non-contiguous input is copied, not refused (as SDPA does)
    o = tkc.attention(q[:, :, ::2], k[:, :, ::2], v[:, :, ::2])
    assert rel_err(o, reference(q[:, :, ::2], k[:, :, ::2], v[:, :, ::2], False)) < 1e-2
    # the raw kernel takes every other row as it is (a strided gl: rows 256 bytes apart), and
    # refuses every other column (D's elements apart): it reads memory as the manifest says
    from tkc.kernels.attention_tuned import forward_kernel
    fwd = forward_kernel(64, False, "bhld", 64)
    o = torch.empty(1, 4, 32, 64, device="cuda", dtype=torch.bfloat16)
    fwd(q[:, :, ::2], k, v, o, torch.empty(1, 4, 1, 32, device="cuda"), 0.125)
    assert rel_err(o, reference(q[:, :, ::2], k, v, False)) < 1e-2
    wide = torch.zeros(1, 4, 64, 128, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(TkcError, match="the last dim's elements must be adjacent"):
        fwd(wide[..., ::2], k, v, torch.empty_like(q), torch.empty(1, 4, 1, 64, device="cuda"), 0.125)


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_persistent_forward(causal, D):
    """ForwardSchedule(persistent=True): 132 blocks over the work items
    (GQA, ragged Lq < Lk: 2 x 8 heads x 8 query tiles), and varlen."""
    B, Hq, Hkv, Lq, Lk = 2, 8, 2, 1000, 1300
    q, k, v = inputs(B, Hq, Hkv, Lq, Lk, D, grad=False)
    o, lse = torch.full_like(q, float("nan")), torch.empty(B, Hq, 1, Lq, device="cuda")
    PERSISTENT[D, causal, "bhld"](q, k, v, o, lse, 1 / math.sqrt(D))
    assert rel_err(o, reference(q, k, v, causal)) < 1e-2
    lq, lk = [1000, 77, 1, 300], [1000, 200, 30, 300]
    cq, ck = ([0, *torch.tensor(n).cumsum(0).tolist()] for n in (lq, lk))
    q, k, v = (torch.randn(n[-1], h, D, device="cuda", dtype=torch.bfloat16) for n, h in ((cq, 8), (ck, 2), (ck, 2)))
    o, lse = torch.full_like(q, float("nan")), torch.empty(8, cq[-1], device="cuda")
    offsets = [torch.tensor(c, device="cuda", dtype=torch.int32) for c in (cq, ck)]
    PERSISTENT[D, causal, "varlen"](*(t.view(t.shape[0], -1) for t in (q, k, v, o)), lse.unsqueeze(1),
                                    *offsets, max(lq), 1 / math.sqrt(D))
    t = lambda x, c, b: x[c[b]:c[b + 1]].transpose(0, 1)[None]  # noqa: E731
    for b in range(len(lq)):
        assert rel_err(t(o, cq, b), reference(t(q, cq, b), t(k, ck, b), t(v, ck, b), causal)) < 1e-2
