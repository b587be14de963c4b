#!/usr/bin/env bash
# One device call's look at where matmul-bf16's time goes as K grows, beside cuBLAS's (analysis/k_sweep.py fits each
# variant's time as a fixed part plus a cost per 64 of K), under $OUT (default /tmp/w). From the repository root, after
# `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/ks bash benchmarks/gpu/k_sweep_checks.sh [MxNxK ...]
#   K_SWEEP_CONFIGS=benchmarks/gpu/configs/mm_bf16_quad_stream_k.json K_SWEEP_TESTS="stream_k or bit_identical" \
#     OUT=$OUT/ks bash benchmarks/gpu/k_sweep_checks.sh 4500x3000x2200 4500x3000x4400 4500x3000x8800
#
# K_SWEEP_CONFIGS and K_SWEEP_TESTS (a pytest -k expression) replace the configs and the GPU tests named below.
#
#   gpu.log            the GPU tests of a staggered second consumer and of consumers splitting a tile's columns (three
#                      dtypes), every knob value and the repeats
#   bench-MxNxK.json   configs/mm_bf16_k_sweep.json (the short-K shapes' quads with and without stagger, ping-pong
#                      128 × 128 tiles, the 192 × 192 column split) beside cuBLAS BF16 at 4500 × 3000 × K for four K
#                      or the shapes given
#   k_sweep.md         analysis/k_sweep.py's tables of the benches
# Each step has its own time limit (at most 220 + 4 × 70 + 30 s) and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # checks TESTS_K CONFIGS DEFAULTS [MxNxK...]

CHECKS_TESTS_S=220 CHECKS_BENCH_S=70 checks \
  "${K_SWEEP_TESTS:-stagger or columns or lap_the_ring or every_knob_value or bit_identical}" \
  "${K_SWEEP_CONFIGS:-$here/configs/mm_bf16_k_sweep.json}" \
  "4500x3000x1100 4500x3000x2200 4500x3000x4400 4500x3000x8800" "$@"
benches=("$out"/bench-*.json)
if [ -e "${benches[0]}" ]; then
  step k_sweep.log 30 python "$here/../../analysis/k_sweep.py" "$out" --markdown "$out/k_sweep.md" \
    --json "$out/k_sweep.json"
fi
