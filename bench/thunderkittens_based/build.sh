#!/usr/bin/env bash
# Build ThunderKittens' own Based kernel as a standalone timing binary, to run
# beside tkc.based and FLA on the GPU machine (a peer for the Based rows of
# bench/linear_attention.py; BENCHMARKS.md, 2026-11-25). Not a ThunderKittens
# copy: only this harness; the kernel comes from a checkout of it:
#   bash bench/thunderkittens_based/build.sh TK_CHECKOUT OUT_DIR
# TK_CHECKOUT: a ThunderKittens checkout (HazyResearch/ThunderKittens). Its
# kernel (kernels/based/linear_attn.cu up to its PyTorch binding) gets
# main.cu's harness. The driver's two entry points it calls are linked
# against a stub libcuda (this machine has no driver); the GPU machine's own
# libcuda.so.1 is loaded at run time. Then on the GPU machine:
#   OUT_DIR/tk_based /tmp/tk.bin; python3 bench/thunderkittens_based/check.py /tmp/tk.bin
set -euo pipefail
TK=$(cd "$1" && pwd); OUTDIR=$(mkdir -p "$2" && cd "$2" && pwd); HERE=$(cd "$(dirname "$0")" && pwd)
SRC="$TK/kernels/based/linear_attn.cu"
sed '/#ifdef TK_COMPILE_BASED/,$d' "$SRC" | cat - "$HERE/main.cu" > "$OUTDIR/tk_based.cu"
printf 'int cuGetErrorString(int e, const char **s) { return 1; }\nint cuTensorMapEncodeTiled(void) { return 1; }\n' > "$OUTDIR/stub.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 "$OUTDIR/stub.c" -o "$OUTDIR/libcuda.so"
nvcc "$OUTDIR/tk_based.cu" -std=c++20 -O3 --use_fast_math --expt-extended-lambda --expt-relaxed-constexpr \
  -Xcompiler=-fno-strict-aliasing -Xptxas=-v -I"$TK/include" -I"$TK/prototype" -DNDEBUG -DKITTENS_HOPPER \
  -gencode arch=compute_90a,code=sm_90a -L"$OUTDIR" -lcuda -lcudart_static -o "$OUTDIR/tk_based" 2>&1 \
  | grep -E "registers|spill" || true
