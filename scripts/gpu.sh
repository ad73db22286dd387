#!/usr/bin/env bash
# On a GPU machine without MLIR (the lent H100): run the GPU tests and the
# benchmark from artifacts built elsewhere (carry .tkc-cache). Logs go to
# $OUT (or ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
export PYTHONPATH="$PWD" TKC_CACHE_DIR="$PWD/.tkc-cache" TKC_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
python3 -m pytest -q -rs -m gpu -p no:cacheprovider test/gpu 2>&1 | tee "$OUT/gpu-tests.log"
python3 -m tkc.bench --out "$OUT/bench.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
