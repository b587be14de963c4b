#!/usr/bin/env bash
# One device call's checks of matmul-bf16's 192-row tiles (three consumer warpgroups, or one of three m64 tiles),
# under $OUT (default /tmp/w). From the repository root, after `source .whl/use-wheels.sh; export
# PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/rows192 bash benchmarks/gpu/rows_192_checks.sh [MxNxK ...]
#
#   gpu.log            the GPU tests that launch every knob value, stream-K, quads and repeats
#   bench-MxNxK.json   configs/mm_bf16_192_rows.json (the quads that won the ragged searches, 192 × 192 and 192 × 128
#                      alone, as a pair, as a quad, with stream-K) beside cuBLAS BF16 at ragged shapes
# Each step has its own time limit and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # step LOG SECONDS COMMAND...

step gpu.log 240 python -m pytest -v -x -m gpu tests/kernels/test_gpu_matmul_bf16.py -n 4 --dist load \
  -k "every_knob or stream_k or quads or bit_identical" -p no:cacheprovider
if ! grep -q "failed\|error" "$out/gpu.log"; then
  shapes=("$@")
  [ ${#shapes[@]} -eq 0 ] && shapes=(4500x3000x2200 2500x4600x3000 3000x5000x3000 2900x4704x3104)
  for shape in "${shapes[@]}"; do
    IFS=x read -r m n k <<< "$shape"
    step "bench-$shape.log" 75 python -m mage_tune bench matmul-bf16 --m "$m" --n "$n" --k "$k" \
      --configs "$here/configs/mm_bf16_192_rows.json" --baselines torch --rounds 5 --out "$out/bench-$shape.json"
  done
fi
