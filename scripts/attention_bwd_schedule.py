"""The attention backward's grid schedules side by side on the GPU: a block
a work item (key block, KV head, batch) against a persistent block an SM
(static order, or zigzag), causal and not, D 64 and 128, timed interleaved
with SDPA's cuDNN backward; each variant's gradients checked against the
block-a-work-item kernel's. `tkc build scripts/attention_bwd_schedule.py`
first. python3 scripts/attention_bwd_schedule.py [--blhd] [L ...] (B = 16384
/ L; --blhd: FlashAttention's layout)."""
import statistics

from tkc.kernels.attention_bwd import attention_bwd, attention_prep, backward_options, stats_columns

SCHEDULES = (False, True, "zigzag")
VARIANTS = [(D, c, p) for D in (64, 128) for c in (False, True) for p in SCHEDULES]
KERNELS = {layout: [attention_bwd(D, c, layout, **backward_options(D, c), persistent=p) for D, c, p in VARIANTS]
           for layout in ("bhld", "blhd")}
PREP = {(D, layout): attention_prep(D, layout) for D in (64, 128) for layout in ("bhld", "blhd")}


def main(lengths=(1024, 4096), layout="bhld"):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    import tkc
    from tkc.bench.timing import interleaved
    torch.manual_seed(0)
    for L in lengths:
        B, H = 16384 // L, 16
        for D in (64, 128):
            for causal in (False, True):
                # [B, H, L, D] tensors in the layout's memory order, and the kernels' views
                mem = (B, H, L, D) if layout == "bhld" else (B, L, H, D)
                q, k, v, do = (torch.randn(mem, device="cuda", dtype=torch.bfloat16) for _ in range(4))
                if layout == "blhd":
                    q, k, v, do = (t.transpose(1, 2) for t in (q, k, v, do))
                view = (lambda t: t) if layout == "bhld" else (lambda t: t.transpose(1, 2).reshape(B, L, H * D))
                o, lse = tkc.attention(q, k, v, causal=causal, return_lse=True)
                stats = torch.empty(B, H, 2, stats_columns(L), device="cuda")
                PREP[D, layout](view(o), view(do), lse.unsqueeze(2), stats)
                scale = D ** -0.5
                fns, grads = {}, {}
                for (D2, c, p), kern in zip(VARIANTS, KERNELS[layout]):
                    if (D2, c) != (D, causal):
                        continue
                    dq = view(torch.zeros(mem, device="cuda").transpose(1, 2) if layout == "blhd"
                              else torch.zeros(mem, device="cuda"))
                    dk, dv = torch.empty_like(view(k)), torch.empty_like(view(v))

                    def run(kern=kern, dq=dq, dk=dk, dv=dv):
                        dq.zero_()
                        kern(view(q), view(k), view(v), view(do), stats, dq, dk, dv, scale)
                    run()
                    grads[str(p)] = (dq.clone(), dk.clone(), dv.clone())
                    fns[str(p)] = run
                ref = grads["False"]
                for name, g in grads.items():
                    err = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                              for a, b in zip(g, ref))
                    assert err < 1e-2, (L, D, causal, name, err)
                q2, k2, v2 = (t.clone().requires_grad_() for t in (q, k, v))

                def both():
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        torch.autograd.grad(sdpa(q2, k2, v2, is_causal=causal), (q2, k2, v2), do)

                def fwd():
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION), torch.no_grad():
                        sdpa(q2, k2, v2, is_causal=causal)
                times = interleaved({**fns, "both": both, "fwd": fwd}, rounds=5, reps=10, inner=5)
                cudnn = [b - a for a, b in zip(times["fwd"], times["both"])]
                line = " ".join(f"{n}: {statistics.median(times[n]):.3f} ms "
                                f"({statistics.median(c / t for c, t in zip(cudnn, times[n])):.3f})"
                                for n in fns)
                print(f"{layout} B{B} H{H} L{L} D{D} {'causal' if causal else 'full  '} cudnn "
                      f"{statistics.median(cudnn):.3f} ms | {line}", flush=True)


if __name__ == "__main__":
    import sys
    args = [a for a in sys.argv[1:] if a != "--blhd"]
    main([int(x) for x in args] or (1024, 4096), "blhd" if "--blhd" in sys.argv else "bhld")
