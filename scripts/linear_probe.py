"""Probe linear-attention variants on the GPU (consumer warpgroups, blocks
per SM): correctness against the library's kernel of the same (F, DV,
decay), then time interleaved with it and with FLA's kernel of the same
semantics (chunk_simple_gla, chunk_linear_attn). `tkc build
scripts/linear_probe.py` first."""

from tkc.kernels.linear_attention import linear_attention

VARIANTS = [dict(F=128, DV=128, decay=True, stages=3),
            dict(F=128, DV=64, decay=True, consumers=1, blocks_per_sm=2)]
KERNELS = [linear_attention(**v) for v in VARIANTS]


def main():
    import torch

    import tkc
    from tkc.bench.timing import medians
    from fla.ops.linear_attn import chunk_linear_attn
    from fla.ops.simple_gla import chunk_simple_gla
    t = lambda x: x.transpose(1, 2).contiguous()  # noqa: E731
    for v_, kern in zip(VARIANTS, KERNELS):
        F, DV, decay = v_["F"], v_["DV"], v_["decay"]
        for L in (1024, 4096):
            q, k = (torch.randn(16, 16, L, F, device="cuda").mul(0.3).bfloat16() for _ in range(2))
            v = torch.randn(16, 16, L, DV, device="cuda").bfloat16()
            g = -torch.rand(16, 16, L, device="cuda") * 0.05 if decay else None
            ref = tkc.linear_attention(q, k, v, g=g).float()
            o = torch.empty_like(v)
            args = (q, k, v, *((g.unsqueeze(2),) if decay else ()), o, F ** -0.5)
            kern(*args)
            err = ((o.float() - ref).norm() / ref.norm()).item()
            fq, fk, fv = t(q), t(k), t(v)
            fg = t(g) if decay else None
            peer = (lambda: chunk_simple_gla(fq, fk, fv, g=fg)) if decay else \
                (lambda: chunk_linear_attn(fq, fk, fv, normalize=False))
            med = medians({"lib": lambda: tkc.linear_attention(q, k, v, g=g), "probe": lambda: kern(*args),
                           "fla": peer}, reps=10, inner=5)
            print(f"{kern.name:34} L{L} err {err:.1e}  lib {med['lib']:.3f}  probe {med['probe']:.3f}  "
                  f"fla {med['fla']:.3f}  fla/probe {med['fla'] / med['probe']:.2f}", flush=True)


if __name__ == "__main__":
    main()
