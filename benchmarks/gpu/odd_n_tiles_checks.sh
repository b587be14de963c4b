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
source "$here/step.sh"  # step LOG SECONDS COMMAND..., bench_if_passed CONFIGS SECONDS DEFAULTS [MxNxK...]

step gpu.log 150 python -m pytest -v -x -m gpu tests/kernels/test_gpu_matmul_bf16.py -n 4 --dist load \
  -k "every_knob or pingpong or stream_k or quads or bit_identical or tma_epilogue" -p no:cacheprovider
bench_if_passed "$here/configs/mm_bf16_odd_n_tiles.json" 60 "2900x4704x3104 5000x2600x4000" "$@"
