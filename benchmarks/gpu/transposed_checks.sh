#!/usr/bin/env bash
# One device call's checks of matmul-bf16's transposed kernel (tiles of Cᵀ = Bᵀ·Aᵀ, bn along C's M) and of pairs side
# by side (pairing=beside), under $OUT
# (default /tmp/w). From the repository root, after
# `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/tr bash benchmarks/gpu/transposed_checks.sh [MxNxK ...]
#
#   gpu.log            the GPU tests of the transposed kernel (ragged shapes, three dtypes), of pairs side by side,
#                      and the repeats
#   bench-MxNxK.json   configs/mm_bf16_transposed.json (either orientation alone, in pairs one above the other or
#                      side by side, and in quads) beside cuBLAS BF16
# Each step has its own time limit and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # checks TESTS_K CONFIGS DEFAULTS [MxNxK...]

CHECKS_WORKERS=6 CHECKS_BENCH_S=60 checks "transposed or side_by_side or bit_identical" \
  "$here/configs/mm_bf16_transposed.json" "2900x4704x3104 3328x5560x2816 4096x4096x4096 8192x8192x2048" "$@"
