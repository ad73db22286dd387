"""tk passes, one per module, each registered by name (registry.py).

Importing this package registers them; tkc.pass_pipeline.run_pipeline runs a
textual pipeline mixing them with upstream MLIR passes (it is above this
package and tkc.lowering, whose pass it registers). No MLIR is imported here.
"""
from . import layout_selection, verify  # noqa: F401  (register tk-verify, tk-layout-selection)
