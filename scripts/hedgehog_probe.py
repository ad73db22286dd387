"""Probe Hedgehog variants on the GPU (setmaxnreg split here; edit VARIANTS
to try others): each checked against the library's kernel, then all timed
interleaved with it and with FLA's chunk_linear_attn of the same size (the
benchmark's peer). `tkc build scripts/hedgehog_probe.py` first (the
variants are KERNELS); FLA on PYTHONPATH (scripts/gpu.sh's fla_path)."""
from tkc.kernels.hedgehog import hedgehog

VARIANTS = [dict(registers=(24, 240))]
KERNELS = [hedgehog(**v) for v in VARIANTS]


def main():
    import torch

    import tkc
    from bench.linear_attention import hedgehog_args
    from tkc.bench.timing import medians, peer_line
    from fla.ops.linear_attn import chunk_linear_attn
    for L in (1024, 4096):
        q, k, v = (torch.randn(16, 16, L, 128, device="cuda").bfloat16() * 0.3 for _ in range(3))
        maps = hedgehog_args(16, 128)
        ref = tkc.hedgehog(q, k, v, *maps).float()
        fns = {"lib": lambda: tkc.hedgehog(q, k, v, *maps)}
        for kern in KERNELS:
            o = torch.empty_like(v)
            fns[kern.name] = (lambda kern=kern, o=o: kern(q, k, v, *maps, o, 128 ** -0.5))
            fns[kern.name]()
            print(f"L {L} {kern.name:28} rel. difference from the library's "
                  f"{((o.float() - ref).norm() / ref.norm()).item():.1e}")
        qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        fns["fla"] = lambda: chunk_linear_attn(qt, kt, vt, normalize=False)
        print(f"L {L} " + peer_line(medians(fns, reps=10, inner=5), "fla"), flush=True)


if __name__ == "__main__":
    main()
