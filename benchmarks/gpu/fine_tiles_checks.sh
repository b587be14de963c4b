#!/usr/bin/env bash
# One device call's checks of matmul-bf16's tile widths of any multiple of 8 (the last B box read in part, C's columns
# past the last whole store chunk from registers), under $OUT (default /tmp/w). From the repository root, after
# `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/fine SEARCH="2900x4704x3104" bash benchmarks/gpu/fine_tiles_checks.sh [MxNxK ...]
#
#   gpu.log            the GPU tests that launch every knob value (each fine width with both epilogues), the TMA
#                      epilogue's, FP32 output's and the repeats
#   bench-MxNxK.json   configs/mm_bf16_fine_tiles.json (widths whose tile counts fill whole waves at the shapes
#                      named here, as pairs and quads, beside 224 and 256) and cuBLAS BF16
#   unseen/            bf16_unseen_shapes.sh at each shape of $SEARCH (a 100-trial search from the shipped data)
# Each step has its own time limit and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # step LOG SECONDS COMMAND...

step gpu.log 200 python -m pytest -v -x -m gpu tests/kernels/test_gpu_matmul_bf16.py -n 4 --dist load \
  -k "every_knob or tma_epilogue or fp32_output or bit_identical or cover" -p no:cacheprovider
if ! grep -q "failed\|error" "$out/gpu.log"; then
  shapes=("$@")
  [ ${#shapes[@]} -eq 0 ] && shapes=(2900x4704x3104 5000x2600x4000 3000x5000x3000 3700x3300x2300)
  for shape in "${shapes[@]}"; do
    IFS=x read -r m n k <<< "$shape"
    step "bench-$shape.log" 60 python -m mage_tune bench matmul-bf16 --m "$m" --n "$n" --k "$k" \
      --configs "$here/configs/mm_bf16_fine_tiles.json" --baselines torch --rounds 5 --out "$out/bench-$shape.json"
  done
  if [ -n "${SEARCH:-}" ]; then
    # shellcheck disable=SC2086  # the shapes are words
    OUT=$out/unseen SEARCH_S=${SEARCH_S:-120} RETIME_S=${RETIME_S:-80} bash "$here/bf16_unseen_shapes.sh" $SEARCH
  fi
fi
