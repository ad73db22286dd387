"""Random calls of tkc's torch ops, written as a model author writes them
(`tkc fuzz --ops`; docs/fuzz.md, "Ops").

A case is Python source text, a pure function of (seed, index) through a
string-seeded random.Random: it builds the op's inputs (`rnd`: bf16 on the
device, or a leaf wanting a gradient, and the views models make: a weight
used transposed, FlashAttention's [B, L, H, D] memory seen as [B, H, L, D])
and calls one op into `out`. Shapes are drawn around each op's documented
domain and on both sides of its edges (zero sizes, one row, ragged lengths,
K and N off multiples of 8, an unsupported head dim or norm width, a weight
of the wrong size):

- a case inside the domain (`valid`) must be served and match the reference
  (ops_run.py: PyTorch in float64 on the same device), its output and, where
  `grads` names inputs, their gradients;
- a case outside it may be served (then it must match too) or refused by a
  TkcError located at the case's own line; anything else (another exception,
  a fault, a wrong answer) is a failure.

Work per case is capped (the float64 reference included) so that a GPU runs
thousands of cases in a few minutes. Here: the op drawn, then the inputs
dressed as models make them; ops_draw.py draws each op's call, ops_case.py
holds a case and the draw of its dims.
"""
from __future__ import annotations

import random
import re

from .ops_case import Case
from .ops_draw import DRAWS

OPS = ("matmul", "linear", "swiglu", "attention", "decode", "varlen", "layer_norm", "rms_norm", "rotary",
       "scaled_mm", "quantize_fp8", "fftconv", "linear_attention", "attention_fp8", "based", "grouped_scaled_mm",
       "hedgehog")
FORWARD_ONLY = ("quantize_fp8", "fftconv", "linear_attention", "based", "hedgehog")   # (no backward: they
WANTS_GRAD = 0.04   # refuse a call whose input wants a gradient; this share of their cases makes one)


def generate(seed: int, index: int) -> Case:
    """Case `index` of `seed`: the op drawn first, then its shapes."""
    r = random.Random(f"tkc-fuzz-ops:{seed}:{index}")
    op = r.choice(OPS)
    case = Case(seed, index, op, {}, (), [])
    DRAWS[op](r, case)
    if op in FORWARD_ONLY and r.random() < WANTS_GRAD:
        case.lines[0] = case.lines[0].replace(")", ", grad=True)", 1)
        case.valid = False
    if op not in ("scaled_mm", "quantize_fp8", "attention_fp8", "grouped_scaled_mm"):
        _dress(r, case)
    if r.random() < MISMATCH:
        _mismatch(r, case)
    source = case.source()
    if case.valid and "captured(" not in source and "autocast" not in source and r.random() < COMPILED:
        case.lines = [f"out = compiled(lambda: {line[6:]})" if line.startswith("out = ") else line
                      for line in case.lines]   # (inside the domain: dynamo wraps a refusal's TkcError)
    return case


COMPILED = 0.03                        # the share of calls made through torch.compile(fullgraph=True)


MISMATCH = 0.06                        # the share of cases with one input's dim off by one
MADE = re.compile(r"^\w+ = \(?(rnd|torch\.randn|torch\.rand|torch\.tensor)\(")
DIM = re.compile(r"(?<![\w.=])(\d+)(?![\w.])")


def _mismatch(r: random.Random, c: Case) -> None:
    """One input made with a dim one larger (or a cu_seqlens entry one off)
    than the others agree on, past the first: outside the domain (an op may
    serve it only where the shapes still make sense, e.g. a free M)."""
    made = [i for i, line in enumerate(c.lines) if MADE.match(line)][1:]
    if not made:
        return
    i = r.choice(made)
    head, _, tail = c.lines[i].partition("(")
    kw = re.search(r"\b(?:grad|scale|off|dtype|device)=", tail)
    args, keywords = (tail[:kw.start()], tail[kw.start():]) if kw else (tail, "")
    dims = list(DIM.finditer(args))
    if not dims:
        return
    d = r.choice(dims)
    c.lines[i] = f"{head}({args[:d.start()]}{int(d[1]) + 1}{args[d.end():]}{keywords}"
    c.valid = False


RND = re.compile(r"rnd\(([^()]*)\)")


def _dress(r: random.Random, c: Case) -> None:
    """Inputs and calls as models also make them: now and then an input a view
    of rows padded by 8 elements whose start is off 16 bytes (TMA cannot read
    it: the op must copy it); the whole call in float32 under torch.autocast
    to bf16 (AMP: served) or in float16 (refused: the kernels are bf16); an
    input in host memory (refused on the GPU); the case run twice (ops_run.py);
    the call captured into a CUDA graph."""
    u = r.random()
    mode = "amp" if u < 0.08 else "f16" if u < 0.11 else ""
    host = r.random() < 0.03   # one input left in host memory: refused (on the GPU)

    def dressed(m):
        nonlocal host
        extra = [f"off={r.choice((1, 3, 8))}"] if r.random() < 0.15 else []
        extra += [f"dtype=torch.{'float32' if mode == 'amp' else 'float16'}"] if mode else []
        call = f"rnd({', '.join([m[1], *extra])})"
        if host:
            call, host, c.valid = call + ".cpu()", False, False
        return call
    c.lines = [RND.sub(dressed, line) for line in c.lines]
    if mode == "amp":
        c.lines = [f"with torch.autocast(DEVICE, dtype=torch.bfloat16):\n    {line}" if line.startswith("out = ")
                   else line for line in c.lines]
    c.valid = c.valid and mode != "f16"
    # the same call twice, on new tensors of the same shapes (the second through the op's
    # kept plan: its pointers read anew), or captured into a CUDA graph and replayed
    c.params["twice"] = r.random() < 0.25
    if not c.grads and not mode and r.random() < 0.1:
        c.lines = [f"out = captured(lambda: {line[6:]})" if line.startswith("out = ") else line
                   for line in c.lines]
