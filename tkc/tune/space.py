"""@tkc.autotune: a kernel builder, the space of schedules it takes, and a key.

    @tkc.autotune(space={"BN": [64, 128, 256], "stages": [2, 3, 4]},
                  key=lambda a, b, c: (c.shape[-2] // 1024, c.shape[-1] // 1024))
    def scaled_copy(BN, stages):
        return tkc.kernel(...)(body)          # a tkc.Kernel for this schedule

    scaled_copy(a, b, c)      # runs the kernel of the tuned pick for this call's key

The builder is the author's: it takes the space's parameters by name and
returns a `tkc.Kernel` (built once per configuration), or a `Bound` kernel
(bound.py) where a parameter is a launch argument. The space is a dict of
lists (their product) or a list of dicts; its first configuration is the
default, which an untuned key runs and which every candidate's output is
checked against. `fallback(key) -> config` replaces the default for keys the
tables lack where the untuned choice depends on the key (a rule of the
shape, e.g. tkc.fftconv's split of the batch that fills the SMs). `prune(config) -> bool` drops configurations the author
knows cannot win; `fits(config, key) -> bool` leaves out of a key's tuning
those that cannot serve it (a tile sized to a shape: tkc.matmul's swapped
tiles, each as high as its key's rows take); those the compiler refuses
(shared memory, registers, the verifier) are dropped when tuning (measure.py). The key maps a call's
arguments to a hashable value: by default each tensor's dtype and its dims
rounded up to powers of two (shape buckets), each scalar as it is.

A call looks its key up in the tuned tables (tables.py: this machine's,
then the package's, for the current GPU) and falls back to the default;
`tune=True` (or TKC_AUTOTUNE=1, which the library's torch ops follow too)
tunes a key the tables lack at its first call instead (an op's lookup, which
has no kernel arguments, at an example of the space that makes the key;
a call under CUDA-graph capture, torch.compile or fake tensors runs the
untuned pick and leaves the key to a later call), and `.tune(*args)` tunes
one on request (measure.py). No MLIR is needed to run
a tuned pick offline (TKC_OFFLINE=1): only the picked kernel's artifact.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys

from ..diagnostics import TkcError
from .configs import config_text, configs, default_key

__all__ = ["Autotuned", "autotune", "registry"]

registry: dict = {}  # name -> Autotuned: build workers and `tkc tune` find them here
_seen: list | None = None   # within recording(): the (space, key) pairs looked up


@contextlib.contextmanager
def recording():
    """Within it, each (space, key) a call looks up is noted, once, in the
    list it yields: the keys an op call picks from (`tkc tune --call` of a
    torch op, tune/op_calls.py)."""
    global _seen
    outer, _seen = _seen, []
    try:
        yield _seen
    finally:
        _seen = outer


def _note(tuned, key) -> None:
    if (tuned, key) not in _seen:
        _seen.append((tuned, key))


_memos: list = []   # picks_memo's caches


def picks_memo(fn):
    """functools.lru_cache for a function whose value rests on a pick (a
    space's choose: an op's kernels for a shape), which forget_picks clears."""
    cached = functools.lru_cache(maxsize=None)(fn)
    _memos.append(cached)
    return cached


def forget_picks() -> None:
    """Drop the process's picks, the spaces' and the memos' made of them: the
    next calls look their keys up again (the tables read anew)."""
    for memo in _memos:
        memo.cache_clear()
    for tuned in registry.values():
        tuned.forget()


class Autotuned:
    """A kernel builder with its space (see the module docstring)."""

    def __init__(self, builder, space, key=None, prune=None, name: str | None = None,
                 tune: bool = False, flush_l2: bool = False, examples=None, where: str = "",
                 fallback=None, fits=None, example=None):
        self.builder, self.prune, self.where, self.examples = builder, prune, where, examples
        self.example = example
        self.fallback, self.fits = fallback, fits
        self.name = name or f"{builder.__module__}.{builder.__qualname__}"
        self.key_fn = key or default_key
        self.tune_first = tune
        self.flush_l2 = flush_l2
        self.configs = configs(space, builder, where)
        self._texts: dict | None = None   # config text -> config (_known's index, made at its first use)
        self._kernels: dict = {}   # config text -> Kernel
        self._runs: dict = {}      # key -> the Kernel of its pick (a call's path: no JSON)
        self._picks: dict = {}     # key -> config (this process's memo of the tables)
        registry[self.name] = self

    def __repr__(self):
        return f"<tkc.autotune {self.name}: {len(self.configs)} configurations>"

    @property
    def default(self) -> dict:
        return self.configs[0]

    def candidates(self, key=None) -> list[dict]:
        """The configurations the author's prune keeps (the default always),
        with a key those of them that fit it."""
        return [c for i, c in enumerate(self.configs) if i == 0 or (self.prune is None or not self.prune(c))
                and (key is None or self.fits is None or self.fits(c, key))]

    def kernel(self, config: dict):
        """The Kernel (or Bound kernel) of one configuration (the builder called once per configuration)."""
        text = config_text(config)
        k = self._kernels.get(text)
        if k is None:
            from ..frontend.kernel import Kernel
            from .bound import Bound
            k = self.builder(**config)
            if not isinstance(k, (Kernel, Bound)):
                raise TkcError(f"autotune {self.name}: the builder must return a tkc.Kernel, got "
                               f"{type(k).__name__} for {text}", self.where)
            self._kernels[text] = k
        return k

    def kernels(self) -> list:
        """Every candidate's Kernel (what `tkc build` of a file builds; a
        Bound candidate's Kernel, once)."""
        out = []
        for c in self.candidates():
            k = self.kernel(c)
            k = getattr(k, "kernel", k)
            if all(k is not o for o in out):
                out.append(k)
        return out

    def key(self, args) -> object:
        return self.key_fn(*args)

    def misfit(self, args) -> str | None:
        """Why args cannot be a call of the default's kernel (its argument
        count, a Bound kernel's less its bound ones), else None: what a dry
        run asks of each example, where the count is all it can check."""
        k = self.kernel(self.default)
        names = list(getattr(k, "kernel", k).params)
        n = len(names) - len(getattr(k, "values", {}))
        if len(args) != n:
            return f"an example of {len(args)} arguments; the kernel {k.name} takes {n} ({', '.join(names)})"
        return None

    def pick(self, args) -> dict:
        """The configuration a call with these arguments runs: the tuned one
        for its key (tuning it first when asked to), else the default."""
        return self.choose(self.key(args), args)

    def choose(self, key, args=None) -> dict:
        """The configuration of a key: this process's memo, else the tables,
        else (when asked to tune at first calls, and this call can) tuned
        now, else the fallback's for the key, else the default."""
        if _seen is not None:
            _note(self, key)
        config = self._picks.get(key)
        if config is None:
            from . import tables
            config = tables.lookup(self.name, key)
            later = False   # tuning asked for, but not possible at this call
            if config is None and (self.tune_first or _env_tunes()):
                later = not _can_tune_now()
                config = None if later else self._tuned_now(key, args)
            config = _known(self, config)
            if config is None:
                config = self._fallback(key)
            if later:
                return config   # not kept: the key's first call that can tune it does
            self._picks[key] = config
        return config

    def _tuned_now(self, key, args) -> dict | None:
        """The key's pick, tuned now (measure.tune, which records it in this
        machine's table): at the call's arguments, or for a lookup without
        them (a torch op's plan), at the first of the space's examples that
        makes the key, found as fake tensors and then made (example_of);
        None where no example makes it."""
        from .measure import tune
        if args is None:
            example = self.example_of(key, fake_tensors)
            if example is None:
                return None
            args = example() if callable(example) else example
        return tune(self, args).best

    def example_of(self, key, faked=None):
        """The space's example(key) where it makes `key`, else the first of its
        examples whose arguments make it (made as fake tensors within
        `faked()`, when given: a space's largest examples need not fit beside
        a model), or None."""
        made = [self.example(key)] if self.example is not None else []
        with faked() if faked is not None else contextlib.nullcontext():
            for example in [*made, *(self.examples() if self.examples else ())]:
                if example is None:
                    continue
                args = example() if callable(example) else example
                if self.key(args) == key:
                    return example
                args = None   # (before the next is made: real examples hold GPU memory)
        return None

    def _fallback(self, key) -> dict:
        """The fallback's configuration for a key the tables lack (else the
        default); the keys it looks up itself (a nearby key's pick) are not
        the call's, and not noted."""
        if self.fallback is None:
            return self.default
        global _seen
        outer, _seen = _seen, None
        try:
            return self.fallback(key)
        finally:
            _seen = outer

    def _picked(self, args):
        """The Kernel of the pick for these arguments, kept per key: a call's
        path (a configuration's JSON, kernel()'s key, cost more than the rest
        of an @autotune call's own work)."""
        key = self.key(args)
        if _seen is not None:
            _note(self, key)
        k = self._runs.get(key)
        if k is None:
            if len(self._runs) >= 4096:
                self._runs.clear()
            k = self.kernel(self.choose(key, args))
            if key in self._picks:   # (a key left to tune at a later call: not kept)
                self._runs[key] = k
        return k

    def __call__(self, *args, stream=None):
        self._picked(args)(*args, stream=stream)

    def prepare(self, *args, bound=(), free=()):
        """The picked kernel's prepared launch (Kernel.prepare)."""
        return self._picked(args).prepare(*args, bound=bound, free=free)

    def held(self, key) -> dict | None:
        """The tables' pick of key where it is a configuration of this space, else None."""
        from . import tables
        return _known(self, tables.lookup(self.name, key))

    def tune(self, *args, **options):
        """Tune the key of these arguments now (measure.tune): the Result."""
        from .measure import tune
        result = tune(self, args, **options)
        key = self.key(args)
        self._picks[key] = result.best
        self._runs.pop(key, None)
        return result

    def forget(self) -> None:
        """Drop this process's picks (the tables are read again)."""
        self._picks.clear()
        self._runs.clear()


