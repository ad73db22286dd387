"""`tkc fuzz --ops` (tkc/fuzz/ops.py, docs/fuzz.md "Ops"): the cases are a pure
function of (seed, index) and cover every op, inside and outside its domain;
300 of them run on the CPU through the fake driver, each served or refused at
its own line; the checker itself fails a wrong answer, an unlocated refusal and
a refusal of a valid call; and the op bugs the fuzzer found stay fixed (their
values: test/gpu/test_torchops_gpu.py)."""
from __future__ import annotations

import argparse

import pytest

torch = pytest.importorskip("torch")

import tkc  # noqa: E402
from tkc.bench.fake_driver import fake_driver  # noqa: E402
from tkc.diagnostics import TkcError  # noqa: E402
from tkc.fuzz import ops_run  # noqa: E402
from tkc.fuzz.ops import OPS, Case, generate  # noqa: E402

BF = torch.bfloat16


def test_cases_are_reproducible_and_cover_every_op():
    cases = [generate(7, i) for i in range(600)]
    assert [c.source() for c in cases[:50]] == [generate(7, i).source() for i in range(50)]
    assert {c.op for c in cases} == set(OPS)
    assert {c.op for c in cases if not c.valid} >= set(OPS) - {"decode"}
    text = "".join(c.source() for c in cases)
    for view in ("off=", ".transpose(", "torch.autocast", "dtype=torch.float16", "grad=True", ".cpu()",
                 "captured(", "compiled("):
        assert view in text
    for c in cases:
        compile(c.source(), c.name, "exec")   # each one Python


def test_forward_only_ops_are_called_wanting_a_gradient_and_refuse():
    """Now and then a forward-only op's first input wants a gradient: outside
    the domain, so the case passes only where the op refuses it at its line."""
    from tkc.fuzz.ops import FORWARD_ONLY
    cases = [c for c in (generate(9, i) for i in range(3000))
             if c.op in FORWARD_ONLY and "grad=True" in c.lines[0]]
    assert {c.op for c in cases} == set(FORWARD_ONLY) and not any(c.valid for c in cases)
    with fake_driver():
        for c in cases[:8]:
            assert ops_run._fake_case(c, "cpu") == ("refused", ""), c.source()


def test_300_cases_on_the_fake_driver(capsys):
    args = argparse.Namespace(seed=20261, start=0, count=300, fake=True)
    assert ops_run.run_ops(args) == 0, capsys.readouterr().out[-3000:]
    summary = capsys.readouterr().out
    assert "0 failures" in summary and "served" in summary and "refused" in summary


def _case(lines, op="matmul", valid=True, grads=()):
    return Case(1, 2, op, {}, ("a", "b"), lines, valid, grads)


def test_the_checker_fails_wrong_answers_and_stray_refusals(monkeypatch):
    """run_case on the CPU with tkc.matmul swapped for torch's: right, off
    by a little, raising an unlocated TkcError or any other exception."""
    lines = ["a = rnd(40, 24, grad=True)", "b = rnd(24, 16, grad=True)", "out = tkc.matmul(a, b)"]
    monkeypatch.setattr(tkc, "matmul", lambda a, b: a @ b)
    assert ops_run.run_case(_case(lines, grads=("a", "b")), "cpu") == ("served", "")
    monkeypatch.setattr(tkc, "matmul", lambda a, b: (a @ b) * 1.05)
    outcome, report = ops_run.run_case(_case(lines), "cpu")
    assert outcome == "failed" and "off the reference" in report
    monkeypatch.setattr(tkc, "matmul", lambda a, b: a.detach() @ b)   # no gradient reaches a
    outcome, report = ops_run.run_case(_case(lines, grads=("a", "b")), "cpu")
    assert outcome == "failed" and "gradient of a" in report

    def refuse(where):
        def op(a, b):
            raise TkcError("no", where)
        return op
    monkeypatch.setattr(tkc, "matmul", refuse("elsewhere.py:3"))
    assert ops_run.run_case(_case(lines, valid=False), "cpu")[0] == "failed"
    monkeypatch.setattr(tkc, "matmul", refuse("<tkc-fuzz-ops 1:2>:3"))
    assert ops_run.run_case(_case(lines, valid=False), "cpu") == ("refused", "")
    assert "documented domain" in ops_run.run_case(_case(lines), "cpu")[1]
    monkeypatch.setattr(tkc, "matmul", lambda a, b: a[:, 99])
    assert "IndexError" in ops_run.run_case(_case(lines), "cpu")[1]


