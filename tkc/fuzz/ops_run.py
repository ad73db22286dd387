"""`tkc fuzz --ops`: run ops.py's cases and check each against PyTorch.

    tkc fuzz --ops --seed S --count N [--start I]          on a GPU
    tkc fuzz --ops --fake --seed S --count N               on a CPU, through the fake driver
                                                           (tkc.bench.fake_driver: checks,
                                                           refusals and plumbing; no values)

A case runs as its own source (compiled under its name, so a TkcError's
location names the case's line; `twice`: run again on new tensors of the
same shapes, the checks reading the second run's). Its outcome:

- served: the output (and prenorm's h, return_lse's lse) within the dtype's
  tolerance of the float64 reference, and each gradient `grads` names
  (torch.autograd.grad at the op's arguments, views included) within its own;
  the call on meta copies of its tensors gives outputs of the same shapes;
- refused: a TkcError located at the case's line, and only outside the
  documented domain;
- anything else fails: the report is the case's source, ready to paste.

A CUDA fault leaves the context unusable, so the run stops at the first one.
"""
from __future__ import annotations

import contextlib
import math
import time
import traceback
from collections import Counter

from .ops_ref import reference

FLOOR = 4e-3   # the RMS below which a reference counts as zero (~a bf16 ulp of a unit value: a
#                gradient that cancels, one key's dq, is the kernel's rounding there)


def _namespace(device: str, seed: int) -> dict:
    import torch

    import tkc
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)

    def rnd(*shape, grad=False, scale=1.0, off=0, dtype=torch.bfloat16):
        """randn * scale as dtype; off: a view at element `off` of rows 8 longer."""
        pad = 8 if off else 0
        x = (torch.randn(*shape[:-1], shape[-1] + pad, device=device, generator=gen) * scale).to(dtype)
        x = x.requires_grad_(grad)
        return x[..., off:off + shape[-1]] if off else x
    ns = {"torch": torch, "tkc": tkc, "rnd": rnd, "DEVICE": device}

    def captured(call):
        """call() captured into a CUDA graph (after two calls off the capture,
        as a model warms up), replayed: its output (the fake driver: call())."""
        if device != "cuda":
            return call()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            call(), call()
        torch.cuda.current_stream().wait_stream(side)
        ns["graph"] = graph = torch.cuda.CUDAGraph()   # (kept: its pool holds the output)
        with torch.cuda.graph(graph):
            out = call()
        graph.replay()
        return out
    ns["captured"] = captured
    def compiled(call):
        """call() through torch.compile. Dynamo's state is reset first: torch
        2.11 compiles every lambda through one wrapper frame, whose guard on
        the lambda's code made a run's ninth compiled case a recompile past
        its limit (8)."""
        torch._dynamo.reset()
        return torch.compile(call, fullgraph=True, dynamic=False)()
    ns["compiled"] = compiled
    return ns


def _rel(x, ref) -> float:
    import torch
    if x.shape != ref.shape:
        return math.inf
    if ref.numel() == 0:
        return 0.0
    x, ref = x.double(), ref.double()
    care = ~torch.isnan(ref)   # a NaN in the reference: a value the op leaves unwritten, not compared
    x, ref = x[care], ref[care]
    finite = torch.isfinite(ref)
    if not torch.equal(finite, torch.isfinite(x)) or not torch.equal(x[~finite], ref[~finite]):
        return math.inf
    x, ref = x[finite], ref[finite]
    return float((x - ref).norm() / max(float(ref.norm()), FLOOR * ref.numel() ** 0.5)) if ref.numel() else 0.0


def _free(ns: dict) -> None:
    """The case's tensors and graph dropped now (its functions' globals make
    the namespace a cycle, which a collection might free inside another
    case's capture); the dunder entries (torch.compile's, its compiled
    functions and builtins) stay for its own cleanup, which deletes them."""
    for name in [n for n in ns if not n.startswith("__")]:
        del ns[name]


def _call(case, device: str):
    """Run the case's source: ('refused' | 'failed', report, None), or (None, '', its namespace)."""
    from ..diagnostics import TkcError
    ns = _namespace(device, case.seed * 1_000_003 + case.index)
    try:
        code = compile(case.source(), case.name, "exec")
        for _ in range(2 if case.params.get("twice") else 1):
            exec(code, ns)   # (twice: new tensors, the same shapes)
        if device == "cuda":   # a kernel's fault surfaces here, in its case, not in a later one
            import torch
            torch.cuda.synchronize()
    except TkcError as e:
        _free(ns)
        if case.valid:
            return "failed", f"refused a call inside the op's documented domain: {e}", None
        if not e.where.startswith(case.name):
            return "failed", f"the refusal is not located at the case's line: {e}", None
        return "refused", "", None
    except Exception:   # noqa: BLE001 (anything but a located refusal is the fuzzer's finding)
        _free(ns)
        return "failed", "raised:\n" + traceback.format_exc(limit=6), None
    return None, "", ns


