#!/usr/bin/env bash
# On a GPU machine without MLIR (the lent H100): run the GPU tests and the
# benchmark from artifacts built elsewhere (`tkc build test/gpu/test_{kernels,tma,wgmma}_gpu.py`
# into .tkc-cache, carried along), then ncu's shared-memory bank-conflict
# counters for the GEMMs. Logs go to $OUT (or ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
export PYTHONPATH="$PWD" TKC_CACHE_DIR="$PWD/.tkc-cache" TKC_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
# time limits: a kernel that deadlocks on a barrier must not eat the session
timeout 300 python3 -m pytest -q -rs -m gpu -p no:cacheprovider test/gpu 2>&1 | tee "$OUT/gpu-tests.log"
timeout 300 python3 -m tkc.bench --out "$OUT/bench.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
timeout 60 python3 bench/launch_overhead.py 2>&1 | tee "$OUT/launch.log"
if [ -z "${NO_NCU:-}" ]; then
  M=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
  M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
  ncu --metrics "$M" python3 scripts/ncu_banks.py > "$OUT/ncu-banks.log" 2>&1
  grep -E "^  [a-z_]+.*\(|bank_conflicts|wavefronts" "$OUT/ncu-banks.log" | tail -40
fi
