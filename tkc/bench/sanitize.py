"""The library's Hopper kernels once each on small shapes, for compute-sanitizer
(scripts/gpu.sh's step `sanitizer`):

    compute-sanitizer --tool memcheck|racecheck|synccheck --report-api-errors no \
        python3 -m tkc.bench.sanitize [gemm attention attention_long attention_picks memory dropout
                                   linear fftconv ops fp8 attention_fp8 ring swiglu decode]
        (attention and attention_picks take head dims: attention_picks:128,256)

GEMM shapes give several work items per persistent block, K steps that wrap
the ring, and ragged edges (TMA zero-fill and clipping); the attention steps
are sanitize_attention's; the memory-bound kernels rotary (D 128 and 96) and
LayerNorm (forward and backward, with and without a residual); both norms with
dropout (dropout); the linear-attention family; the FFT convolution;
tkc.matmul, tkc.linear and the wide norms (ops); the FP8 GEMMs and
quantisation (fp8); tkc.swiglu at every schedule (swiglu). Results are
checked too (tkc.bench.verdict).
"""
import itertools
import sys

from . import verdict
from .peer import rel_err
from .sanitize_attention import attention, attention_fp8, attention_long, attention_picks, decode, ring
from .verdict import picked, report

try:
    import torch
except ImportError:  # the module imports without it; its steps need it
    torch = None


def gemms():
    from tkc.kernels import gemm_hopper
    for out in ("bf16", "f32"):
        for transpose_b in (False, True):
            k = gemm_hopper(out, transpose_b=transpose_b)
            for m, n, kk in [(384, 768, 320), (200, 264, 72)]:
                a = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
                b = torch.randn(*((n, kk) if transpose_b else (kk, n)), device="cuda", dtype=torch.bfloat16)
                c = torch.full((m, n), float("nan"), device="cuda",
                               dtype=torch.bfloat16 if out == "bf16" else torch.float32)
                k(a, b, c)
                torch.cuda.synchronize()
                ref = a.float() @ (b.float().T if transpose_b else b.float())
                report(f"{k.name} {m}x{n}x{kk}", rel_err(c, ref), 1e-2 if out == "bf16" else 1e-5)


