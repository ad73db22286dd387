"""One numpy function per tk op, registered by op name: importing this module
registers the handlers of every tile op.

Every handler runs once per op at compile time (checking the types it relies
on, so a malformed op is a located error instead of a wrong number) and
returns the closure that runs per warp. Register values are float32 arrays
that no op ever mutates: a result is always a fresh array (or an operand
passed through unchanged), so they can be shared freely between slots.

The handlers live in modules by concept: compute.py (register ops), memory.py
(loads, stores, group copies), gl.py (gl slices and dims), workers.py (warp
and block ids), hopper.py (mbarriers and TMA), warpgroup.py (wgmma and the
warpgroup's registers); operands.py holds what they share. Elsewhere: syncs.py
(tk.sync, atomic_add), shared.py (allocs, rings, subtiles), pipeline.py
(pipeline_load/store), structured.py (func, scf, arith).
"""
from __future__ import annotations

from . import compute, gl, hopper, memory, warpgroup, workers  # noqa: F401  (registers their handlers)
