"""The tkc runtime: artifacts, the artifact cache, argument checks and launches.

It imports no MLIR (a GPU machine runs prebuilt artifacts with this package
alone) and imports cuda-bindings only when a kernel is first launched.
"""
from .artifact import Artifact, validate_manifest
from .cache import cache_dir, compiler_hash, lookup, make_key, missing, offline, store
from .grid import evaluate
from .launch import launch

__all__ = ["Artifact", "validate_manifest", "cache_dir", "compiler_hash", "lookup", "make_key",
           "missing", "offline", "store", "evaluate", "launch"]
