#!/usr/bin/env bash
# On a GPU machine without MLIR (the lent H100): run the GPU tests, the
# benchmark, the paper's GEMM tables, ncu counters and compute-sanitizer from
# artifacts built elsewhere and carried along in .tkc-cache:
#   tkc build --prune test/gpu/test_*.py bench/*.py
# STEPS picks the steps (default: all, in this order). Everything printed goes
# to $OUT/log.txt (or ./gpu-out); JSON results and PNG plots beside it. The
# memory step compares with flash-linear-attention when .fla/ holds its wheels
# (pip download --no-deps fla-core==0.6.0 einops -d .fla), carried along.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
LOG="$OUT/log.txt"; TMP="$(mktemp -d)"
export PYTHONPATH="$PWD" TKC_CACHE_DIR="$PWD/.tkc-cache" TKC_OFFLINE=1 PYTHONUNBUFFERED=1
STEPS="${STEPS:-tests attention linear fftconv sanitizer memory bench tables ncu profile ncu-linear}"
has() { [[ " $STEPS " == *" $1 "* ]]; }
say() { echo "== $*" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee -a "$LOG"
# time limits: a kernel that deadlocks on a barrier must not eat the session
# (the GPU tests take ~80 s warm; on a fresh machine FLA's Triton kernels and
# torch.compile's graphs compile first: one such run passed 300 s); within
# them, one test past TKC_GPU_TEST_TIMEOUT (240 s) ends the run with its
# stack (test/gpu/conftest.py)
fla_path() {  # flash-linear-attention from its carried wheels (pip download fla-core einops -d .fla)
  if ls .fla/*.whl > /dev/null 2>&1 && [ ! -d "$TMP/fla" ]; then
    pip install -q --no-index --no-deps --target "$TMP/fla" .fla/*.whl >> "$LOG" 2>&1
  fi
  [ -d "$TMP/fla" ] && export PYTHONPATH="$PYTHONPATH:$TMP/fla"
}
if has tests; then
  fla_path
  say "GPU tests"
  timeout ${TESTS_TIMEOUT:-480} python3 -m pytest -q -rs -m gpu -p no:cacheprovider ${TEST_ARGS:-test/gpu} >> "$LOG" 2>&1
  grep -E "^FAILED|^ERROR|passed|failed" "$LOG" | tail -40
fi
if has attention; then
  say "tkc.attention next to SDPA (cuDNN, flash) and FlexAttention"
  timeout 420 python3 bench/attention.py --out "$OUT/attention.json" ${ATTENTION_ARGS:-} 2>&1 | tee -a "$LOG"
fi
if has linear; then
  say "linear attention (tkc.based, tkc.linear_attention) next to flash-linear-attention"
  fla_path
  timeout 420 python3 bench/linear_attention.py --out "$OUT/linear.json" ${LINEAR_ARGS:-} 2>&1 | tee -a "$LOG"
fi
if has fftconv; then
  say "FFT convolution (tkc.fftconv) next to torch.fft"
  timeout 300 python3 bench/fftconv.py --out "$OUT/fftconv.json" ${FFTCONV_ARGS:-} 2>&1 | tee -a "$LOG"
fi
if has sanitizer; then
  for tool in ${SANITIZERS:-memcheck racecheck synccheck}; do
    timeout 240 compute-sanitizer --tool $tool --report-api-errors no python3 -m tkc.bench.sanitize \
      ${SANITIZE_ARGS:-} > "$TMP/sanitizer.log" 2>&1
    echo "compute-sanitizer $tool: exit $?; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$TMP/sanitizer.log" | tail -1)" | tee -a "$LOG"
    grep -E "WRONG|Error|error" "$TMP/sanitizer.log" | head -5 | tee -a "$LOG"
  done
fi
if has memory; then
  say "memory-bound kernels next to a copy, flash-linear-attention and torch.compile"
  fla_path
  # its torch.compile peer compiles about a dozen graphs (minutes): MEMORY_ARGS=--no-compile skips it
  timeout 570 python3 bench/memory_bound.py --out "$OUT/memory.json" ${MEMORY_ARGS:-} 2>&1 | tee -a "$LOG"
fi
if has bench; then
  say "benchmark"
  timeout 420 python3 -m tkc.bench --out "$OUT/bench.json" ${BENCH_ARGS:-} 2>&1 | tee -a "$LOG"
  timeout 60 python3 bench/launch_overhead.py 2>&1 | tee -a "$LOG"
fi
if has tables; then
  say "GEMM tables"
  timeout 480 python3 bench/gemm_tables.py --out "$OUT" ${TABLES_ARGS:-} 2>&1 | tee -a "$LOG" | tail -60
  rm -f "$OUT/gemm_tables.md"  # its text is in the log
fi
if has ncu; then
  say "ncu: HBM traffic of the block orders"
  M=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
  timeout 300 ncu --csv --page raw --print-units base -k regex:gemm_hopper --metrics "$M" \
    python3 -m tkc.bench.ncu order > "$TMP/order.csv" 2> "$TMP/order.err"
  echo "ncu exit $?" | tee -a "$LOG"
  python3 -m tkc.bench.ncu order-table "$TMP/order.csv" 2>&1 | tee -a "$LOG"
  cp "$TMP/order.csv" "$OUT/ncu-order.csv"; tail -3 "$TMP/order.err" >> "$LOG"
  say "ncu: shared-memory bank conflicts"
  M=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
  M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
  timeout 120 ncu -k regex:"gemm|attn" --metrics "$M" python3 -m tkc.bench.ncu banks > "$TMP/banks.log" 2>&1
  grep -E "^  [a-z_]+.*\(|bank_conflicts|wavefronts" "$TMP/banks.log" | grep -v "at::" | tail -24 | tee -a "$LOG"
fi
if has profile; then
  say "ncu: tkc.attention forward and backward (D128, L4096)"
  timeout 240 ncu -k regex:attn_ --launch-count 4 --section SpeedOfLight --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section Occupancy --profile-from-start off \
    python3 -m tkc.bench.ncu attention > "$OUT/ncu-attention.txt" 2>&1
  echo "ncu exit $?" | tee -a "$LOG"
  grep -E "^  attn_|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Executed Ipc A|Stall|Registers Per|Achieved Occupancy" \
    "$OUT/ncu-attention.txt" | head -60 | tee -a "$LOG"
  say "ncu: rotary next to a copy and torch.compile's (B16 H16 L4096 D128)"
  OUT="$OUT" timeout 300 ncu --profile-from-start off --section SpeedOfLight --section Occupancy \
    python3 -m tkc.bench.ncu rotary > "$OUT/ncu-rotary.txt" 2>&1
  echo "ncu exit $?" | tee -a "$LOG"
  grep -E "^  [a-z_]|Duration|DRAM Throughput|L1/TEX Cache Throughput|Registers Per|Achieved Occupancy" \
    "$OUT/ncu-rotary.txt" | head -40 | tee -a "$LOG"
fi
if has ncu-linear; then
  say "ncu: Based, the SSD form and Hedgehog: warp stall samples by SASS instruction"
  timeout 300 ncu --profile-from-start off --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section SourceCounters -f -o "$TMP/linear" python3 -m tkc.bench.ncu linear > "$OUT/ncu-linear.txt" 2>&1
  echo "ncu exit $?" | tee -a "$LOG"
  ncu -i "$TMP/linear.ncu-rep" >> "$OUT/ncu-linear.txt" 2>&1
  ncu -i "$TMP/linear.ncu-rep" --page source --csv --print-source sass > "$TMP/linear-src.csv" 2>> "$LOG"
  python3 -m tkc.bench.ncu stalls "$TMP/linear-src.csv" 16 > "$OUT/ncu-linear-stalls.txt" 2>&1
  grep -E "^  [a-z_]|Duration|DRAM Throughput|Compute \(SM\) Throughput|Warp Cycles Per Issued|Achieved Occupancy" \
    "$OUT/ncu-linear.txt" | head -40 | tee -a "$LOG"
  head -20 "$OUT/ncu-linear-stalls.txt" | tee -a "$LOG"
fi