def run_case(case, device: str) -> tuple[str, str]:
    """(outcome, report): outcome 'served', 'refused' or 'failed' (report: why)."""
    outcome, report, ns = _call(case, device)
    if ns is None:
        return outcome, report
    try:
        return _check(case, ns)
    finally:
        _free(ns)


def _check(case, ns: dict) -> tuple[str, str]:
    import torch
    outs = ns["out"] if isinstance(ns["out"], tuple) else (ns["out"],)
    args = {a: ns[a] for a in case.args}
    leaves = {a: None if t is None else t.detach().double().requires_grad_(a in case.grads)
              if t.is_floating_point() else t for a, t in args.items()}
    try:
        refs = reference(case, leaves)
    except Exception:   # noqa: BLE001 (served, yet PyTorch's float64 cannot compute it)
        return "failed", "served a call its reference cannot compute:\n" + traceback.format_exc(limit=3)
    if len(outs) != len(refs):
        return "failed", f"returned {len(outs)} outputs, the reference {len(refs)}"
    for n, (o, ref) in enumerate(zip(outs, refs)):
        err = _rel(o.detach(), ref.detach())
        if not err < case.tol:
            return "failed", f"output {n} ({tuple(o.shape)}) off the reference: relative error {err:.3g}"
    problem = _meta_call(case, ns, outs)
    if problem:
        return "failed", problem
    if case.grads and outs[0].numel():
        dy = torch.randn(outs[0].shape, device=outs[0].device).to(outs[0].dtype)
        got = torch.autograd.grad(outs[0], [args[a] for a in case.grads], dy, allow_unused=True)
        if dy.is_cuda:   # a fault in tkc's backward surfaces here, not in the peer's
            torch.cuda.synchronize()
        want = torch.autograd.grad(refs[0], [leaves[a] for a in case.grads], dy.double(), allow_unused=True)
        theirs = peer_grads(case, args, dy)
        for n, (a, g, w) in enumerate(zip(case.grads, got, want)):
            err = _rel(g, w) if g is not None and w is not None else (0.0 if g is w else math.inf)
            peer = _rel(theirs[n], w) if theirs is not None and w is not None else 0.0
            if not err < max(3 * case.tol, 2 * peer):
                return "failed", (f"the gradient of {a} off the reference: relative error {err:.3g}"
                                  + (f" (PyTorch's in bf16: {peer:.3g})" if theirs is not None else ""))
    return "served", ""


def _meta_call(case, ns: dict, outs: tuple) -> str:
    """The case's call again on meta copies of its tensors (torch's shape
    inference): outputs of the shapes and dtypes it served ('' if so, or if
    the call is not a plain one: under autocast, captured, compiled)."""
    import torch
    line = next((x for x in case.lines if x.startswith("out = tkc.")), None)
    if line is None:
        return ""
    meta = {k: torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
            if isinstance(v, torch.Tensor) else v for k, v in ns.items()}   # (the call's every tensor)
    try:
        exec(compile(line, case.name, "exec"), meta)
    except Exception:   # noqa: BLE001 (a call it served must be served on meta tensors too)
        return "served the call, refused it on meta tensors:\n" + traceback.format_exc(limit=4)
    got = meta["out"] if isinstance(meta["out"], tuple) else (meta["out"],)
    shapes = [(tuple(t.shape), t.dtype, t.is_meta) for t in got]
    want = [(tuple(t.shape), t.dtype, True) for t in outs]
    return "" if shapes == want else f"on meta tensors: outputs {shapes}, served {want}"


def peer_grads(case, args: dict, dy):
    """The gradients PyTorch's bf16 attention (SDPA) gives for an attention
    case, or None: a near one-hot softmax's dS = P (dP - D) cancels, and D is
    a sum over O in bf16 in every FlashAttention backward, so such a
    gradient is as far from float64 in PyTorch's as in tkc's; the bound is
    then twice PyTorch's error."""
    import torch
    import torch.nn.functional as F
    if case.op != "attention":
        return None
    # dense copies: the error is the arithmetic's, and SDPA's causal backward on a view off a
    # 16-byte boundary faulted (misaligned address) on the H200 (torch 2.11)
    q, k, v = (args[n].detach().to(torch.bfloat16, memory_format=torch.contiguous_format, copy=True)
               for n in "qkv")
    Lq, Lk = q.shape[-2], k.shape[-2]
    if q.numel() == 0 or k.numel() == 0:
        return None
    # causal with more queries than keys: the first Lq - Lk rows see no key (SDPA gives them NaN;
    # their dq is 0 and they add nothing to dk, dv): SDPA runs on the rows that see one
    cut = Lq - Lk if case.params["causal"] and Lq > Lk else 0
    q, dy = q[..., cut:, :].contiguous(), dy[..., cut:, :]
    q, k, v = (t.requires_grad_(n in case.grads) for n, t in zip("qkv", (q, k, v)))
    mask = None
    if case.params["causal"] and Lq - cut != Lk:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(Lq - cut, Lk)
    try:   # (a peer that cannot run a case bounds nothing)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=case.params["causal"] and Lq - cut == Lk,
                                           scale=case.params["scale"], enable_gqa=True)
        grads = list(torch.autograd.grad(o, [t for n, t in zip("qkv", (q, k, v)) if n in case.grads], dy))
    except RuntimeError:
        return None
    if cut and "q" in case.grads:   # the rows that see no key: dq 0
        grads[0] = torch.cat([grads[0].new_zeros(*grads[0].shape[:-2], cut, grads[0].shape[-1]), grads[0]], -2)
    return grads


