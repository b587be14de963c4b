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
source "$here/step.sh"  # step, bench_if_passed, retime_benches

step gpu.log "${TESTS_S:-200}" python -m pytest -v -x -m gpu tests/kernels/test_gpu_matmul_bf16.py -n 8 --dist load \
  -k "columns or every_knob_value or bit_identical" -p no:cacheprovider
bench_if_passed "$here/configs/mm_bf16_split_columns.json" 70 "4500x3000x2200 2500x4600x3000" "$@"
