#!/usr/bin/env bash
# One device call's look at matmul-bf16's tiles that fill whole waves of SMs (either orientation, alone, in pairs or
# quads, or stream-K), in mage-tune's harness and outside it, under $OUT (default /tmp/w). From the repository root,
# after `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/ww bash benchmarks/gpu/whole_waves_checks.sh [MxNxK ...]
#
#   gpu.log            the GPU tests of pairs side by side (three dtypes) and the repeats (every element of C written)
#   bench-MxNxK.json   configs/mm_bf16_whole_waves.json beside cuBLAS BF16
#   retime.json        the six fastest of each bench re-timed outside the harness (cold, warm and graph replays)
# Each step has its own time limit and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # checks TESTS_K CONFIGS DEFAULTS [MxNxK...]

CHECKS_WORKERS=6 CHECKS_BENCH_S=120 CHECKS_RETIME_TOP=6 CHECKS_REGIMES=warm,graph \
  checks "side_by_side or bit_identical" \
  "$here/configs/mm_bf16_whole_waves.json" "4500x3000x2200" "$@"
