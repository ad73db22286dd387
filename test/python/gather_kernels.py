"""The data-dependent TMA test kernels (paged loads, gathers into subtiles,
pages stored as loaded), loaded once for the interpreter tests
(test_gather.py) and the GPU's (test/gpu/test_gather_gpu.py, whose
module-level names `tkc build` prebuilds). They are defined in
test/lit/passes/pipeline-gather.py, beside the FileCheck lines of their IR,
and nowhere else. Imports tkc only, so a GPU machine without MLIR imports it
too."""
from pathlib import Path

from tkc.frontend.kernel import kernels_in_file

KERNELS = {k.name: k for k in kernels_in_file(
    Path(__file__).resolve().parents[1] / "lit" / "passes" / "pipeline-gather.py")}
paged_sum, gather_gemm, pick_page = KERNELS["paged_sum"], KERNELS["gather_gemm"], KERNELS["pick_page"]
copy_pages, copy_square, copy_wide = KERNELS["copy_pages"], KERNELS["copy_square"], KERNELS["copy_wide"]
gather_copy, gather_gemm_copy = KERNELS["gather_copy"], KERNELS["gather_gemm_copy"]
