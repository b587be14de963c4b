#!/usr/bin/env bash
# One device call's checks of matmul-bf16's 2 × 2 clusters (cluster=4: A shared along each tile row, B along each
# column), under $OUT (default /tmp/w). Each step has its own time limit and leaves its log whatever the others do.
# From the repository root, after `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
# MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/quad bash benchmarks/gpu/quad_checks.sh      (at most 560 s of steps: a call of its own)
#
#   quad.log        the quad's GPU tests first (ragged edges: odd last rows and columns of tiles, one tile, many
#                   groups per cluster), then every knob value and bit-identical repeats
#   bench-MxNxK.json 128 × 256 alone, as a multicast pair and as a quad, and 128 × 192 as a pair and as a quad,
#                   beside cuBLAS BF16 and Triton's matmuls, at the ragged shape and its aligned neighbours
out=${OUT:-/tmp/w}
mkdir -p "$out"

source "$(dirname "$0")/step.sh"  # step LOG SECONDS COMMAND...

step quad.log 240 python -m pytest -v -x -m gpu tests/kernels/test_gpu_matmul_bf16.py \
  -k "quads or knob_value or bit_identical or cover" -p no:cacheprovider
if ! grep -q "failed\|error" "$out/quad.log"; then
  cat > "$out/configs.json" <<'JSON'
[
 {"bm": 128, "bn": 256, "cluster": 1, "multicast": 0},
 {"bm": 128, "bn": 256, "cluster": 2, "multicast": 1},
 {"bm": 128, "bn": 256, "cluster": 4, "multicast": 1},
 {"bm": 128, "bn": 192, "cluster": 2, "multicast": 1},
 {"bm": 128, "bn": 192, "cluster": 4, "multicast": 1}
]
JSON
  for shape in 3000x5000x3000 3072x5000x3072 3072x5120x3072 8192x8192x2048; do
    IFS=x read -r m n k <<< "$shape"
    step "bench-$shape.log" 75 python -m mage_tune bench matmul-bf16 --m "$m" --n "$n" --k "$k" \
      --configs "$out/configs.json" --rounds 7 --out "$out/bench-$shape.json"
  done
fi
