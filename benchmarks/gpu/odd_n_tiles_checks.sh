#!/usr/bin/env bash
# One device call's checks of matmul-bf16's tiles whose bn is not a multiple of 64 (160, 224: the last B box copied
# whole, C's columns past the last whole store chunk stored from registers), under $OUT (default /tmp/w). From the
# repository root, after `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/odd bash benchmarks/gpu/odd_n_tiles_checks.sh [MxNxK ...]
#
#   gpu.log            the GPU tests that launch every knob value, ping-pong, stream-K, quads and repeats
#   bench-MxNxK.json   configs/mm_bf16_odd_n_tiles.json (the two unseen searches' winners beside 224- and 160-column
#                      tiles alone, as pairs and quads, with stream-K) and cuBLAS BF16, at ragged shapes
# Each step has its own time limit and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # checks TESTS_K CONFIGS DEFAULTS [MxNxK...]

CHECKS_TESTS_S=150 CHECKS_WORKERS=4 CHECKS_BENCH_S=60 checks \
  "every_knob or pingpong or stream_k or quads or bit_identical or tma_epilogue" \
  "$here/configs/mm_bf16_odd_n_tiles.json" "2900x4704x3104 5000x2600x4000" "$@"