def _fake_case(case, device: str) -> tuple[str, str]:
    """On the fake driver: only that the call (and its backward) is served, or
    refused where it should be; the values are the stub launches' garbage."""
    import torch
    outcome, report, ns = _call(case, device)
    if ns is None:
        return outcome, report
    outs = ns["out"] if isinstance(ns["out"], tuple) else (ns["out"],)
    try:
        shapes, report = _reference_shapes(case, ns)
        if shapes is None:
            return "failed", "served a call its reference cannot compute:\n" + report
        if shapes and [tuple(o.shape) for o in outs] != shapes:
            return "failed", f"returned shapes {[tuple(o.shape) for o in outs]}, the reference {shapes}"
        problem = _meta_call(case, ns, outs)
        if problem:
            return "failed", problem
        if case.grads and outs[0].numel():   # the backward's plumbing and its own checks
            torch.autograd.grad(outs[0], [ns[a] for a in case.grads], torch.ones_like(outs[0]),
                                allow_unused=True)
    except Exception:   # noqa: BLE001
        return "failed", "the backward raised:\n" + traceback.format_exc(limit=6)
    finally:
        _free(ns)
    return "served", ""


def _reference_shapes(case, ns: dict):
    """The reference's output shapes from meta copies of the case's float
    arguments (no values, no time), its integer ones as they are where the
    reference reads their values (counts, cu_seqlens), else meta too: (shapes,
    ''), ([], '') where meta tensors cannot run it, or (None, the traceback)
    where the reference cannot take them."""
    import torch
    report = ""
    for ints_meta in (False, True):
        meta = {a: None if (t := ns[a]) is None else t.detach().to("meta", torch.float64)
                if t.is_floating_point() else t.to("meta") if ints_meta else t for a in case.args}
        try:
            return [tuple(r.shape) for r in reference(case, meta)], ""
        except NotImplementedError:
            return [], ""
        except Exception:   # noqa: BLE001
            report = traceback.format_exc(limit=3)
    return None, report


def run_ops(args) -> int:
    """`tkc fuzz --ops`: cases start .. start + count of seed, a report per failure, a summary."""
    import torch

    from .ops import generate
    fake = args.fake or not torch.cuda.is_available()
    if fake:
        from ..bench.fake_driver import fake_driver
        scope, device, check = fake_driver(), "cpu", _fake_case
    else:
        scope, device, check = contextlib.nullcontext(), "cuda", run_case
    t0, tally, failed = time.time(), Counter(), 0
    end = args.start + args.count
    with scope:
        for i in range(args.start, end):
            case = generate(args.seed, i)
            try:
                outcome, report = check(case, device)
            except KeyboardInterrupt:   # (timeout -s INT): the summary of the cases run
                print(f"interrupted at case {i}", flush=True)
                end = i
                break
            except Exception:   # noqa: BLE001 (raised while checking: the case's failure too)
                outcome, report = "failed", "raised while checking:\n" + traceback.format_exc(limit=6)
            tally[case.op, outcome] += 1
            if outcome == "failed":
                failed += 1
                print(f"{case.name}: {case.op}: {report}\n{case.source()}", flush=True)
                if not fake and "CUDA" in report:
                    print("a CUDA error: the context is gone, the run stops here", flush=True)
                    end = i + 1
                    break
    ops = sorted({op for op, _ in tally})
    print(f"tkc fuzz --ops: seed {args.seed}, cases {args.start}..{end - 1} "
          f"({'fake driver' if fake else torch.cuda.get_device_name()}): {failed} failures, "
          f"{time.time() - t0:.1f} s\n" + ", ".join(
              f"{op} {tally[op, 'served']} served / {tally[op, 'refused']} refused" for op in ops))
    return 1 if failed else 0

