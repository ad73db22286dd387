"""One op, two paths: tkc's PyTorch ops at torch's own host cost.

A tkc op is a torch.library custom op (schema, fake implementation,
autograd formula), so torch.compile, export, fake tensors and functorch see
an op with known shapes and gradients. But calling a custom op from eager
Python costs about as much host time again as the launches behind it: torch's
Python wrapper, the dispatcher's trip back into Python, and a generated
autograd.Function around it. So `Op.__call__` asks first whether anything is
tracing; when nothing is (the common eager call), it runs the implementation
itself, or, when a gradient is wanted, the same implementation and autograd
formula through one plain autograd.Function. Both paths run the same Python
(`impl`, `setup`, `backward`), so they cannot drift apart.

"Tracing" is anything that must see the op rather than its launches:
torch.compile (dynamo), a dispatch mode (fake tensors, make_fx, export,
FlopCounter, functionalisation), functorch transforms (vmap, grad) and tensor
subclasses (FakeTensor, FunctionalTensor, DTensor). CUDA-graph capture is not
tracing: the launches themselves are captured.
"""
from __future__ import annotations

import functools
import shlex
from typing import Callable

import torch
from torch.utils import _python_dispatch
from torch.utils import _pytree as pytree

from ..diagnostics import TkcError
from ..runtime.callsite import caller
from ..runtime.cache import MissingArtifact, cache_dir
from . import checks
from .calls import describe

__all__ = ["Op", "grad_key", "kept_run", "plain_key", "public", "readable", "tracing", "wants_grad"]

_PLAIN = (torch.Tensor, torch.nn.Parameter)
_functorch_stack = torch._C._functorch.peek_interpreter_stack
_grad_enabled = torch.is_grad_enabled
_is_compiling = torch.compiler.is_compiling
_C_APPLY = torch._C._FunctionBase.__dict__["apply"]
# Each op's implementation, registered again for the devices it runs on (CUDA; the CPU
# for the fake driver and the interpreter's tests): there the dispatcher calls it directly
# instead of torch.library's CompositeExplicitAutograd wrapper (CustomOpDef's backend_impl,
# which re-checks the outputs' aliasing on every call: ~25% of a custom op's dispatch, the
# path every call in a compiled graph takes).
_BACKENDS = ("CUDA", "CPU")
_libs: dict = {}


def tracing(args) -> bool:
    """Whether a call with these arguments must go through the custom op.
    is_compiling() comes first: dynamo folds it to True, so it never traces
    the checks after it."""
    if torch.compiler.is_compiling() or _python_dispatch._is_in_torch_dispatch_mode \
            or _functorch_stack() is not None:
        return True
    for a in args:
        if isinstance(a, torch.Tensor) and type(a) not in _PLAIN:
            return True
    return False


def readable(t) -> bool:
    """Whether a tensor's values can be read on the host now (an op's check of
    index values: cu_seqlens, counts): not while anything traces, nor of a
    meta tensor, nor while a CUDA graph is captured."""
    return not (tracing((t,)) or t.is_meta or (t.is_cuda and torch.cuda.is_current_stream_capturing()))


def plain_key(flags, *tensors):
    """The key of a plain call, or None for any other: nothing tracing (as in
    `tracing`), no gradient wanted, every tensor (or None) a plain one. The
    key holds the flags and per tensor what plans.signature holds, so two
    plain calls with one key run the same launches on different pointers:
    an op keeps what its first such call ran (a `run` of the tensors) and
    later calls skip straight to it, past the argument checks (the key fixes
    what they read), the custom op and autograd machinery and the inner
    plans' keys. This runs on every call: one loop, no helpers."""
    if _is_compiling() or _python_dispatch._is_in_torch_dispatch_mode \
            or _functorch_stack() is not None:
        return None
    grad = _grad_enabled()
    key = flags
    for t in tensors:
        if t is None:
            key = (key, None)
        elif type(t) not in _PLAIN or grad and t.requires_grad:
            return None
        else:
            key = (key, t.shape, t.stride(), t.dtype, t.device, t.data_ptr() & 15)
    return key


