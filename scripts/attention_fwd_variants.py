"""The forward probes' shared runner (attention_fwd_fma.py and
attention_fwd_oq.py): each probe names its rows (D, causal), lengths and
variants; this checks every variant against a reference, then times them
interleaved with SDPA's cuDNN forward (5 rounds, boost clocks) or launches
them for ncu at locked clocks (--ncu; --parse CSV LAUNCHES reads ncu's
times back). Imported when a probe runs, not when `tkc build` reads it (the
build does not put scripts/ on the import path)."""
import statistics
import sys


def compare(variants, rows, lengths, ncu: bool = False, reference: str = "cudnn"):
    """variants(D, causal, L): {name: forward kernel}, each checked within 1e-2
    relative error of the reference (SDPA's cuDNN output, or "float32":
    SDPA's math on float32 copies), B * L = 16k tokens, 16 heads, bhld."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    from tkc.bench.timing import interleaved, median_ratio, profile_variants
    torch.manual_seed(0)
    for L in lengths:
        B, H = 16384 // L, 16
        for D, causal in rows:
            q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            scale = D ** -0.5
            if reference == "float32":
                with sdpa_kernel(SDPBackend.MATH):
                    ref = sdpa(q.float(), k.float(), v.float(), is_causal=causal)
            else:
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    ref = sdpa(q, k, v, is_causal=causal).float()
            fns = {}
            for name, kern in variants(D, causal, L).items():
                o, lse = torch.empty_like(q), torch.empty(B, H, 1, L, device="cuda")
                fns[name] = fn = (lambda kern=kern, o=o, lse=lse: kern(q, k, v, o, lse, scale))
                fn()
                err = ((o.float() - ref).norm() / ref.norm()).item()
                assert err < 1e-2, (D, causal, L, name, err)
            del ref
            config = f"B{B} H{H} L{L} D{D} {'causal' if causal else 'full'}"
            if ncu:
                profile_variants(config, fns)
                continue

            def cudnn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION), torch.no_grad():
                    sdpa(q, k, v, is_causal=causal)
            times = interleaved({**fns, "cudnn": cudnn}, rounds=5, reps=10, inner=5)
            line = " ".join(f"{n}: {statistics.median(times[n]):.3f} ms "
                            f"({median_ratio(times['cudnn'], times[n]):.3f})" for n in fns)
            print(f"{config} cudnn {statistics.median(times['cudnn']):.3f} ms | {line}", flush=True)


def cli(variants, rows, lengths, reference: str = "cudnn") -> None:
    """A probe's command line: [--ncu] [L ...], or --parse CSV LAUNCHES."""
    if sys.argv[1:2] == ["--parse"]:
        from tkc.bench.timing import ncu_table
        print("\n".join(ncu_table(*sys.argv[2:4], "attn_fwd")))
        return
    args = [int(a) for a in sys.argv[1:] if not a.startswith("--")]
    compare(variants, rows, args or lengths, ncu="--ncu" in sys.argv, reference=reference)
