#!/usr/bin/env bash
# Odd shapes and the matmul space checked; planted defects caught; one variant timed in three
# separate processes minutes apart; the large layer-norm shape against the copy ceiling.
set -uo pipefail
OUT=${OUT:-runs}; mkdir -p "$OUT"
mt() { python -m mage_tune "$@"; }
for d in 700 1000 4100; do
  mt bench layernorm --d $d --m 1024 --all --sample 150 --check-only --baselines none --out "$OUT/ln_d${d}_check.json" > "$OUT/ln_d${d}_check.txt" 2>&1
done
mt bench matmul --m 1024 --n 1024 --k 1024 --all --sample 320 --check-only --baselines none --out "$OUT/mm_1024_check.json" > "$OUT/mm_1024_check.txt" 2>&1
mt bench matmul --m 1000 --n 1000 --k 1000 --all --sample 120 --check-only --baselines none --out "$OUT/mm_1000_check.json" > "$OUT/mm_1000_check.txt" 2>&1
mt bench matmul --m 513 --n 257 --k 129 --all --sample 80 --check-only --baselines none --out "$OUT/mm_odd_check.json" > "$OUT/mm_odd_check.txt" 2>&1
P=benchmarks/planted
mt bench matmul --m 1024 --n 1024 --k 1024 --set bm=64 --set bn=64 --set tm=4 --set tn=4 --set stages=2 \
  --source $P/matmul_wrong_last_tile.cu --source $P/matmul_out_of_bounds.cu --source $P/matmul_infinite_loop.cu \
  --timeout 20 --baselines torch --out "$OUT/planted.json" > "$OUT/planted.txt" 2>&1
SEED="--set threads=128 --set rows=1 --set vec=16 --set passes=regs --set reduce=shfl --set rsqrt=approx --set hint=none"
for i in 1 2 3; do
  mt bench layernorm --d 768 --m 4096 $SEED --regime both --out "$OUT/stability_$i.json" > "$OUT/stability_$i.txt" 2>&1
  [ $i -lt 3 ] && sleep ${STABILITY_GAP_S:-60}
done
mt bench layernorm --d 4096 --m 16384 --all --sample 24 --regime cold --out "$OUT/ln_16384x4096.json" > "$OUT/ln_16384x4096.txt" 2>&1
tail -n 4 "$OUT"/*_check.txt; tail -n 12 "$OUT"/planted.txt "$OUT"/stability_*.txt
