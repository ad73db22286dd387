"""Can the attention backward's bandwidth steps (statistics + dQ's zeroing
before the main kernel, dQ's conversion after it) run beside another chunk's
main kernel? tkc.attention's backward launches alone, as CUDA-graph replays
interleaved in rounds (bhld, B * L = 16k tokens, H 16), split into chunks of
the batch in several arrangements:

    python3 scripts/attention_bwd_streams.py [L ...]     (tkc build it first)

serial   prep, main, convert (tkc.attention today)
chunkN   the same per chunk of B / N batches, one stream
sideN    main kernels on the current stream; prep of chunk i + 1 and the
         conversion of chunk i on a side stream of high priority, so their
         blocks take the SMs the main kernel's blocks free
sideNlo  the same with a side stream of default priority
Prints median ms and serial's time over each."""
import statistics
import sys

import torch

from tkc.bench.timing import interleaved, median_ratio
from tkc.kernels.attention_bwd import attention_kernels, backward_kernels, stats_columns

KERNELS = [k for D in (64, 128) for c in (False, True) for k in attention_kernels(D, c, "bhld")]
ROUNDS = 5


def row(L, D, causal):
    B, H = 16384 // L, 16
    q, k, v, do, o = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(5))
    lse = torch.randn(B, H, 1, L, device="cuda").abs() + 5
    prep, main = backward_kernels(D, causal, "bhld", L)
    stats = torch.empty(B, H, 2, stats_columns(L), device="cuda")
    dq = torch.empty(B, H, L, D, device="cuda")
    dk, dv, dq16 = torch.empty_like(k), torch.empty_like(v), torch.empty_like(q)
    hi, lo = torch.cuda.Stream(priority=-1), torch.cuda.Stream(priority=0)

    def P(s):
        prep(o[s], do[s], lse[s], stats[s], dq[s])

    def M(s):
        main(q[s], k[s], v[s], do[s], stats[s], dq[s], dk[s], dv[s], 0.1)

    def C(s):
        dq16[s].copy_(dq[s])

    def chunks(n):
        return [slice(i * B // n, (i + 1) * B // n) for i in range(n)]

    def serial():
        s = slice(None)
        P(s), M(s), C(s)

    def chunked(n):
        for s in chunks(n):
            P(s), M(s), C(s)

    def side(n, stream):
        cur, cs = torch.cuda.current_stream(), chunks(n)
        stream.wait_stream(cur)
        P(cs[0])
        prepped = torch.cuda.Event()
        prepped.record()
        for i, s in enumerate(cs):
            cur.wait_event(prepped)
            M(s)
            mained = torch.cuda.Event()
            mained.record()
            with torch.cuda.stream(stream):
                if i + 1 < n:
                    P(cs[i + 1])
                    prepped = torch.cuda.Event()
                    prepped.record()
                stream.wait_event(mained)
                C(s)
        cur.wait_stream(stream)

    ways = {"serial": serial}
    for n in (2, 4):
        if B >= n:
            ways[f"chunk{n}"] = lambda n=n: chunked(n)
            ways[f"side{n}"] = lambda n=n: side(n, hi)
            ways[f"side{n}lo"] = lambda n=n: side(n, lo)
    ref = None
    for w, fn in ways.items():
        dq16.zero_(), dk.zero_(), dv.zero_()
        fn()
        torch.cuda.synchronize()
        out = torch.cat([dq16.flatten(), dk.flatten(), dv.flatten()]).float()
        if ref is None:
            ref = out
        else:   # dQ's adds land in any order: bf16 apart
            assert float((out - ref).norm() / ref.norm()) < 5e-3, w
    times = interleaved(ways, rounds=ROUNDS, reps=10, inner=5)
    ms = "  ".join(f"{w} {statistics.median(t):.3f}" for w, t in times.items())
    ratios = "  ".join(f"{w} {median_ratio(times['serial'], t):.3f}" for w, t in times.items() if w != "serial")
    print(f"D{D} {'causal' if causal else 'full  '} L{L:<6} {ms} ms\n    serial/x: {ratios}", flush=True)


def main(argv):
    for L in [int(a) for a in argv] or [1024, 4096]:
        for D in (64, 128):
            for causal in (False, True):
                row(L, D, causal)


if __name__ == "__main__":
    main(sys.argv[1:])