def _known(tuned: Autotuned, config: dict | None) -> dict | None:
    """The space's configuration equal to config (a table may be older than
    the space), else None. Through an index of the space made once: each new
    key of a call comes here (a serving loop's new token counts), and
    comparing the space's texts one by one cost ~3 ms a key at tkc.matmul's
    ~900 configurations."""
    if config is None:
        return None
    if tuned._texts is None:
        tuned._texts = {config_text(c): c for c in tuned.configs}
    return tuned._texts.get(config_text(config))


@contextlib.contextmanager
def fake_tensors():
    """Tensors made within it are fake (torch's FakeTensorMode: shapes, no
    memory); the driver is the real one (a key may ask it the SM count)."""
    import warnings

    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")   # (a key's or a check's read of a fake tensor's pointer)
        yield


def _can_tune_now() -> bool:
    """Whether a key may be tuned at this call: a GPU behind the real driver,
    and no CUDA-graph capture, torch.compile trace or dispatch mode (fake
    tensors) in progress, since tuning runs kernels and synchronises."""
    import torch
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    from ..runtime import driver
    return not driver.is_fake() and torch.cuda.is_available() and not torch.compiler.is_compiling() \
        and not torch.cuda.is_current_stream_capturing() and _get_current_dispatch_mode() is None


