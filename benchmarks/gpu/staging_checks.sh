#!/usr/bin/env bash
# One device call's checks of matmul-bf16's one-chunk staging (staging=1: the TMA-store epilogue's 8 KB per consumer
# warpgroup, a fifth stage for 128 × 192 tiles), under $OUT (default /tmp/w). From the repository root, after
# `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/st bash benchmarks/gpu/staging_checks.sh [MxNxK ...]
#
#   gpu.log            the GPU tests of every knob value, of the TMA-store epilogue (both output dtypes) and the repeats
#   bench-MxNxK.json   configs/mm_bf16_one_staging_chunk.json beside cuBLAS BF16
#   retime.json        the six fastest of each bench re-timed outside the harness
# Each step has its own time limit and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # checks TESTS_K CONFIGS DEFAULTS [MxNxK...]

CHECKS_RETIME_TOP=6 checks "every_knob_value or tma_epilogue or bit_identical" \
  "$here/configs/mm_bf16_one_staging_chunk.json" "4500x3000x2200 2500x4600x3000" "$@"
