#!/usr/bin/env bash
# A matmul family (FAMILY, default matmul-bf16; also matmul-f16, matmul-3xtf32-sm90) at shapes no record holds, as a
# user on a fresh cache gets it: one search per shape whose warm start is the shipped tuning data alone, its three
# best re-timed beside cuBLAS (in the family's precision) and every Triton config in one bench run, then all of them
# re-timed outside mage-tune's harness. From the repository root, after `source .whl/use-wheels.sh;
# export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc` (an empty cache: no tuning database yet):
#
#   OUT=$OUT/unseen SEARCH_S=150 bash benchmarks/gpu/unseen_shapes.sh 6144x4096x4096 3000x5000x3000 [...]
#   FAMILY=matmul-3xtf32-sm90 OUT=$OUT/unseen-fp32 bash benchmarks/gpu/unseen_shapes.sh 2560x3584x2304
#
#   search-MxNxK/         the run directory (trials.jsonl, report.md, best/); search-MxNxK.log its output
#   bench-MxNxK.json      the three best configs, cuBLAS BF16 and Triton's configs timed together (15 replays)
#   retime.json           benchmarks/gpu/retime_independent.py over every search here: the best 3, outside the harness
# Each step has its own time limit (a search that reaches it keeps its trials) and leaves its log whatever the others do.
# A search's limit covers its whole process, more than its progress line's time (at 5632 × 4608 × 3072: 100 trials
# in 110 s by the progress line, and a 130 s limit reached): give SEARCH_S 30 s or more beyond the trials.
# At the end the logs' last lines are printed and everything is packed into OUT/out.tar.xz (step.sh's bundle_out):
# the device returns at most 8 files, two folders down, and a search's run directory alone holds more. Unpack here
# with `mkdir -p runs/CAMPAIGN/callN && tar -xJf …/out.tar.xz -C runs/CAMPAIGN/callN`.
out=${OUT:-/tmp/w}
family=${FAMILY:-matmul-bf16}
mkdir -p "$out"

source "$(dirname "$0")/step.sh"  # step LOG SECONDS COMMAND...

searches=()
for shape in "$@"; do
  IFS=x read -r m n k <<< "$shape"
  step "search-$shape.log" "${SEARCH_S:-150}" python -m mage_tune search "$family" --m "$m" --n "$n" --k "$k" \
    --trials 100 --workers 8 --run-dir "$out/search-$shape"
  searches+=("$out/search-$shape")
  python analysis/top_configs.py "$out/search-$shape" --top 3 > "$out/top-$shape.json" 2> "$out/top-$shape.log" || continue
  step "bench-$shape.log" 80 python -m mage_tune bench "$family" --m "$m" --n "$n" --k "$k" \
    --configs "$out/top-$shape.json" --rounds 15 --out "$out/bench-$shape.json"
done
step retime.log "${RETIME_S:-120}" python benchmarks/gpu/retime_independent.py "${searches[@]}" --family "$family" \
  --top 3 --rounds 3 --json "$out/retime.json"
tail -n 4 "$out"/*.log
bundle_out "$out"
