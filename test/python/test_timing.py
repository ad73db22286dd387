"""tkc.bench.timing's bookkeeping on the CPU (`bench` itself needs a GPU: its
per-call times are stubbed here): rounds interleave the contenders, and the
probes' medians and peer lines come from them; and how the sanitizer run
(tkc.bench.sanitize) takes its steps."""
from tkc.bench import timing


def _stub(monkeypatch, times):
    """bench(fn) returns the next of times[fn's name], in call order."""
    calls = []
    seqs = {name: iter(ts) for name, ts in times.items()}
    monkeypatch.setattr(timing, "bench", lambda fn, **kw: (calls.append(fn()), next(seqs[fn()]))[1])
    return calls


def test_rounds_interleave(monkeypatch):
    """Every round times each contender once, the odd rounds in reverse
    order, so neither is always timed right after the other."""
    calls = _stub(monkeypatch, {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0], "c": [7.0, 8.0, 9.0]})
    ms = timing.interleaved({"a": lambda: "a", "b": lambda: "b", "c": lambda: "c"}, rounds=3)
    assert calls == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert ms == {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0], "c": [7.0, 8.0, 9.0]}


def test_a_wake_is_shared(monkeypatch):
    """A timer that charges whoever runs right after "peer" 5% (what the H200
    showed after cuDNN): in a fixed order tkc would pay it in every round but
    the first; reversing odd rounds has it pay in half of them, as few as two
    contenders timed in turn allow, so the median ratio's bias is halved."""
    last = [None]

    def timer(fn):
        name = fn()
        t = 1.05 if last[0] == "peer" and name != "peer" else 1.0
        last[0] = name
        return t
    ms = timing.interleaved({"tkc": lambda: "tkc", "peer": lambda: "peer"}, rounds=6, timer=timer)
    assert [t > 1.0 for t in ms["tkc"]] == [False, True, False, True, False, True]
    assert ms["peer"] == [1.0] * 6
    assert abs(timing.median_ratio(ms["peer"], ms["tkc"]) - (1 + 1 / 1.05) / 2) < 1e-9


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


def test_sanitize_steps_take_head_dims(monkeypatch):
    """`python -m tkc.bench.sanitize attention_picks:128,256 gemm`: each step
    by name, an attention step with the head dims after its colon (a
    sanitizer's run split into parts that fit its time)."""
    from tkc.bench import sanitize
    calls = []
    monkeypatch.setitem(sanitize.STEPS, "attention_picks", lambda *a: calls.append(("picks", *a)))
    monkeypatch.setitem(sanitize.STEPS, "gemm", lambda *a: calls.append(("gemm", *a)))
    assert sanitize.main(["attention_picks:128,256", "gemm"]) == 0
    assert calls == [("picks", (128, 256)), ("gemm",)]
