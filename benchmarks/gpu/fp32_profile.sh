#!/usr/bin/env bash
# Where the FP32-accurate wgmma family's time goes, at its default config: the pre-pass's share of a call
# (split_share.py, beside cuBLAS FP32) at each shape, then Nsight Compute's counters of one call (pre-pass and main
# kernel) and of cuBLAS FP32 at the first shape: speed of light, memory tables (shared-memory bank reads and writes)
# and compute (pipe utilisation, the tensor pipe's included). From the repository root, after `source
# .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/fp32 bash benchmarks/gpu/fp32_profile.sh 3072x2304x3840 2048x2048x2048 4096x4096x4096
#
#   split.json        split_share.py's rows (whole call, pre-pass alone, cuBLAS FP32; error)
#   ncu-MxNxK.csv     ncu's raw page, one row per profiled launch: the pre-pass, the main kernel, cuBLAS (order.json)
#   metrics.txt       the tensor-pipe and shared-memory metric names this ncu knows (for the next question)
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # step LOG SECONDS COMMAND...

[ $# -gt 0 ] || set -- 3072x2304x3840
step split.log 200 python "$here/split_share.py" "$@" --json "$out/split.json"
step metrics.log 60 sh -c "ncu --query-metrics --chip gh100 | grep -Ei 'gmma|data_bank|mem_shared' > '$out/metrics.txt'"
echo '[{}]' > "$out/configs.json"
IFS=x read -r m n k <<< "$1"
step "ncu-$1.log" 240 ncu --nvtx --nvtx-include mage-profile/ --clock-control none \
  --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis --csv --page raw \
  --log-file "$out/ncu-$1.csv" python "$here/profile_configs.py" matmul-3xtf32-sm90 --dims "m=$m,n=$n,k=$k" \
  --configs "$out/configs.json" --out "$out/order.json"
tail -n 8 "$out"/*.log