def test_a_reference_of_zero_is_compared_absolutely():
    """A gradient that cancels exactly (one key: softmax is 1) against the
    kernel's rounding: below the floor, not an error of 1e6."""
    ref = torch.zeros(4, 96, dtype=torch.float64)
    assert ops_run._rel(ref + 1e-7, ref) < 1e-3
    assert ops_run._rel(ref + 1e-1, ref) > 1
    assert ops_run._rel(torch.tensor([float("inf"), 1.0]), torch.tensor([float("inf"), 1.0])) == 0.0
    assert ops_run._rel(torch.tensor([float("nan"), 1.0]), torch.tensor([float("inf"), 1.0])) == float("inf")
    assert ops_run._rel(torch.zeros(3), torch.zeros(2)) == float("inf")


def test_the_varlen_reference_reads_the_lengths_the_offsets_hold():
    """An off-by-one case changes a cu_seqlens entry in the source: the
    reference takes each sequence's lengths from the offsets the op got (it
    read its stale parameters once, and failed a right answer on the GPU),
    and cannot compute offsets that do not partition the tokens."""
    from tkc.fuzz.ops_ref import reference
    case = Case(0, 0, "varlen", {"causal": False}, ("q", "k", "v", "cq", "ck"), [])
    q, k, v = (torch.randn(9, 2, 64, dtype=torch.float64) for _ in range(3))
    args = {"q": q, "k": k, "v": v, "cq": torch.tensor([0, 4, 9], dtype=torch.int32),
            "ck": torch.tensor([0, 5, 9], dtype=torch.int32)}
    out, = reference(case, args)
    first = torch.softmax(q[:4].transpose(0, 1) @ k[:5].permute(1, 2, 0) / 8, -1) @ v[:5].transpose(0, 1)
    torch.testing.assert_close(out[:4], first.transpose(0, 1))
    with pytest.raises(ValueError, match="partition"):
        reference(case, {**args, "ck": torch.tensor([0, 5, 10], dtype=torch.int32)})


# ---------------------------------------------------------------- what the fuzzer found


def _served(fn):
    """fn's op calls run to their (stub) launches without a TkcError."""
    with fake_driver():
        return fn()


def test_a_transposed_operand_of_odd_rows_is_copied():
    """tkc.matmul(a.t(), ...) of an odd M: a's stored rows are M long, not
    whole 16-byte units; it was refused (seed 1 case 53), now copied; so is
    the backward's A^T of such an a."""
    def call():
        a = torch.randn(1016, 2, dtype=BF, requires_grad=True).t()
        b = torch.randn(248, 1016, dtype=BF, requires_grad=True).t()
        out = tkc.matmul(a, b)
        torch.autograd.grad(out, (a, b), torch.ones_like(out))
        return out.shape
    assert _served(call) == (2, 248)


@pytest.mark.parametrize("a,b", [((2, 3, 0, 1280), (2, 3, 1280, 32)), ((2, 3, 5, 0), (2, 3, 0, 32)),
                                 ((3, 0, 16), (16, 8))])
def test_a_batched_product_with_nothing_in_it(a, b):
    """A batch of empty products (seed 1 case 1227: reshape(-1) of no elements)."""
    A, B = torch.randn(*a, dtype=BF, requires_grad=True), torch.randn(*b, dtype=BF)
    out = _served(lambda: tkc.matmul(A, B))
    assert out.shape == (A.float() @ B.float()).shape and out.requires_grad


