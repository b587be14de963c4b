#!/usr/bin/env bash
# matmul-bf16 at shapes no record holds, as a user on a fresh H200 cache gets it: one search per shape whose warm start
# is the shipped H200 data alone, its three best re-timed beside cuBLAS BF16 and every Triton config in one bench run,
# then all of them re-timed outside mage-tune's harness. From the repository root, after `source .whl/use-wheels.sh;
# export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc` (an empty cache: no tuning database yet):
#
#   OUT=$OUT/unseen SEARCH_S=150 bash benchmarks/gpu/bf16_unseen_shapes.sh 6144x4096x4096 3000x5000x3000 [...]
#
#   search-MxNxK/         the run directory (trials.jsonl, report.md, best/); search-MxNxK.log its output
#   bench-MxNxK.json      the three best configs, cuBLAS BF16 and Triton's configs timed together (15 replays)
#   retime.json           benchmarks/gpu/retime_independent.py over every search here: the best 3, outside the harness
# Each step has its own time limit (a search that reaches it keeps its trials) and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"

source "$(dirname "$0")/step.sh"  # step LOG SECONDS COMMAND...

searches=()
for shape in "$@"; do
  IFS=x read -r m n k <<< "$shape"
  step "search-$shape.log" "${SEARCH_S:-150}" python -m mage_tune search matmul-bf16 --m "$m" --n "$n" --k "$k" \
    --trials 100 --workers 8 --run-dir "$out/search-$shape"
  searches+=("$out/search-$shape")
  python analysis/top_configs.py "$out/search-$shape" --top 3 > "$out/top-$shape.json" 2> "$out/top-$shape.log" || continue
  step "bench-$shape.log" 80 python -m mage_tune bench matmul-bf16 --m "$m" --n "$n" --k "$k" \
    --configs "$out/top-$shape.json" --rounds 15 --out "$out/bench-$shape.json"
done
step retime.log "${RETIME_S:-120}" python benchmarks/gpu/retime_independent.py "${searches[@]}" --family matmul-bf16 \
  --top 3 --rounds 3 --json "$out/retime.json"
