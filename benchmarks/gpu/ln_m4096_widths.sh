#!/usr/bin/env bash
# Layer norm at M = 4096 over d in {700, 768, 1000, 1024, 2048, 4096, 8192}, a sweep of the knobs that won at d = 768
# (one row per block or two, float2/float4, row in registers) with and without the persistent prefetching grid,
# Triton at every num_warps and torch in the same run.
set -uo pipefail
OUT=${OUT:-runs}; mkdir -p "$OUT"
SW="--set threads=64,128,256 --set rows=1,2 --set vec=8,16 --set passes=regs --set reduce=shfl --set rsqrt=approx --set hint=cs --set persist=0,2,4"
for d in 768 1024 2048 4096 8192 700 1000; do
  python -m mage_tune bench layernorm --d $d --m ${M:-4096} $SW --rounds 5 --out "$OUT/ln_m${M:-4096}_d$d.json" > "$OUT/ln_m${M:-4096}_d$d.txt" 2>&1
done
python analysis/bench_table.py "$OUT"/ln_m*_d*.json