def test_operands_off_a_16_byte_boundary_are_copied():
    """A contiguous tensor that starts mid-unit (a slice of a row; a one-row
    view): each op copies it where it refused it (seeds 1, 3, 4, 5)."""
    def off(*shape):
        return torch.randn(*shape[:-1], shape[-1] + 8, dtype=BF)[..., 1:1 + shape[-1]]
    calls = [lambda: tkc.matmul(off(1, 64)[0:1], torch.randn(64, 32, dtype=BF)),
             lambda: tkc.linear(torch.randn(4, 64, dtype=BF), torch.randn(32, 64, dtype=BF), off(32)),
             lambda: tkc.swiglu(off(1, 64), torch.randn(32, 64, dtype=BF), torch.randn(32, 64, dtype=BF)),
             lambda: tkc.layer_norm(off(1, 1024), torch.ones(1024), torch.zeros(1024)),
             lambda: tkc.attention(torch.randn(1, 1, 1, 64, dtype=BF), torch.randn(1, 1, 1, 64, dtype=BF),
                                   off(1, 1, 1, 64), causal=True),
             lambda: tkc.rotary_embedding(off(1, 1, 1, 64), torch.ones(1, 32), torch.zeros(1, 32)),
             lambda: tkc.linear_attention(off(1, 1, 1, 64), torch.randn(1, 1, 1, 64, dtype=BF),
                                          torch.randn(1, 1, 1, 64, dtype=BF))]
    for call in calls:
        assert off(1, 64).data_ptr() % 16 and _served(call) is not None


def test_a_compiled_graph_hands_such_operands_as_they_are():
    """Under torch.compile the custom op's impl gets the graph's tensors as
    they are (a view of an input off a 16-byte boundary included) and makes
    them dense itself."""
    x, w, buf = torch.randn(4, 64, dtype=BF), torch.randn(32, 64, dtype=BF), torch.randn(40, dtype=BF)
    rows = torch.randn(1, 1032, dtype=BF)
    with fake_driver():
        lin = torch.compile(lambda x, w, b: tkc.linear(x, w, b), fullgraph=True)
        assert lin(x, w, buf[1:33]).shape == (4, 32)
        ln = torch.compile(lambda a: tkc.layer_norm(a, torch.ones(1024), torch.zeros(1024)), fullgraph=True)
        assert ln(rows[:, 1:1025]).shape == (1, 1024)


def test_attention_gradients_are_held_to_pytorchs_own(monkeypatch):
    """An attention case's gradients pass within twice PyTorch's bf16 SDPA's
    error (ops_run.peer_grads): SDPA itself passes; SDPA's with its dq's
    error grown past that fails."""
    import torch.nn.functional as F

    def sdpa(q, k, v, causal=False, scale=None, return_lse=False):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)

    class Off(torch.autograd.Function):   # the forward as is, dq's error grown
        @staticmethod
        def forward(ctx, q):
            return q.view_as(q)

        @staticmethod
        def backward(ctx, g):
            return g * (1 + 0.3 * torch.randn_like(g))
    lines = ["q = rnd(2, 4, 33, 64, grad=True)", "k = rnd(2, 2, 33, 64, grad=True)", "v = rnd(2, 2, 33, 64, grad=True)",
             "out = tkc.attention(q, k, v, causal=True, scale=None, return_lse=False)"]
    case = Case(1, 2, "attention", {"causal": True, "scale": None, "lse": False}, ("q", "k", "v"), lines, True,
                ("q", "k", "v"))
    monkeypatch.setattr(tkc, "attention", sdpa)
    assert ops_run.run_case(case, "cpu") == ("served", "")
    monkeypatch.setattr(tkc, "attention", lambda q, k, v, **kw: sdpa(Off.apply(q), k, v, **kw))
    outcome, report = ops_run.run_case(case, "cpu")
    assert outcome == "failed" and "gradient of q" in report and "PyTorch's in bf16" in report


