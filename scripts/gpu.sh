#!/usr/bin/env bash
# On a GPU machine without MLIR (the lent H100): run the GPU tests, the
# benchmark, the paper's GEMM tables, ncu counters and compute-sanitizer from
# artifacts built elsewhere and carried along in .tkc-cache:
#   tkc build test/gpu/test_kernels_gpu.py test/gpu/test_tma_gpu.py \
#             test/gpu/test_wgmma_gpu.py bench/gemm_tables.py
# STEPS picks the steps (default: all, in this order); logs go to $OUT (or ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
export PYTHONPATH="$PWD" TKC_CACHE_DIR="$PWD/.tkc-cache" TKC_OFFLINE=1 PYTHONUNBUFFERED=1
STEPS="${STEPS:-tests bench tables ncu sanitizer}"
has() { [[ " $STEPS " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
# time limits: a kernel that deadlocks on a barrier must not eat the session
if has tests; then
  timeout 300 python3 -m pytest -q -rs -m gpu -p no:cacheprovider test/gpu 2>&1 | tee "$OUT/gpu-tests.log" | tail -15
fi
if has bench; then
  timeout 420 python3 -m tkc.bench --out "$OUT/bench.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
  timeout 60 python3 bench/launch_overhead.py 2>&1 | tee "$OUT/launch.log"
fi
if has tables; then
  timeout 480 python3 bench/gemm_tables.py --out "$OUT" ${TABLES_ARGS:-} 2>&1 | tee "$OUT/tables.log" | tail -60
fi
if has ncu; then
  M=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
  timeout 300 ncu --csv --page raw --print-units base -k regex:gemm_hopper --metrics "$M" \
    python3 scripts/ncu_order.py run > "$OUT/ncu-order.csv" 2> "$OUT/ncu-order.err"
  python3 scripts/ncu_order.py parse "$OUT/ncu-order.csv" | tee "$OUT/ncu-order.md"
  M=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
  M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
  timeout 120 ncu --metrics "$M" python3 scripts/ncu_banks.py > "$OUT/ncu-banks.log" 2>&1
  grep -E "^  [a-z_]+.*\(|bank_conflicts|wavefronts" "$OUT/ncu-banks.log" | tail -24
fi
if has sanitizer; then
  for tool in memcheck racecheck synccheck; do
    timeout 240 compute-sanitizer --tool $tool --report-api-errors no python3 scripts/sanitize.py \
      > "$OUT/sanitizer-$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $?; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1)"
  done
fi