def grad_key(flags, *tensors):
    """plain_key's key for a call that may want a gradient too: per tensor
    also whether it wants one (grad mode and requires_grad), so a call that
    wants a gradient has a key of its own, under which an op keeps a run
    through `Op.fast` (its autograd formula with the plan of the first such
    call, past the checks); None while tracing or for a tensor subclass."""
    if _is_compiling() or _python_dispatch._is_in_torch_dispatch_mode \
            or _functorch_stack() is not None:
        return None
    grad = _grad_enabled()
    key = flags
    for t in tensors:
        if t is None:
            key = (key, None)
        elif type(t) not in _PLAIN:
            return None
        else:
            key = (key, t.shape, t.stride(), t.dtype, t.device, t.data_ptr() & 15,
                   grad and t.requires_grad)
    return key


def wants_grad(*tensors) -> bool:
    """Grad mode, and a tensor (or None) that requires grad."""
    if not _grad_enabled():
        return False
    for t in tensors:
        if t is not None and t.requires_grad:
            return True
    return False


def kept_run(ctx, grads):
    """In a backward formula: the forward's kept run (Op.fast's, ctx.run),
    whose backward plan (plans.Later) the formula may launch directly; None on
    the other paths, while tracing and in grad mode (a double backward must
    see the ops it differentiates)."""
    run = getattr(ctx, "run", None)
    if run is None or _grad_enabled() or tracing(grads):
        return None
    return run


class Op:
    """A tkc op: `impl(*args)` launches the kernels on real tensors.

    name: the custom op's qualified name ("tkc::attention_fwd"); impl is
    registered as it, so its annotations are the schema. fake(*args) gives
    outputs of the right shapes for tracing. setup(ctx, inputs, output) and
    backward(ctx, *grads) are torch.library's register_autograd pair; the
    eager path calls them from its own autograd.Function, where gradients of
    unused outputs arrive as None (not as zeros: the formula decides).
    infer(*args): the first output alone, for main_output.

    fast(*args, run): the autograd call with `run(*args)` in impl's place (a
    plan the op kept for these arguments' key: grad_key), for an eager call
    that wants a gradient and whose key was seen; its backward is the same
    formula, which finds `run` as ctx.run (ctx.run is unset on other paths).
    fast_main(*args, run): fast's first output alone, for a caller that
    wants no other (the rest, statistics the formula reads, are saved
    intermediates: on the H200's host a Function returning three outputs
    costs ~15.5 µs a call, one returning the first and saving two 13.2)."""

    def __init__(self, name: str, impl: Callable, fake: Callable,
                 setup: Callable | None = None, backward: Callable | None = None,
                 infer: Callable | None = None):
        self.name, self.impl, self.infer = name, impl, infer
        self.custom_op = torch.library.custom_op(name, impl, mutates_args=())
        self.custom_op.register_fake(fake)
        ns, opname = name.split("::")
        lib = _libs.get(ns) or _libs.setdefault(ns, torch.library.Library(ns, "IMPL"))
        for key in _BACKENDS:
            lib.impl(opname, impl, key)
        self.function = self.apply = self.fast = self.fast_main = None
        if backward is not None:
            self.custom_op.register_autograd(backward, setup_context=setup)
            self.function = _autograd_function(name, impl, setup, backward)
            # torch's Function.apply is a Python wrapper that binds default
            # arguments (for setup_context-style Functions: this one is not)
            # and unwraps dead functorch wrappers (under functorch transforms,
            # which `tracing` sends to the custom op); the C apply under it is
            # what it then calls, a few µs sooner.
            self.apply = _C_APPLY.__get__(None, self.function)
            self.fast = _C_APPLY.__get__(None, _autograd_function(name, None, setup, backward))
            self.fast_main = _C_APPLY.__get__(None, _autograd_function(name, None, setup, backward,
                                                                       main=True))

    def __call__(self, *args):
        if tracing(args):
            return self.custom_op(*args)
        if self._wants_grad(args):
            return self.apply(*args)
        return self.impl(*args)

    def main_output(self, *args):
        """The first output alone, for a caller that wants no other: without
        tracing or gradients, `infer` runs (if given), which may leave the
        outputs that only the backward reads in scratch memory."""
        if self.infer is None or tracing(args):
            return self(*args)[0]
        if self._wants_grad(args):
            return self.apply(*args)[0]
        return self.infer(*args)

    def _wants_grad(self, args) -> bool:
        """An autograd formula, grad mode, and an argument that requires grad
        (a loop, not any(): this runs on every call). An op without a formula
        refuses such a call: its outputs would carry no gradient, and a loss
        that also reached the inputs another way would get a wrong one."""
        if not _grad_enabled():
            return False
        for a in args:
            if isinstance(a, torch.Tensor) and a.requires_grad:
                if self.function is None:
                    op = self.name.split("::")[-1].removesuffix("_fwd")
                    raise ForwardOnly(f"{op}: no gradient flows through it (forward only: it has no "
                                      f"backward kernels); call it under torch.no_grad() or on tensors "
                                      f"that do not require grad (.detach())", caller())
                return True
        return False


