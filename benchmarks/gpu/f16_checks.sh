#!/usr/bin/env bash
# One device call's checks of matmul-f16 (matmul-bf16's kernels on FP16 inputs and output), under $OUT (default
# /tmp/w). From the repository root, after `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
# MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/f16 bash benchmarks/gpu/f16_checks.sh      (at most 430 s of steps)
#
#   f16.log                  the FP16 GPU tests: every knob value at ragged shapes, padded copies off the pitch,
#                            bit-identical repeats, Triton's TMA matmul in FP16, a timed run at 4096³
#   search-MxNxK/            a 100-trial search at a shape no record holds, warm-started from matmul-bf16's shipped
#                            trials; bench-MxNxK.json its best 3 beside cuBLAS FP16 and Triton in one bench run
# Each step has its own time limit and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"

source "$(dirname "$0")/step.sh"  # step LOG SECONDS COMMAND...

step f16.log 200 python -m pytest -v -x -m gpu tests/kernels/test_gpu_matmul_bf16.py -k "fp16" -p no:cacheprovider
if ! grep -q "failed\|error" "$out/f16.log"; then
  shape=${SHAPE:-3000x4096x3584}
  IFS=x read -r m n k <<< "$shape"
  step "search-$shape.log" "${SEARCH_S:-130}" python -m mage_tune search matmul-f16 --m "$m" --n "$n" --k "$k" \
    --trials 100 --workers 8 --run-dir "$out/search-$shape"
  python analysis/top_configs.py "$out/search-$shape" --top 3 > "$out/top-$shape.json" 2> "$out/top-$shape.log" &&
    step "bench-$shape.log" 70 python -m mage_tune bench matmul-f16 --m "$m" --n "$n" --k "$k" \
      --configs "$out/top-$shape.json" --rounds 15 --out "$out/bench-$shape.json"
fi