def memory():
    from tkc.torchops import layer_norm
    for D in (128, 96):
        rotary(D)
    for residual in (True, False):
        h = torch.randn(300, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        r = torch.randn_like(h) if residual else None
        w, b = (torch.randn(1024, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
        out = layer_norm(h, w, b, residual=r)
        out.float().sum().backward()
        wf, bf = (t.detach().float().requires_grad_() for t in (w, b))
        ref = torch.nn.functional.layer_norm(h.float() + (r.float() if residual else 0), (1024,), wf, bf)
        ref.sum().backward()
        report(f"layer_norm residual={residual}", rel_err(out, ref), 1e-2)
        report(f"layer_norm dw, db residual={residual} (norm_grads)", rel_err(torch.cat([w.grad, b.grad]),
                                                                         torch.cat([wf.grad, bf.grad])), 1e-2)


def dropout():
    """Both norms with dropout (the seed read on the device), forward and
    backward, with and without a residual, at D 1024 (a warp a row) and 16384
    (the widest, a row split over warps). dx is 0 exactly where an element
    was dropped: that mask gives the reference."""
    import torch.nn.functional as F

    import tkc
    for rms, residual, D in itertools.product((False, True), (True, False), (1024, 16384)):
        N, p = 300 if D == 1024 else 40, 0.25
        x = torch.randn(N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        r = torch.randn_like(x) if residual else None
        w = (torch.rand(D, device="cuda") + 0.5).to(torch.bfloat16).requires_grad_()
        b = torch.randn(D, device="cuda", dtype=torch.bfloat16) * 0.1
        y = tkc.rms_norm(x, w, r, dropout_p=p) if rms else tkc.layer_norm(x, w, b, r, dropout_p=p)
        g = torch.randn_like(y)
        y.backward(g)
        torch.cuda.synchronize()
        kept = x.grad != 0
        xf, wf = (t.detach().float().requires_grad_() for t in (x, w))
        h = xf * kept / (1 - p) + (r.float() if residual else 0)
        want = (F.rms_norm(h, (D,), wf, 1e-6) if rms
                else F.layer_norm(h, (D,), wf, b.float(), 1e-5))
        want.backward(g.float())
        name = f"{'rms' if rms else 'layer'}_norm D {D} dropout {p} residual={residual}"
        report(name, rel_err(y, want), 1e-2)
        report(name + " dx, dw", rel_err(torch.cat([x.grad.flatten(), w.grad]),
                                         torch.cat([xf.grad.flatten(), wf.grad])), 1e-2)
        report(name + " kept share", abs(kept.float().mean().item() - (1 - p)), 0.01)


def rotary(D: int):
    from tkc.torchops import rotary_embedding
    x = torch.randn(2, 77, 4, D, device="cuda", dtype=torch.bfloat16)
    theta = torch.randn(77, D // 2, device="cuda")
    cos, sin = theta.cos().bfloat16(), theta.sin().bfloat16()
    c, s = cos[None, :, None].float(), sin[None, :, None].float()
    for interleaved in (False, True):
        x.grad = None
        y = rotary_embedding(x.requires_grad_(), cos, sin, interleaved)
        xf = x.detach().float().requires_grad_()
        x1, x2 = (xf[..., 0::2], xf[..., 1::2]) if interleaved else (xf[..., :D // 2], xf[..., D // 2:])
        o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
        want = torch.stack([o1, o2], -1).flatten(-2) if interleaved else torch.cat([o1, o2], -1)
        dy = torch.randn_like(y)
        y.backward(dy)                                      # the inverse rotation kernel
        want.backward(dy.float())
        report(f"rotary D{D} interleaved={interleaved}", rel_err(y, want), 1e-2)
        report(f"rotary D{D} backward interleaved={interleaved}", rel_err(x.grad, xf.grad), 1e-2)
        qkv = torch.randn(2, 77, 12, D, device="cuda", dtype=torch.bfloat16)   # q of a packed projection
        report(f"rotary D{D} packed interleaved={interleaved}",
               rel_err(rotary_embedding(qkv[:, :, :4], cos, sin, interleaved),
                   rotary_embedding(qkv[:, :, :4].contiguous(), cos, sin, interleaved).float()), 1e-6)


def linear():
    """tkc.linear_attention (each schedule of the library's shapes), tkc.based, tkc.hedgehog."""
    import tkc
    from tkc.fuzz.ops_ref import linear_attention as reference_la
    from tkc.kernels.linear_attention import PICKED, linear_attention, schedules

    def want(q, k, v, g):   # in float64
        return reference_la(q.double(), k.double(), v.double(), g)
    for F, DV, decay in PICKED:
        q, k = (torch.randn(1, 2, 200, F, device="cuda") * 0.3 for _ in range(2))
        q, k, v = q.bfloat16(), k.bfloat16(), torch.randn(1, 2, 200, DV, device="cuda").bfloat16()
        g = -torch.rand(1, 2, 200, device="cuda") * 0.05 if decay else None
        ref = want(q, k, v, g)
        report(f"linear_attention F{F} DV{DV} decay={decay}", rel_err(tkc.linear_attention(q, k, v, g=g), ref),
               2e-2)
        for c in schedules(F, DV, decay):
            o = torch.empty_like(v)
            kernel = linear_attention(F, DV, decay, c["stages"], c["consumers"], c["blocks_per_sm"])
            kernel(q, k, v, *((g.unsqueeze(2),) if decay else ()), o, F ** -0.5)
            report(f"  {kernel.name}", rel_err(o, ref), 2e-2)
    # odd L (decay: g padded by one zero log decay) and v wider than a kernel holds (column slices)
    for F, DV, decay in ((64, 64, True), (128, 128, True), (128, 256, False), (128, 256, True)):
        q, k = (torch.randn(1, 2, 201, F, device="cuda").bfloat16() * 0.3 for _ in range(2))
        v = torch.randn(1, 2, 201, DV, device="cuda").bfloat16()
        g = -torch.rand(1, 2, 201, device="cuda") * 0.05 if decay else None
        report(f"linear_attention L201 F{F} DV{DV} decay={decay}",
               rel_err(tkc.linear_attention(q, k, v, g=g), want(q, k, v, g)), 2e-2)
    q, k = (torch.randn(1, 2, 200, 16, device="cuda").bfloat16() for _ in range(2))
    v = torch.randn(1, 2, 200, 64, device="cuda").bfloat16()
    x = q.double() @ k.double().transpose(-1, -2) / 4
    report("based", rel_err(tkc.based(q, k, v), (1 + x + x * x / 2).tril() @ v.double()), 2e-2)
    from tkc.kernels import reference
    q, k, v = (torch.randn(1, 2, 200, 128, device="cuda").bfloat16() for _ in range(3))
    maps = [torch.randn(2, 128, 64, device="cuda").bfloat16() for _ in range(2)]
    alpha, beta = torch.rand(2, device="cuda") * 3, torch.rand(2, device="cuda")
    args = (q, k, v, *maps, alpha, beta)
    ref = reference.hedgehog(*(t.float().cpu().numpy() for t in args), 128 ** -0.5)
    report("hedgehog", rel_err(tkc.hedgehog(*args), torch.from_numpy(ref).to(q.device)), 2e-2)


def fftconv():
    """Circular and causal at each FFT size, an odd batch (the pair's missing row)."""
    import tkc
    for N in (1024, 2048, 4096):
        for L in (N, N // 2):
            u = torch.randn(3, 8, L, device="cuda").bfloat16()
            k = torch.randn(8, N - L + 1 if L < N else N, device="cuda")
            y = torch.fft.irfft(torch.fft.rfft(u.double(), n=N) * torch.fft.rfft(k.double(), n=N), n=N)
            report(f"fftconv N{N} L{L}", rel_err(tkc.fftconv(u, tkc.fftconv_filter(k, N)), y[..., :L]), 2e-2)


def ops():
    """tkc.matmul and tkc.linear at each GEMM schedule the tuned table may pick
    (the pick replaced by each in turn: tile heights 128, 64 and 16, widths,
    clusters, split-K), transposed A in their backward, batched, the bias +
    gelu epilogue with its pre-activation; both norms' split-row kernels (D
    4096, 8192) and one-warp ones (D 1024), forward and backward."""
    import tkc
    from tkc.kernels import GEMM_SCHEDULES
    from tkc.kernels.gemm_space import label
    from tkc.torchops import gemm, plans
    real = gemm._schedule
    for schedule in GEMM_SCHEDULES:
        gemm._schedule = lambda *args, s=schedule: s
        plans.forget()
        name = label(schedule)
        a = torch.randn(200, 136, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        b = torch.randn(136, 264, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        c = tkc.matmul(a, b)
        c.float().sum().backward()
        report(f"matmul {name}", rel_err(c, a.float() @ b.float()), 1e-2)
        report(f"matmul {name} dB (A^T dC)", rel_err(b.grad, a.float().sum(0)[:, None].expand(136, 264)), 2e-2)
        x = torch.randn(3, 70, 136, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        w = (torch.randn(264, 136, device="cuda") * 0.1).bfloat16().requires_grad_()
        bias = torch.randn(264, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        y = tkc.linear(x, w, bias, "gelu")
        y.float().sum().backward()
        report(f"linear gelu {name}", rel_err(y, torch.nn.functional.gelu(x.float() @ w.float().t() + bias.float())), 1e-2)
        p, q = torch.randn(2, 72, 136, device="cuda").bfloat16(), torch.randn(2, 136, 40, device="cuda").bfloat16()
        report(f"matmul batched {name}", rel_err(tkc.matmul(p, q), p.float() @ q.float()), 1e-2)
        d = torch.randn(5, 136, device="cuda", dtype=torch.bfloat16)   # decode-shaped: 5 rows
        report(f"matmul 5 rows {name}", rel_err(tkc.matmul(d, b.detach()), d.float() @ b.detach().float()), 1e-2)
    gemm._schedule = real
    plans.forget()
    for D in (1024, 4096, 8192):
        x = torch.randn(37, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        r = torch.randn(37, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        w = torch.ones(D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        b = torch.zeros(D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        y = tkc.layer_norm(x, w, b, residual=r)
        y.float().sum().backward()
        report(f"layer_norm D {D}", rel_err(y, torch.nn.functional.layer_norm(x.float() + r.float(), (D,))), 1e-2)
        y = tkc.rms_norm(x, w)
        y.float().sum().backward()
        want = x.float() * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + 1e-6)
        report(f"rms_norm D {D}", rel_err(y, want), 1e-2)


def _blocks(t, rows):
    """t [R, K] float32 in e4m3 with one scale per `rows` rows x 128 columns: (q, scales)."""
    R, K = t.shape
    pad = t.new_zeros(-(-R // rows) * rows, K)
    pad[:R] = t
    s = pad.abs().view(-1, rows, K // 128, 128).amax(dim=(1, 3)).clamp(min=2.0 ** -100) / 448
    return (pad / s.repeat_interleave(rows, 0).repeat_interleave(128, 1)).to(torch.float8_e4m3fn)[:R], s


def fp8():
    """tkc.quantize_fp8; tkc.scaled_mm with per-tensor, row-wise and block scales at both
    tile heights (the tuned pick replaced by each in turn) and with use_fast_accum; the grouped
    GEMM in its layouts (masked and by counts at both heights), an empty expert included. Ragged M and N, K over several blocks."""
    import tkc
    from tkc.torchops import grouped, scaled
    e4, M, N, K = torch.float8_e4m3fn, 200, 264, 384
    x = torch.randn(M, K, device="cuda").bfloat16()
    q, s = tkc.quantize_fp8(x)
    report("quantize_fp8", rel_err(q.float() * s.repeat_interleave(128, 1), x.float()), 0.07)
    a, bt = torch.randn(M, K, device="cuda").to(e4), torch.randn(N, K, device="cuda").to(e4)
    full = a.float() @ bt.float().t()
    for bm in (128, 192):   # each tile height, the tuned pick replaced
        with picked(scaled.TILE, {"BM": bm}):
            for kind, sa, sb in (("tensor", torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")),
                                 ("rowwise", torch.rand(M, 1, device="cuda"), torch.rand(1, N, device="cuda"))):
                for fast in ((False, True) if bm == 128 else (False,)):
                    c = tkc.scaled_mm(a, bt.t(), sa, sb, use_fast_accum=fast)
                    report(f"scaled_mm {kind} BM {bm} fast={fast}", rel_err(c, full * sa * sb), 1e-2)
            xf, wf = torch.randn(M, K, device="cuda"), torch.randn(N, K, device="cuda")
            (qa, sa), (qb, sb) = _blocks(xf, 1), _blocks(wf, 128)
            c = tkc.scaled_mm(qa, qb.t(), sa.t().contiguous().t(), sb.t(), out_dtype=torch.float32)
            deq = (qa.float() * sa.repeat_interleave(128, 1)) @ (qb.float() * sb.repeat_interleave(128, 0)
                                                                .repeat_interleave(128, 1)[:N]).t()
            report(f"scaled_mm block scales BM {bm}", rel_err(c, deq), 1e-3)
    E, counts = 3, (37, 0, 130)
    w = [_blocks(torch.randn(N, K, device="cuda"), 128) for _ in range(E)]
    b = torch.stack([qb for qb, _ in w]).transpose(1, 2)                       # [E, K, N] column-major
    sb = torch.stack([s for _, s in w]).transpose(1, 2)                       # [E, K/128, N/128]
    wd = [qb.float() * s.repeat_interleave(128, 0).repeat_interleave(128, 1)[:N] for qb, s in w]
    rows = [_blocks(torch.randn(m, K, device="cuda"), 1) for m in counts]
    wants = [(qr.float() * sr.repeat_interleave(128, 1)) @ wd[e].t() for e, (qr, sr) in enumerate(rows)]
    qa = torch.zeros(E, 256, K, device="cuda").to(e4)
    sa = torch.zeros(E, K // 128, 256, device="cuda")
    for e, (qr, sr) in enumerate(rows):
        qa[e, :counts[e]], sa[e, :, :counts[e]] = qr, sr.t()
    i32 = lambda v: torch.tensor(v, device="cuda", dtype=torch.int32)  # noqa: E731
    for bm in (128, 192):   # the masked kernel at each height
        with picked(grouped.MASKED_TILE, {"BM": bm}):
            c = tkc.grouped_scaled_mm(qa, b, sa.transpose(1, 2), sb, i32(counts), out_dtype=torch.float32)
        for e, m in enumerate(counts):
            if m:
                report(f"grouped masked BM {bm} expert {e}", rel_err(c[e, :m], wants[e]), 1e-3)

    def contiguous(unit: int):
        """a, scale_a (stored transposed) and the row offsets of the experts' rows, each
        expert's padded to a multiple of `unit` rows."""
        pads = [-(-m // unit) * unit for m in counts]
        starts = [sum(pads[:e]) for e in range(E)]
        a2 = torch.zeros(sum(pads), K, device="cuda").to(e4)
        sa2 = torch.zeros(K // 128, sum(pads), device="cuda")
        for (qr, sr), m, r in zip(rows, counts, starts):
            a2[r:r + m], sa2[:, r:r + m] = qr, sr.t()
        return a2, sa2.t(), pads, starts

    def check(c, starts, what: str):
        for e, (m, r) in enumerate(zip(counts, starts)):
            if m:
                report(f"grouped {what} expert {e}", rel_err(c[r:r + m], wants[e]), 1e-3)

    a2, sa2, pads, starts = contiguous(128)
    groups = [e for e, p in enumerate(pads) for _ in range(p // 128)]
    check(tkc.grouped_scaled_mm(a2, b, sa2, sb, i32(groups), out_dtype=torch.float32), starts, "contiguous")
    a3, sa3, pads, starts = contiguous(4)   # the layout by counts: experts back to back, multiples of 4
    for bm in (128, 192):   # at each height
        with picked(grouped.COUNTS_TILE, {"BM": bm}):
            c = tkc.grouped_scaled_mm(a3, b, sa3, sb, counts=i32(pads), out_dtype=torch.float32)
        check(c, starts, f"by counts BM {bm}")


def swiglu():
    """tkc.swiglu at each schedule its table may pick (the gate and up halves'
    loads, the gating in the finish, overlapped with the next item's loop
    where the carried tiles fit), with and without the stored gate and up;
    tkc.linear's silu finish (overlapped too) at the default tile."""
    import tkc
    from tkc.kernels import GATED_SCHEDULES
    from tkc.kernels.gemm_space import label
    from tkc.torchops import gated
    silu = torch.nn.functional.silu
    for schedule in GATED_SCHEDULES:
        name, bn = label(schedule), schedule["BN"]
        x = torch.randn(300, 264, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        wg, wu = ((torch.randn(8 + 4 * bn, 264, device="cuda") * 0.1).bfloat16().requires_grad_() for _ in "gu")
        want = silu(x.float() @ wg.float().t()) * (x.float() @ wu.float().t())
        with picked(gated.TILE, schedule):
            h = tkc.swiglu(x, wg, wu)
            h.float().sum().backward()
            report(f"swiglu {name}", rel_err(h, want), 1e-2)
            with torch.no_grad():
                report(f"swiglu {name} (h alone)", rel_err(tkc.swiglu(x, wg, wu), want), 1e-2)
    x = torch.randn(1000, 264, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(1032, 264, device="cuda") * 0.1).bfloat16()
    report("linear silu", rel_err(tkc.linear(x, w, None, "silu"), silu(x.float() @ w.float().t())), 1e-2)


STEPS = {"gemm": gemms, "attention": attention, "attention_long": attention_long,
         "attention_picks": attention_picks, "memory": memory,
         "dropout": dropout, "linear": linear, "fftconv": fftconv, "ops": ops, "fp8": fp8,
         "attention_fp8": attention_fp8, "ring": ring, "swiglu": swiglu, "decode": decode}


def main(steps) -> int:
    for step in steps or list(STEPS):
        name, _, dims = step.partition(":")   # attention:96,128 (the attention steps' head dims)
        STEPS[name](*([tuple(int(d) for d in dims.split(","))] if dims else []))
    return 1 if verdict.wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