class ForwardOnly(TkcError):
    """A call of an op without a backward that wants a gradient (refused)."""


def _autograd_function(name: str, impl, setup, backward, main: bool = False) -> type:
    """An autograd.Function running impl forward and `backward` back; without
    impl, one whose last argument is the forward to run (Op.fast); main: one
    that returns the forward's first output alone (Op.fast_main), whose
    formula sees None for the others' gradients."""
    if impl is not None:
        def forward(ctx, *args):
            ctx.set_materialize_grads(False)
            out = impl(*args)
            setup(ctx, args, out)
            return out

        def back(ctx, *grads):
            return backward(ctx, *grads)
    else:
        def forward(ctx, *args):  # run last: needs_input_grad keeps impl's indices
            ctx.set_materialize_grads(False)
            args, run = args[:-1], args[-1]
            ctx.run = run  # for the backward formula (plans.Later)
            out = run(*args)
            setup(ctx, args, out)
            if main:
                ctx.others = (None,) * (len(out) - 1)   # the outputs not returned
                return out[0]
            return out

        def back(ctx, *grads):
            return *backward(ctx, *grads, *(ctx.others if main else ())), None
        name = f"{name}_{'main' if main else 'run'}"
    return type(f"Eager_{name.replace('::', '_')}", (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(back)})


def public(fn: Callable) -> Callable:
    """A public op (tkc.layer_norm, ...): when a kernel it picks is missing
    offline, its error names `tkc build --call` for this very call, which
    builds what the call launches, forward and backward (tkc/prebuild.py);
    a call on meta tensors gives its outputs as meta tensors (_on_meta)."""
    @functools.wraps(fn)
    def op(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MissingArtifact as e:
            if getattr(e, "op_call", False):   # an inner call's (autocast's cast arguments) is the one
                raise
            call = describe(fn.__name__, args, kwargs)
            err = MissingArtifact(e.reason, e.where, f"TKC_CACHE_DIR={cache_dir()} tkc build "
                                  f"--call {shlex.quote(call)}")
            err.op_call = True
            raise err from None
        except TkcError:   # (meta tensors fail the device checks: only then are they looked for)
            if not _all_meta((args, kwargs)):
                raise
            return _on_meta(fn, args, kwargs)
    return op


def _all_meta(tree) -> bool:
    """Tensors in the call, every one of them a meta tensor."""
    tensors = [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]
    return bool(tensors) and all(t.is_meta for t in tensors)


def _on_meta(fn: Callable, args: tuple, kwargs: dict):
    """A call on meta tensors (torch's shape inference: a model built under
    torch.device("meta")): its outputs' shapes, strides and dtypes as meta
    tensors, from the call traced on fake CUDA tensors (the ops' custom ops
    and their fake implementations, as torch.compile traces them); no
    autograd graph, as nothing of it could run."""
    from ..tune.space import fake_tensors

    def fake(t):
        if not (isinstance(t, torch.Tensor) and t.is_meta):
            return t
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=checks.DEVICE_TYPE)

    def meta(t):
        if not isinstance(t, torch.Tensor):
            return t
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    try:
        with fake_tensors():
            out = fn(*pytree.tree_map(fake, args), **pytree.tree_map(fake, kwargs))
    except TkcError:
        raise
    except Exception as e:   # noqa: BLE001  (what the trace could not do, said as tkc's error)
        raise TkcError(f"{fn.__name__}: its output shapes could not be found on meta tensors "
                       f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})", caller()) from None
    return pytree.tree_map(meta, out)
