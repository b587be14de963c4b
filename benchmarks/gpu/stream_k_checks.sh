#!/usr/bin/env bash
# One device call's checks of matmul-bf16's stream-K share, and the independent re-timing of the BF16 search winners,
# under $OUT (default /tmp/w). Each step has its own time limit and leaves its log whatever the others do. From the
# repository root, after `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/checks bash benchmarks/gpu/stream_k_checks.sh      (at most 530 s of steps: a call of its own)
#
#   stream-k.log  the stream-K configs at ragged shapes (fewer tiles than SMs, a tail over full waves, a tail of fewer
#                 k-tiles than blocks), bit-identical repeats, and every knob value
#   bench-*.json  stream_k 0 and 1 at 128 × 192 and 128 × 256 beside cuBLAS BF16 and Triton's matmuls, at shapes
#                 whose last wave is part-full
#   retime.json   benchmarks/gpu/retime_independent.py: the best 3 configs of each BF16 search of the published
#                 records, re-timed outside mage-tune's harness beside cuBLAS BF16
out=${OUT:-/tmp/w}
mkdir -p "$out"

source "$(dirname "$0")/step.sh"  # step LOG SECONDS COMMAND...

step stream-k.log 200 python -m pytest -v -m gpu tests/kernels/test_gpu_matmul_bf16.py \
  -k "stream_k or knob_value or bit_identical or cover" -p no:cacheprovider
for shape in "8192 8192 2048" "4224 2304 4096"; do
  read -r m n k <<< "$shape"
  step "bench-m${m}n${n}k${k}.log" 70 python -m mage_tune bench mage_tune/kernels/matmul_bf16.py --m "$m" --n "$n" \
    --k "$k" --set bn=192,256 --set stream_k=0,1 --rounds 7 --out "$out/bench-m${m}n${n}k${k}.json"
done
runs=/tmp/bf16-records
for campaign in h200-2026-12-03-bf16-large-shapes h200-2026-12-03-pingpong; do
  python analysis/archives.py extract "records/$campaign.tar.xz" "$runs/$campaign" > /dev/null
done
mapfile -t searches < <(find "$runs" -name trials.jsonl -path "*search*" -printf '%h\n' | sort)
step retime.log 190 python benchmarks/gpu/retime_independent.py "${searches[@]}" --family \
  mage_tune/kernels/matmul_bf16.py --top 3 --rounds 3 --json "$out/retime.json"
