#!/usr/bin/env bash
# One device call's checks of matmul-bf16 at K or N off a tensor map's 16-byte pitch (not multiples of 8), where the
# variant runs on zero-padded copies (PaddedLauncher: A where K is off, B and C where N is), under $OUT (default /tmp/w). From the repository
# root, after `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/pitch bash benchmarks/gpu/off_pitch_checks.sh      (at most 560 s of steps: a call of its own)
#
#   pitch.log            the GPU tests: padded copies at three shapes (K and N off, K alone, N alone) for both
#                        output dtypes, bit-identical repeats on them
#   bench-MxNxK.json     the default tile alone, as a pair and as a quad beside cuBLAS BF16 and the Triton tutorial
#                        matmul (Triton's TMA matmul cannot take such a pitch either), at an off-pitch shape (K and
#                        N off, K alone, N alone) and at its padded neighbour, to show what the copies cost
#   unseen/              unseen_shapes.sh at the off-pitch shape: a 100-trial search from the shipped data,
#                        its best re-timed in the harness and outside it (SEARCH=0: not run)
# Each step has its own time limit and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"

source "$(dirname "$0")/step.sh"  # step LOG SECONDS COMMAND...

step pitch.log 200 python -m pytest -v -x -m gpu tests/kernels/test_gpu_matmul_bf16.py \
  -k "pitch or bit_identical" -p no:cacheprovider
if ! grep -q "failed\|error" "$out/pitch.log"; then
  cat > "$out/configs.json" <<'JSON'
[
 {"bm": 128, "bn": 256, "cluster": 1, "multicast": 0},
 {"bm": 128, "bn": 256, "cluster": 2, "multicast": 1},
 {"bm": 128, "bn": 256, "cluster": 4, "multicast": 1}
]
JSON
  for shape in 2900x4700x3100 2900x4704x3100 2900x4700x3104 2900x4704x3104; do
    IFS=x read -r m n k <<< "$shape"
    step "bench-$shape.log" 60 python -m mage_tune bench matmul-bf16 --m "$m" --n "$n" --k "$k" \
      --configs "$out/configs.json" --rounds 7 --out "$out/bench-$shape.json"
  done
  [ "${SEARCH:-1}" = 0 ] && exit 0
  OUT="$out/unseen" SEARCH_S=130 RETIME_S=60 bash "$(dirname "$0")/unseen_shapes.sh" 2900x4700x3100
fi
