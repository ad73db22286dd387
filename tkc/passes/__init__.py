"""tk passes, one per module, each registered by name (registry.py).

Importing this package registers them; `pipeline.run_pipeline` runs a textual
pipeline mixing them with upstream MLIR passes. No MLIR is imported here.
"""
from . import layout_selection, verify  # noqa: F401  (register tk-verify, tk-layout-selection)
from .pipeline import TkcErrors, run_pipeline, split_pipeline  # noqa: F401
