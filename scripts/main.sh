#!/usr/bin/env bash
# The README's main job: set up, compile the kernel library for sm_90a into
# the artifact cache (a progress line, then a summary: kernels built and
# cached, the time, any kernel that spills, the compiler's warnings grouped;
# `bash scripts/main.sh -v` prints each kernel's registers, spills, shared
# memory and warnings: the arguments go to `tkc build`), then, where a Hopper
# GPU is present, check every kernel against PyTorch and benchmark it against
# the peers (cuBLAS, SDPA flash / cuDNN and FlexAttention for tkc.attention;
# for the memory-bound kernels a copy, torch.compile and, where installed,
# flash-linear-attention; for linear attention flash-linear-attention; for the
# FFT convolution torch.fft).
set -euo pipefail
cd "$(dirname "$0")/.."
export TKC_CACHE_DIR="${TKC_CACHE_DIR:-$PWD/.tkc-cache}"
# Only the package and its pinned MLIR: the test extra pins a CPU build of
# torch, which on a GPU machine would replace the user's CUDA build.
# (without pip's notices: a newer pip, running as root)
PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q -e .
tkc build "$@"
python3 -m tkc.bench
python3 bench/attention.py
python3 bench/memory_bound.py
python3 bench/linear_attention.py
python3 bench/fftconv.py