def _env_tunes() -> bool:
    return os.environ.get("TKC_AUTOTUNE", "").strip().lower() in ("1", "true", "yes")


def autotune(space, key=None, prune=None, name: str | None = None, tune: bool = False,
             flush_l2: bool = False, examples=None, fallback=None, fits=None, example=None):
    """Decorate a kernel builder (see the module docstring): the space of its
    parameters, the key of a call (default: dtypes and power-of-two shape
    buckets), prune(config) -> True to drop a configuration, the name its
    tables use (default: module.qualname), tune=True to tune each new key at
    its first call, flush_l2=True to time each candidate with a cold L2,
    examples() -> the argument lists `tkc tune` tunes at when given no call
    (each a list, or a function making one: tensors are made lazily),
    example(key) -> such an argument list whose call makes `key`, or None, for
    keys no example makes (a call's, which `tkc tune --call` tunes at),
    fallback(key) -> the configuration of a key no table holds (default:
    the space's first), fits(config, key) -> False to leave a configuration
    out of that key's candidates."""
    frame = sys._getframe(1)  # the decorator's line: where a bad space is reported
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}:1"

    def wrap(builder):
        if not callable(builder):
            raise TkcError(f"autotune decorates a kernel builder (a function), got {builder!r}", where)
        return Autotuned(builder, space, key, prune, name, tune, flush_l2, examples, where, fallback, fits, example)
    return wrap
