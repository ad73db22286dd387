"""tkc.bench.timing's bookkeeping on the CPU (`bench` itself needs a GPU: its
per-call times are stubbed here): rounds interleave the contenders, and the
probes' medians and peer lines come from them."""
from tkc.bench import timing


def _stub(monkeypatch, times):
    """bench(fn) returns the next of times[fn's name], in call order."""
    calls = []
    seqs = {name: iter(ts) for name, ts in times.items()}
    monkeypatch.setattr(timing, "bench", lambda fn, **kw: (calls.append(fn()), next(seqs[fn()]))[1])
    return calls


def test_rounds_interleave(monkeypatch):
    calls = _stub(monkeypatch, {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]})
    ms = timing.interleaved({"a": lambda: "a", "b": lambda: "b"}, rounds=3)
    assert calls == ["a", "b"] * 3
    assert ms == {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]}


def test_medians_and_peer_line(monkeypatch):
    _stub(monkeypatch, {"tkc": [1.0, 9.0, 2.0], "fla": [4.0, 4.0, 6.0]})
    med = timing.medians({"tkc": lambda: "tkc", "fla": lambda: "fla"}, rounds=3, reps=1)
    assert med == {"tkc": 2.0, "fla": 4.0}
    assert timing.peer_line(med, "fla") == "tkc 2.000 ms (fla/x 2.00)  fla 4.000 ms (fla/x 1.00)"
    assert timing.median_ratio([4.0, 4.0, 6.0], [1.0, 9.0, 2.0]) == 3.0


def test_tflops_lines():
    """The peer's TFLOP/s, then each contender's and its median per-round ratio."""
    times = {"tkc": [1.0, 4.0, 1.5], "cudnn": [2.0, 2.0, 3.0]}   # ms; ratios 2, 0.5, 2
    peer, tkc = timing.tflops_lines(times, "cudnn", 6e9)
    assert peer.split() == ["cudnn", "3", "TF/s"]
    assert tkc.split() == ["tkc", "4", "TF/s", "(2.000x", "cudnn)"]
