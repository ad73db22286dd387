"""What the benchmarks of one tkc op against one peer share (bench/fftconv.py,
bench/linear_attention.py): their arguments, the GPU check, each row checked
for agreement before it is timed interleaved with the peer, the rows as JSON."""
from __future__ import annotations

import argparse
import json

ROUNDS = 5
TIMING = dict(reps=10, inner=5)
AGREE = 3e-2        # the largest relative difference from the peer that is timed


def arguments(what: str, argv=None):
    """The parsed --out FILE.json / --quick, or None (said on stdout) without a CUDA GPU."""
    ap = argparse.ArgumentParser(description=f"{what}: tkc next to its peer")
    ap.add_argument("--out", help="the rows as JSON")
    ap.add_argument("--quick", action="store_true", help="the first rows only")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print(f"{what} benchmark: no CUDA GPU here, nothing measured")
        return None
    return args


def rel_err(x, ref) -> float:
    """||x - ref|| / ||ref|| in float64 (tensors, gradients or not)."""
    x, ref = x.detach().double(), ref.detach().double()
    return float((x - ref).norm() / ref.norm())


def heading(columns: str) -> str:
    import torch
    return f"{columns}  (median of {ROUNDS} rounds, interleaved; {torch.cuda.get_device_name()})"


def timed(row: str, mine, peer, err: float, other: str):
    """against(mine, peer) (timing.Pair) when tkc's output is within AGREE of
    `other`'s (err); else a line saying so, and None."""
    if not err <= AGREE:
        print(f"{row}: tkc disagrees with {other} (rel. error {err:.3g}); not timed")
        return None
    from .timing import against
    return against(mine, peer, rounds=ROUNDS, **TIMING)


def save(path: str | None, rows: list) -> None:
    if path:
        import torch
        with open(path, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), f, indent=1)
