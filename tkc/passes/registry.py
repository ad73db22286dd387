"""The pass registry: tk passes by name, so pipelines mix them with upstream ones.

A pass is a Python function `run(module_op: ir.Operation) -> None` that raises
TkcError (located) on failure. `register` records it with a one-line
description; `tkc --list-passes` prints them. The registry of every pass,
which imports them all, is tkc.pass_pipeline.all_passes: it sits above
tkc.passes and tkc.lowering, this module below both.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

PASSES: dict[str, "PassInfo"] = {}


@dataclass(frozen=True)
class PassInfo:
    name: str
    description: str
    run: Callable


def register(name: str, description: str):
    def deco(fn):
        PASSES[name] = PassInfo(name, description, fn)
        return fn
    return deco
