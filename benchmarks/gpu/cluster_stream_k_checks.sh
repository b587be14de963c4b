#!/usr/bin/env bash
# One device call's checks of matmul-bf16's stream-K walked by clusters (a multicast pair or quad shares the last
# wave's k-tiles as one walker), under $OUT (default /tmp/w). From the repository root, after
# `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/sk bash benchmarks/gpu/cluster_stream_k_checks.sh [MxNxK ...]
#
#   gpu.log            the GPU tests of stream-K (every walker kind at ragged shapes), repeats and the cover
#   bench-MxNxK.json   configs/mm_bf16_cluster_stream_k.json (pairs and quads with and without stream-K, 160- to
#                      256-column tiles) beside cuBLAS BF16
# Each step has its own time limit and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # checks TESTS_K CONFIGS DEFAULTS [MxNxK...]

CHECKS_TESTS_S=200 CHECKS_WORKERS=4 CHECKS_BENCH_S=70 checks "stream_k or bit_identical or cover" \
  "$here/configs/mm_bf16_cluster_stream_k.json" "2900x4704x3104 5000x2600x4000 8192x8192x2048" "$@"
