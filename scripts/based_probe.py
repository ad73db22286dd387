"""Probe Based variants on the GPU (ring stages here; edit VARIANTS to try
others): each checked against FLA's parallel_based, then all timed
interleaved with it. `tkc build scripts/based_probe.py` first (the variants
are KERNELS); FLA on PYTHONPATH (scripts/gpu.sh's fla_path)."""
from tkc.kernels.linear_attention import based

VARIANTS = [dict(), dict(stages=3)]
KERNELS = [based(**v) for v in VARIANTS]


def main():
    import torch

    from tkc.bench.timing import medians, peer_line
    from fla.ops.based import parallel_based
    B, H = 16, 16
    for L in (1024, 4096, 8192):
        q, k = (torch.randn(B, H, L, 16, device="cuda").bfloat16() for _ in range(2))
        v = torch.randn(B, H, L, 64, device="cuda").bfloat16()
        qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        outs = {}
        fns = {}
        for kern in KERNELS:
            o = torch.empty_like(v)
            fns[kern.name] = (lambda kern=kern, o=o: kern(q, k, v, o, 0.25))
            outs[kern.name] = o
        fns["fla"] = lambda: parallel_based(qt, kt, vt, use_norm=False)
        for f in fns.values():
            f()
        ref = parallel_based(qt, kt, vt, use_norm=False).transpose(1, 2).float()
        for n, o in outs.items():
            err = ((o.float() - ref).norm() / ref.norm()).item()
            print(f"L {L} {n:22} rel. difference from FLA {err:.2e}")
        print(f"L {L} " + peer_line(medians(fns, reps=10, inner=5), "fla"), flush=True)


if __name__ == "__main__":
    main()
