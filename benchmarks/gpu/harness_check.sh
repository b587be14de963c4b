#!/usr/bin/env bash
# Issue 5: planted defects are caught; one variant timed in three separate processes minutes apart; big shapes.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
mt() { python -m mage_tune "$@"; }
P=benchmarks/planted
mt bench matmul --m 1024 --n 1024 --k 1024 --set bm=64 --set bn=64 --set tm=4 --set tn=4 --set stages=2 \
  --source $P/matmul_wrong_last_tile.cu --source $P/matmul_out_of_bounds.cu --source $P/matmul_infinite_loop.cu \
  --timeout 20 --baselines torch --out "$OUT/planted.json" > "$OUT/planted.txt" 2>&1
SEED="--set threads=128 --set rows=1 --set vec=16 --set passes=regs --set reduce=shfl --set rsqrt=approx --set hint=none"
for i in 1 2 3; do
  mt bench layernorm --d 768 --m 4096 $SEED --regime both --out "$OUT/stability_$i.json" > "$OUT/stability_$i.txt" 2>&1
  [ $i -lt 3 ] && sleep ${STABILITY_GAP_S:-90}
done
mt bench layernorm --d 4096 --m 16384 --all --sample 24 --regime cold --out "$OUT/ln_16384x4096.json" > "$OUT/ln_16384x4096.txt" 2>&1
tail -n 12 "$OUT"/planted.txt "$OUT"/stability_*.txt
