"""tkc.bench.sanitize's attention steps: the forwards and backwards (every
head dim, causal and not, ragged, GQA, strided and packed layouts, varlen),
a backward of several waves, every forward the tables pick, the FP8 forward
at every schedule, ring attention's merge and the decode path, each against
float32 attention."""
import math

from .peer import rel_err
from .verdict import picked, report

try:
    import torch
except ImportError:  # the module imports without it; its steps need it
    torch = None


def reference(q, k, v, causal, grads: bool = True):
    """Attention in float32 ([B, H, L, D], GQA, causal aligned bottom-right)
    and its gradients for the loss o.sum(): (o, dq, dk, dv); grads=False: o
    alone (no backward: under a sanitizer torch's kernels are checked too)."""
    q, k, v = (t.detach().float().requires_grad_(grads) for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    s = q @ k.repeat_interleave(g, 1).transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        Lq, Lk = q.shape[2], k.shape[2]
        keep = torch.arange(Lk, device="cuda")[None] <= torch.arange(Lq, device="cuda")[:, None] + Lk - Lq
        s = s.masked_fill(~keep, -math.inf)
    o = torch.softmax(s, -1) @ v.repeat_interleave(g, 1)
    if not grads:
        return o
    o.sum().backward()
    return o, q.grad, k.grad, v.grad


def report_grads(name, q, k, v, ref):
    """q's, k's and v's gradients against reference()'s (ref[1:])."""
    for t, r, what in zip((q, k, v), ref[1:], ("dq", "dk", "dv")):
        report(f"{name} {what}", rel_err(t.grad, r), 2e-2)


def attention(dims=(64, 96, 128, 256)):
    import tkc
    from tkc.kernels.attention_tuned import forward_kernel
    for D in dims:
        for causal in (False, True):
            q = torch.randn(1, 4, 200, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k, v = (torch.randn(1, 2, 330, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                    for _ in range(2))
            o = tkc.attention(q, k, v, causal=causal)
            o.float().sum().backward()
            ref = reference(q, k, v, causal)
            report(f"attention d{D} causal={causal}", rel_err(o, ref[0]), 1e-2)
            ping = forward_kernel(D, causal, "bhld", 1 << 16)  # the long sequences' forward
            o2, lse = torch.empty_like(o), torch.empty(1, 4, 1, 200, device="cuda")
            ping(q.detach(), k.detach(), v.detach(), o2, lse, 1 / math.sqrt(D))
            report(f"attention ping-pong d{D} causal={causal}", rel_err(o2, ref[0]), 1e-2)
            report_grads(f"attention backward d{D} causal={causal}", q, k, v, ref)
        strided(D)
        cu = torch.tensor([0, 77, 277, 278], device="cuda", dtype=torch.int32)
        q = torch.randn(278, 4, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(278, 2, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
        o = tkc.attention_varlen(q, k, v, cu, cu, 200, 200, causal=True)
        o.float().sum().backward()
        refs = [reference(*(t[a:b].transpose(0, 1)[None] for t in (q, k, v)), True)
                for a, b in zip(cu.tolist(), cu.tolist()[1:])]       # each sequence alone
        cat = [torch.cat([r[i][0].transpose(0, 1) for r in refs]) for i in range(4)]
        report(f"attention varlen d{D}", rel_err(o, cat[0]), 1e-2)
        report_grads(f"attention varlen backward d{D}", q, k, v, cat)


def attention_long():
    """The causal backward over 288 blocks (D 64, 2200 keys, GQA 2:1, two
    batches): several waves. Its own step: under racecheck it alone takes
    minutes, which `attention` (every head dim, layout and mask) should not."""
    import tkc
    D = 64
    q, k, v = (torch.randn(2, h, 2200, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for h in (16, 8, 8))
    tkc.attention(q, k, v, causal=True).float().sum().backward()
    report_grads(f"attention long causal backward d{D}", q, k, v, reference(q, k, v, True))


def strided(D):
    """The strided kernels on FlashAttention's [B, L, H, D] memory and on q, k, v split from
    a packed projection (D 64 at 2600 keys: dK and dV stored from registers)."""
    import tkc
    L = 2600 if D == 64 else 300
    for memory in ("blhd", "packed"):
        x = torch.randn(1, L, 8 if memory == "packed" else 4, D, device="cuda", dtype=torch.bfloat16,
                        requires_grad=True)
        if memory == "packed":
            q, k, v = (t.transpose(1, 2) for t in x.split([4, 2, 2], 2))
        else:
            q = x.transpose(1, 2)
            k, v = (torch.randn(1, L, 2, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
                    .requires_grad_() for _ in range(2))
        for t in (q, k, v):
            t.retain_grad()
        o = tkc.attention(q, k, v)
        o.float().sum().backward()
        ref = reference(q, k, v, False)
        report(f"attention {memory} d{D}", rel_err(o, ref[0]), 1e-2)
        report_grads(f"attention {memory} backward d{D}", q, k, v, ref)


def attention_fp8():
    """tkc.attention_fp8's forward at every schedule of its spaces (D 64, 128 and 256, causal
    and not; the eager op's picks among them): GQA 2:1, keys past the last multiple of 32 (V^T's
    zero padding) and of each tile, more work items than SMs (a persistent block's second item),
    against float32 attention of the dequantised values (P's e4m3 rounding: ~2.5e-2)."""
    import tkc
    from tkc.kernels import attention_hopper
    from tkc.kernels.attention_schedule import fp8_forward_space
    e4, L = torch.float8_e4m3fn, 1700                  # 14 query tiles of 128 rows, 9 of 192
    for D in (64, 128, 256):
        q, k, v = (torch.randn(1, h, L, D, device="cuda") for h in (16, 8, 8))
        scales = [t.abs().amax((2, 3)) / 448 for t in (q, k, v)]
        q8, k8, v8 = ((t / s[..., None, None]).to(e4) for t, s in zip((q, k, v), scales))
        deq = [t.float() * s[..., None, None] for t, s in zip((q8, k8, v8), scales)]
        vt = tkc.fp8_v_layout(v8)
        for causal in (False, True):
            want = reference(*deq, causal, grads=False)
            for schedule in fp8_forward_space(D, causal):
                kernel = attention_hopper(D, causal, "bhld", schedule, dtype="f8e4m3")
                o = torch.empty(1, 16, L, D, device="cuda", dtype=torch.bfloat16)
                kernel(q8, k8, vt, o, torch.empty(1, 16, 1, L, device="cuda"), *scales, D ** -0.5)
                report(f"attention_fp8 {kernel.name}", rel_err(o, want), 5e-2)


def ring():
    """The attention merge kernels (tkc.ring_attention's steps) at each in/out dtype, ragged rows
    written at an offset into a longer output."""
    from tkc.torchops import ring as ring_op
    dt = {"bf16": torch.bfloat16, "f32": torch.float32}
    for D in (64, 128):
        for acc, out in (("bf16", "bf16"), ("bf16", "f32"), ("f32", "f32"), ("f32", "bf16")):
            B, H, R, r0 = 2, 3, 77, 5
            oa = torch.randn(B, H, R, D, device="cuda").to(dt[acc])
            ob = torch.randn(B, H, R, D, device="cuda").to(torch.bfloat16)
            la, lb = torch.randn(B, H, R, device="cuda"), torch.randn(B, H, R, device="cuda")
            o = torch.zeros(B, H, R + 9, D, device="cuda", dtype=dt[out])
            lo = torch.zeros(B, H, R + 9, device="cuda")
            ring_op._merge(oa, la, ob, lb, o, lo, r0)
            wa = torch.sigmoid(la - lb)[..., None]   # exp(la) / (exp(la) + exp(lb))
            want = oa.float() * wa + ob.float() * (1 - wa)
            report(f"ring merge D {D} {acc} -> {out}", rel_err(o[:, :, r0:r0 + R], want), 1e-2)
            report(f"ring merge lse D {D} {acc} -> {out}", rel_err(lo[:, :, r0:r0 + R], torch.logaddexp(la, lb)), 1e-5)


def decode():
    """tkc.attention's decode path: split-KV forwards with ragged last splits and splits past
    the keys' end, their merge, and the unsplit packed forward (more KV heads than the SMs
    hold), at D 64, 96, 128 and 256; causal packed rows (several queries a head); per-batch key
    lengths (k_lengths) with a full, an empty and a short batch."""
    import tkc
    for B, Hq, Hkv, Lq, Lk, D, causal in ((1, 32, 8, 1, 4099, 128, False), (2, 16, 2, 3, 333, 64, False),
                                          (1, 8, 8, 1, 2000, 256, False), (40, 16, 8, 1, 300, 128, False),
                                          (2, 32, 8, 4, 4099, 128, True), (40, 16, 8, 5, 300, 64, True),
                                          (2, 32, 32, 1, 3001, 96, False), (1, 16, 16, 3, 777, 96, True)):
        q = torch.randn(B, Hq, Lq, D, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(B, Hkv, Lk, D, device="cuda", dtype=torch.bfloat16) for _ in "kv")
        o = tkc.attention(q, k, v, causal=causal)
        report(f"decode B{B} Hq{Hq} Hkv{Hkv} Lq{Lq} Lk{Lk} D{D}{' causal' if causal else ''}",
               rel_err(o, reference(q, k, v, causal, grads=False)), 1e-2)
    k, v = (torch.randn(3, 8, 4099, 128, device="cuda", dtype=torch.bfloat16) for _ in "kv")
    lens = torch.tensor([4099, 0, 100], dtype=torch.int32, device="cuda")   # k_lengths: full, none, part
    for Lq, causal in ((1, False), (4, True)):   # one query; 4 draft tokens
        q = torch.randn(3, 32, Lq, 128, device="cuda", dtype=torch.bfloat16)
        o = tkc.attention(q, k, v, causal=causal, k_lengths=lens)
        want = torch.cat([reference(q[:1], k[:1], v[:1], causal, grads=False), torch.zeros_like(q[:1]).float(),
                          reference(q[2:], k[2:, :, :100], v[2:, :, :100], causal, grads=False)])
        report(f"decode{' causal' if causal else ''} with k_lengths [4099, 0, 100]", rel_err(o, want), 1e-2)


def attention_picks(dims=(64, 96, 128, 256)):
    """Every forward that the tuned tables pick on this GPU (each head dim,
    mask and layout; bhld and varlen; the short queries' rows too) at a small shape with the pick forced:
    more work items than SMs, so the persistent schedules run several a block,
    and ragged tails (GQA 2:1; causal with fewer queries than keys)."""
    import json

    import tkc
    from tkc.kernels.attention_schedule import BUCKETS
    from tkc.kernels.attention_tuned import FORWARD, QUERY_EXAMPLES, forward_key
    for (D, causal, layout), space in FORWARD.items():
        if D not in dims:
            continue
        keys = [(D, causal, layout, n) for n in BUCKETS]   # and the short queries' rows
        keys += [forward_key(D, causal, layout, n, q) for q, n in QUERY_EXAMPLES]
        configs = {json.dumps(c, sort_keys=True): c for c in map(space.choose, keys)}
        for config in configs.values():
            name = f"attention pick {space.kernel(config).name}"
            with picked(space, config), torch.no_grad():
                if layout == "bhld":
                    q = torch.randn(4, 8, 600, D, device="cuda", dtype=torch.bfloat16)
                    k, v = (torch.randn(4, 4, 650, D, device="cuda", dtype=torch.bfloat16) for _ in "kv")
                    report(name, rel_err(tkc.attention(q, k, v, causal=causal),
                                         reference(q, k, v, causal, grads=False)), 1e-2)
                    continue
                lengths = [600] + [130] * 20 + [1]
                cu = torch.tensor([0] + lengths, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)
                q = torch.randn(sum(lengths), 8, D, device="cuda", dtype=torch.bfloat16)
                k, v = (torch.randn(sum(lengths), 4, D, device="cuda", dtype=torch.bfloat16) for _ in "kv")
                o = tkc.attention_varlen(q, k, v, cu, cu, 600, 600, causal=causal)
                want = torch.cat([reference(*(t[a:b].transpose(0, 1)[None] for t in (q, k, v)), causal,
                                            grads=False)[0].transpose(0, 1)
                                  for a, b in zip(cu.tolist(), cu.tolist()[1:])])
                report(name, rel_err(o, want), 1e-2)
