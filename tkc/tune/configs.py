"""Configurations of an autotuned builder's space: enumerated, checked, written down.

A space is a dict of value lists (their product, in order) or a list of
dicts; each configuration maps the builder's parameters to plain values.
The tables store a configuration as its sorted JSON (`config_text`) and a
key by its repr; `default_key` makes a call's key from its arguments'
dtypes and power-of-two shape buckets.
"""
from __future__ import annotations

import inspect
import itertools
import json

from ..diagnostics import TkcError

__all__ = ["bucket", "config_text", "configs", "default_key"]


def bucket(n: int) -> int:
    """n rounded up to a power of two (0 and 1 stay): a shape bucket."""
    return n if n < 2 else 1 << (n - 1).bit_length()


_parts: dict = {}   # (dtype, shape) -> its part of a key (default_key runs at every call)


def default_key(*args) -> tuple:
    """Per argument: a tensor's dtype and bucketed shape, a scalar as it is."""
    out = []
    for a in args:
        shape = getattr(a, "shape", None)
        if shape is not None:
            dtype = getattr(a, "dtype", "")
            memo = (dtype, shape)
            try:
                part = _parts.get(memo)
            except TypeError:   # an unhashable shape (symbolic sizes): made, not kept
                part = _part(dtype, shape)
            if part is None:
                if len(_parts) >= 4096:
                    _parts.clear()
                part = _parts[memo] = _part(dtype, shape)
            out.append(part)
        else:
            out.append(a)
    return tuple(out)


def _part(dtype, shape) -> tuple:
    return str(dtype).removeprefix("torch."), tuple(bucket(int(d)) for d in shape)


def config_text(config: dict) -> str:
    """A configuration as the tables store it (sorted JSON)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def configs(space, builder, where: str) -> list[dict]:
    """The space as a list of configurations, checked against the builder's parameters."""
    if isinstance(space, dict):
        names = list(space)
        for n, values in space.items():
            if not isinstance(values, (list, tuple)) or not values:
                raise TkcError(f"autotune: space[{n!r}] must be a non-empty list of values, got "
                               f"{values!r}", where)
        configs = [dict(zip(names, combo)) for combo in itertools.product(*space.values())]
    elif isinstance(space, (list, tuple)) and space and all(isinstance(c, dict) for c in space):
        configs = [dict(c) for c in space]
    else:
        raise TkcError("autotune: space must be a dict of value lists or a non-empty list of "
                       f"dicts, got {space!r}", where)
    params = inspect.signature(builder).parameters
    takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
    for c in configs:
        unknown = [n for n in c if n not in params and not takes_any]
        if unknown:
            raise TkcError(f"autotune: the builder {builder.__name__}() takes no parameter "
                           f"{unknown[0]!r} (it takes {', '.join(params) or 'none'})", where)
        for n, v in c.items():
            if not isinstance(v, (bool, int, float, str, type(None))):
                raise TkcError(f"autotune: space values must be plain (bool, int, float, str, "
                               f"None): {n}={v!r}", where)
    seen = set()
    for c in configs:
        text = config_text(c)
        if text in seen:
            raise TkcError(f"autotune: the space lists {text} twice", where)
        seen.add(text)
    return configs