def test_the_attention_bound_covers_causal_rows_that_see_no_key(monkeypatch):
    """Causal with more queries than keys (seed 128 case 65 on the H200: Lq
    12, Lk 2, D 96, dq 3.9% off float64): the first Lq - Lk rows see no key
    and SDPA gives them NaN, so PyTorch's bound runs on the rows that see one,
    the others' dq 0; an op with tkc's semantics (those rows' o is 0) passes."""
    import torch.nn.functional as F

    def op(q, k, v, causal=False, scale=None, return_lse=False):
        cut = q.shape[-2] - k.shape[-2]
        o = F.scaled_dot_product_attention(q[..., cut:, :], k, v, is_causal=True, scale=scale, enable_gqa=True)
        return torch.cat([o.new_zeros(*o.shape[:-2], cut, o.shape[-1]), o], -2)
    lines = ["q = rnd(2, 1, 12, 96, grad=True)", "k = rnd(2, 1, 2, 96, grad=True)", "v = rnd(2, 1, 2, 96, grad=True)",
             "out = tkc.attention(q, k, v, causal=True, scale=0.126, return_lse=False)"]
    case = Case(128, 65, "attention", {"causal": True, "scale": 0.126, "lse": False}, ("q", "k", "v"), lines, True,
                ("q", "k", "v"))
    q, k, v = torch.randn(2, 1, 12, 96), torch.randn(2, 1, 2, 96), torch.randn(2, 1, 2, 96)
    dq, dk, dv = ops_run.peer_grads(case, {"q": q, "k": k, "v": v}, torch.randn(2, 1, 12, 96, dtype=BF))
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert not dq[..., :10, :].any() and dq[..., 10:, :].abs().sum() > 0 and dk.isfinite().all()
    monkeypatch.setattr(tkc, "attention", op)
    assert ops_run.run_case(case, "cpu") == ("served", "")


def test_batch_dims_that_do_not_broadcast_are_refused_at_the_call():
    """(seed 18 case 1197: torch's RuntimeError from broadcast_shapes)."""
    a, b = torch.randn(2, 3, 101, 16, dtype=BF), torch.randn(2, 4, 16, 1016, dtype=BF)
    with pytest.raises(TkcError, match=r"test_fuzz_ops.py:\d+.*batch dims must broadcast"):
        _served(lambda: tkc.matmul(a, b))


def test_the_fake_run_checks_shapes_against_the_reference(monkeypatch):
    """--fake has no values, but the reference's shapes (from meta tensors):
    an op returning another shape, or serving a call the reference cannot
    compute, fails."""
    lines = ["a = rnd(40, 24)", "b = rnd(24, 16)", "out = tkc.matmul(a, b)"]
    with fake_driver():
        monkeypatch.setattr(tkc, "matmul", lambda a, b: a @ b)
        assert ops_run._fake_case(_case(lines), "cpu") == ("served", "")
        monkeypatch.setattr(tkc, "matmul", lambda a, b: (a @ b)[:, :8])
        assert "returned shapes" in ops_run._fake_case(_case(lines), "cpu")[1]
        monkeypatch.setattr(tkc, "matmul", lambda a, b: a)
        bad = ["a = rnd(40, 24)", "b = rnd(25, 16)", "out = tkc.matmul(a, b)"]
        assert "cannot compute" in ops_run._fake_case(_case(bad, valid=False), "cpu")[1]


def test_an_empty_grouped_call_takes_its_scales_however_made():
    """grouped_scaled_mm with no rows: scale_a [0, K/128] as torch.rand(K/128, 0).t()
    makes it (strides (1, K/128)) was refused for not having strides (1, 0) (seed 22)."""
    e4m3 = torch.float8_e4m3fn
    b = torch.randn(3, 280, 768).to(e4m3).transpose(1, 2)
    sb = (torch.rand(3, 3, 6) + 0.1).transpose(1, 2)
    a, sa = torch.randn(0, 768).to(e4m3), torch.rand(6, 0).t()
    assert _served(lambda: tkc.grouped_scaled_mm(a, b, sa, sb, torch.zeros(0, dtype=torch.int32))).shape == (0, 280)
