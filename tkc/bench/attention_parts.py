"""Where the time of an attention backward goes: each GPU kernel of
tkc.attention's backward and of SDPA's cuDNN backward, by torch.profiler
(device time a call, averaged over REPS calls of autograd.grad on a saved
forward), at 16k tokens x 16 heads for each L, D 64 and 128, causal and not.
The op's steps besides its main kernel (the statistics, dQ's zeroing and
conversion) are bandwidth work; this shows what they cost beside the peer's.

    python3 -m tkc.bench.attention_parts [L ...]     (default L 1024 4096; the library's kernels)
"""
import sys

REPS = 20


def parts(fn) -> dict:
    """{kernel name: device microseconds a call} of fn, after a warm-up call."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPS):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if us:
            out[e.key] = out.get(e.key, 0.0) + us / REPS
    return out


def main(lengths=(1024, 4096)):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    import tkc
    torch.manual_seed(0)
    for L in lengths:
        for D in (64, 128):
            for causal in (False, True):
                q, k, v = (torch.randn(16384 // L, 16, L, D, device="cuda", dtype=torch.bfloat16,
                                       requires_grad=True) for _ in range(3))
                do = torch.randn_like(q)
                o_tkc = tkc.attention(q, k, v, causal=causal)
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    o_cudnn = sdpa(q, k, v, is_causal=causal)
                print(f"== B{16384 // L} H16 L{L} D{D} {'causal' if causal else 'full'}", flush=True)
                for name, o in (("tkc", o_tkc), ("cudnn", o_cudnn)):
                    p = parts(lambda o=o: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
                    total = sum(p.values())
                    print(f"  {name:5} {total:8.1f} us", flush=True)
                    for kname, us in sorted(p.items(), key=lambda x: -x[1]):
                        print(f"        {us:8.1f} us  {100 * us / total:5.1f}%  {kname[:100]}")


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or (1024, 4096))
