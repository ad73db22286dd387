"""`tkc tune --call` of a torch op: the autotuned spaces and keys an op call
picks from, each as an example of its space that makes the key.

    tkc tune --call "matmul(bf16[777, 4096], bf16[4096, 1536])"
    tkc tune --call "layer_norm(bf16[8192, 8192], bf16[8192], bf16[8192])" --dry-run

The call is made as `tkc build --call` makes it (tkc.prebuild: forward, then
with gradients and backward; on the GPU, or through the fake driver for a dry
run) while the spaces note each key they look up (space.recording). A space
tunes a key at arguments its kernel takes, which the op made on the way; the
examples (autotune(examples=...)) are such arguments, valid where the op's
were made of zeros (offsets, counts), so each key is tuned at the first
example that makes it (the key's pick serves every call of the key). A key
no example makes is reported, with the kernel-level --call that tunes it.
The process's picks are dropped first (plans.forget), so every key is
looked up, and noted, again. The examples are searched as fake tensors and
the one found made for real; so are they for a key tuned at its first call
(TKC_AUTOTUNE=1) by a lookup that has no arguments (a torch op's plan)."""
from __future__ import annotations

import sys

from .space import fake_tensors, recording


def is_op(name: str) -> bool:
    """Whether a --call's name is one of tkc's torch ops (not a space's)."""
    import tkc
    return name in tkc._TORCH_OPS


def expand(expr: str, found: list, dry_run: bool, faked) -> tuple[list, int]:
    """([(space name, example)] of each key of `found`'s spaces the op call
    `expr` picks from, the number of keys no example makes). The keys are
    made on the GPU, or with dry_run through the fake driver (faked: the
    examples too, as fake tensors)."""
    from ..prebuild import prebuild
    from ..torchops.plans import forget
    forget()   # (picks this process made already: looked up again, so noted)
    with recording() as seen:
        prebuild(expr, "tkc tune", gpu=not dry_run)
    mine = {t.name for t in found}
    out, lacking = [], 0
    for tuned, key in seen:
        if tuned.name not in mine:
            continue
        example = tuned.example_of(key, faked if dry_run else fake_tensors)
        if example is None:
            lacking += 1
            sys.stderr.write(f"tkc tune: --call {expr!r} picks {tuned.name} at key {key!r}, which none of "
                             f"its examples makes: tune it by --call '{tuned.name}(...)' with its kernel's "
                             f"arguments\n")
        else:
            out.append((tuned.name, example))
    return out, lacking
