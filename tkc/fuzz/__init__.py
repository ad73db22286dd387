"""A fuzzer of tile programs: generated kernels checked through the passes,
the verifier and the GPU (docs/fuzz.md).

Design:
- A program is DSL *source text* (core.py, warpgroup.py; generate.py picks
  one), a pure function of (seed, index) through a string-seeded
  random.Random: a failing program prints as a kernel to paste into a
  regression test, and a GPU machine
  without MLIR regenerates the very same text, hence the same artifact-cache
  key (program.py compiles it under a linecache name, no file written).
- Well-typed by construction: each statement (statements.py) picks operands
  whose types fit the DSL's rules, and well-defined through intervals
  (values.py): exp only of what cannot overflow, log/rcp/sqrt only of what is
  positive, so no inf or NaN arises. The same analysis bounds how far the
  GPU's value may lie from the interpreter's (approximate math, bf16 ties),
  which is the GPU check's tolerance; masks compare only bit-exact values.
- Checks (checks.py): the interpreter on the traced IR and after every entry
  of TILE_PIPELINE, bit-identical; ill-typed twins (refusals.py) refused with
  a TkcError located at the broken line; the GPU (gpu.py) within tolerance.
- Runs (runner.py): `tkc fuzz --seed S --count N`, `--build DIR` here, `--gpu
  DIR` there. A plain seeded generator rather than hypothesis: programs are
  reproduced from (seed, index) alone, and shrinking is done by hand into
  test/python/test_fuzz_regressions.py.
"""
