"""Attention backward variants side by side on the GPU (`options`: today
who issues dQ's TMA adds, a store warp or consumer warp 0, and the D 128
schedules beside each), D 64 and 128, causal and not, timed
interleaved with SDPA's cuDNN backward. Each variant runs as tkc.attention's
backward does (statistics and dQ's zeroing, the kernel, dQ's conversion), so
the ratio cuDNN time / variant time compares whole backwards; each variant's
gradients are checked against the first's. `tkc build
scripts/attention_bwd_schedule.py` first.

    python3 scripts/attention_bwd_schedule.py [--blhd] [L ...]

(B = 16384 / L, 16 heads; --blhd: FlashAttention's memory layout;
--only=lib,warp0: those variants only, in options' order.) At locked
clocks, each variant's kernel alone (NCU_ROUNDS launches each, alternating):

    ncu --profile-from-start off -k regex:attn_bwd --metrics gpu__time_duration.sum \
        --csv --page raw --print-units base --log-file ncu.csv \
        python3 scripts/attention_bwd_schedule.py --ncu [--blhd] [L ...] > launches.txt
    python3 scripts/attention_bwd_schedule.py --parse ncu.csv launches.txt"""
import statistics

from tkc.kernels.attention_bwd import (BWD_SCHEDULE, DKV_REGISTERS, attention_bwd, attention_prep, backward_options,
                                       dq_order, dq_result, stats_columns)

LAYOUTS = ("bhld", "blhd")


def options(D: int, causal: bool) -> dict:
    """{variant name: attention_bwd's schedule options}; "lib": BWD_SCHEDULE's
    (dQ's TMA adds issued by a store warp), "warp0": that with consumer warp 0
    issuing them after a meeting (the library's before 2026-11-26 night);
    "ds1": one dS^T tile; "serial": without the overlap; "fma8", "fma4": an
    eighth, a quarter of the exponentials on the FMA pipe; "noacc": the statistics subtracted after
    the wgmmas' waits (without stats_acc); "tma" (where the library stores
    dK and dV from registers): them stored by TMA; "dqs1": one dQ tile
    (dq_slots=1), "dqs1s3": that and a third Q/dO stage (at D 64 with one
    dS^T tile: two and the third stage do not fit); "dqdi": dQ's shared tile
    written deinterleaved by stmatrix (dq_deinterleave; torch's conversion
    undoes the order, dq_result); "w0reg": "warp0" with dK and dV stored
    from registers, and "pers": that persistent (132 blocks over the work
    items), to measure persistence alone."""
    out = {"lib": BWD_SCHEDULE[D], "warp0": dict(BWD_SCHEDULE[D], store_warp=False),
           "ds1": dict(BWD_SCHEDULE[D], ds_slots=1), "serial": dict(BWD_SCHEDULE[D], overlap=False),
           "noacc": dict(BWD_SCHEDULE[D], stats_acc=False)}
    for name, share in (("fma8", 0.125), ("fma4", 0.25)):
        out[name] = dict(BWD_SCHEDULE[D], ex2_fma=share)
    out["dqs1"] = dict(BWD_SCHEDULE[D], dq_slots=1)
    out["dqs1s3"] = dict(BWD_SCHEDULE[D], dq_slots=1, stages=3, **({"ds_slots": 1} if D == 64 else {}))
    out["dqdi"] = dict(BWD_SCHEDULE[D], dq_deinterleave=True)
    # persistence alone: a persistent kernel has neither the store warp nor
    # dK and dV's TMA stores (and keeps per-lane warp ids)
    out["w0reg"] = dict(BWD_SCHEDULE[D], store_warp=False, dkv_tma=False)
    out["pers"] = dict(BWD_SCHEDULE[D], store_warp=False, persistent=True)
    if (D, causal) in DKV_REGISTERS:
        out["tma"] = dict(BWD_SCHEDULE[D], dkv_tma=True)
    return out


def variant(D, causal, layout, schedule):
    """tkc.attention's backward kernel with `schedule` instead of BWD_SCHEDULE's."""
    base = {k: v for k, v in backward_options(D, causal, layout).items() if k in ("BQ", "dkv_tma")}
    return attention_bwd(D, causal, layout, **{**base, **schedule})


VARIANTS = {(D, c, layout, name): variant(D, c, layout, o)
            for layout in LAYOUTS for D in (64, 128) for c in (False, True) for name, o in options(D, c).items()}
PREP = {(D, layout): attention_prep(D, layout) for D in (64, 128) for layout in LAYOUTS}
KERNELS = list(VARIANTS.values()) + list(PREP.values())


NCU_ROUNDS = 2


def main(lengths=(1024, 4096), layout="bhld", ncu=False, only=None):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    import tkc
    from tkc.bench.timing import interleaved, profile_variants
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
                scale = D ** -0.5
                fns, grads = {}, {}
                for name in options(D, causal):
                    if (D, causal, layout, name) not in VARIANTS or only and name not in only:
                        continue
                    kern = VARIANTS[D, causal, layout, name]
                    dq = view(torch.empty(mem, device="cuda").transpose(1, 2) if layout == "blhd"
                              else torch.empty(mem, device="cuda"))   # prep zeroes it
                    dk, dv = torch.empty_like(view(k)), torch.empty_like(view(v))

                    def run(kern=kern, dq=dq, dk=dk, dv=dv, di=dq_order(options(D, causal)[name])):
                        PREP[D, layout](view(o), view(do), lse.unsqueeze(2), stats, dq)   # zeroes dq
                        kern(view(q), view(k), view(v), view(do), stats, dq, dk, dv, scale)
                        return dq_result(dq, torch.bfloat16, di)   # as attention_ops._bwd
                    grads[name] = (run(), dk.clone(), dv.clone())
                    fns[name] = run
                first = next(iter(grads.values()))
                for name, g in grads.items():
                    err = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                              for a, b in zip(g, first))
                    assert err < 1e-2, (L, D, causal, name, err)
                config = f"{layout} B{B} H{H} L{L} D{D} {'causal' if causal else 'full'}"
                if ncu:                  # the launch list, in order, for --parse
                    profile_variants(config, fns, NCU_ROUNDS)
                    continue
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
    if sys.argv[1:2] == ["--parse"]:
        from tkc.bench.timing import ncu_table
        print("\n".join(ncu_table(*sys.argv[2:4], "attn_bwd")))
        sys.exit()
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    only = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--only=")), None)
    main([int(x) for x in args] or (1024, 4096), "blhd" if "--blhd" in sys.argv else "bhld",
         ncu="--ncu" in sys.argv, only=only)
