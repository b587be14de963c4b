#!/usr/bin/env bash
# Why matmul-bf16 loses a third at an N that is not a multiple of 64 (3072 × 5000 × 3072: 171 µs against 129 at
# 3072 × 5120 × 3072, records/h200-2026-12-03-stream-k.tar.xz call4), read from Nsight Compute's counters: the same
# configs and cuBLAS at the aligned and the ragged shapes, one launch each (cold: ncu flushes the caches per pass),
# L2 requests and sectors, DRAM bytes and the units' throughput. From the repository root, after `source
# .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/counters bash benchmarks/gpu/ragged_n_counters.sh [MxNxK ...]
#
#   ncu-MxNxK.csv    ncu's raw page, one row per profiled launch, in the order of order-MxNxK.json
#   order-MxNxK.json what each row is (label, config, relative error against the float64 reference)
#   metrics.txt      the L2, TMA and tensor-pipe metric names this ncu knows (for the next question)
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # step LOG SECONDS COMMAND...

cat > "$out/configs.json" <<'JSON'
[
 {"bm": 128, "bn": 256, "cluster": 1, "multicast": 0, "epilogue": "tma"},
 {"bm": 128, "bn": 256, "cluster": 1, "multicast": 0, "epilogue": "direct"},
 {"bm": 128, "bn": 256, "cluster": 2, "multicast": 1, "epilogue": "tma"},
 {"bm": 128, "bn": 256, "cluster": 4, "multicast": 1, "epilogue": "tma"},
 {"bm": 256, "bn": 128, "cluster": 1, "multicast": 0, "epilogue": "tma"}
]
JSON
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_requests.sum,lts__t_sectors.sum
metrics=$metrics,lts__t_sectors_op_read.sum,lts__t_requests_op_read.sum,lts__t_sectors_op_write.sum
metrics=$metrics,lts__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_elapsed
metrics=$metrics,l1tex__m_xbar2l1tex_read_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
step metrics.log 60 sh -c "ncu --query-metrics --chip gh100 | grep -Ei 'lts__t_(req|sec)|tma|utma|gmma|xbar2' \
  > '$out/metrics.txt'"
shapes=("$@")
[ ${#shapes[@]} -eq 0 ] && shapes=(3072x5120x3072 3072x5000x3072 3000x5000x3000)
for shape in "${shapes[@]}"; do
  IFS=x read -r m n k <<< "$shape"
  step "ncu-$shape.log" 240 ncu --nvtx --nvtx-include mage-profile/ --clock-control none --metrics "$metrics" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --csv --page raw \
    --log-file "$out/ncu-$shape.csv" python "$here/profile_configs.py" matmul-bf16 --dims "m=$m,n=$n,k=$k" \
    --configs "$out/configs.json" --out "$out/order-$shape.json"
done
