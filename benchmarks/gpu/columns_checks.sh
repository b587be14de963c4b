#!/usr/bin/env bash
# One device call's checks of matmul-bf16's consumers that split a tile's columns (split=columns: every row, bn / 2
# columns each; 192-row tiles), under $OUT (default /tmp/w). From the repository root, after
# `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/sc bash benchmarks/gpu/columns_checks.sh [MxNxK ...]
#
#   gpu.log            the GPU tests of the column split (three dtypes, ragged and off-pitch shapes), every knob
#                      value and the repeats
#   bench-MxNxK.json   configs/mm_bf16_split_columns.json beside cuBLAS BF16
# Each step has its own time limit and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # checks TESTS_K CONFIGS DEFAULTS [MxNxK...]

CHECKS_TESTS_S=${TESTS_S:-200} CHECKS_BENCH_S=70 checks "columns or every_knob_value or bit_identical" \
  "$here/configs/mm_bf16_split_columns.json" "4500x3000x2200 2500x4600x3000" "$@"
