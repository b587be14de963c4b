#!/usr/bin/env bash
# Where the FP32-accurate wgmma family's time goes, at a config of it (CONFIG, knob=value words; default the family's
# default): the pre-pass's share of a call (split_share.py, beside cuBLAS FP32) at each shape, then at the first shape
# the user's path: `mage-tune bench` of that config beside cuBLAS FP32, `mage-tune counters` of one call (pre-pass and
# main kernel) and of cuBLAS FP32, and `mage-tune explain` of the bench with those counters (the busiest units). From
# the repository root, after `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/fp32 CONFIG="bm=128 bn=128 chain=1" bash benchmarks/gpu/fp32_profile.sh 3072x2304x3840 2048x2048x2048
#
# BASELINES: the bench's baseline kinds (default torch,context: cuBLAS FP32 and TF32; triton adds Triton's configs).
#
#   split.json        split_share.py's rows (whole call, pre-pass alone, cuBLAS FP32; error)
#   bench.json, counters.json, explain.log    the first shape's bench record, counters record and explanation
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # step LOG SECONDS COMMAND...

[ $# -gt 0 ] || set -- 3072x2304x3840
sets=()
for word in ${CONFIG:-}; do sets+=(--set "$word"); done
step split.log 200 python "$here/split_share.py" "$@" "${sets[@]}" --json "$out/split.json"
IFS=x read -r m n k <<< "$1"
dims=(--m "$m" --n "$n" --k "$k")
step bench.log 150 python -m mage_tune bench matmul-3xtf32-sm90 "${dims[@]}" "${sets[@]}" --rounds 15 \
  --baselines "${BASELINES:-torch,context}" --out "$out/bench.json"
step counters.log 200 python -m mage_tune counters matmul-3xtf32-sm90 "${dims[@]}" "${sets[@]}" \
  --baseline "torch.matmul (cuBLAS FP32)" --out "$out/counters.json"
step explain.log 60 python -m mage_tune explain "$out/bench.json" --counters "$out/counters.json" --wide
tail -n 8 "$out"/*.log
