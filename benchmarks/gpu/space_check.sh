#!/usr/bin/env bash
# Issue 3 (correctness of every config) and issue 6 (the exhaustive layer-norm table the samplers are replayed on).
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
mt() { python -m mage_tune "$@"; }
mt bench layernorm --d 768 --m 4096 --all --rounds 5 --baselines triton,torch --out "$OUT/ln_d768_all.json" > "$OUT/ln_d768_all.txt" 2>&1
for d in 700 1000 4100; do
  mt bench layernorm --d $d --m 1024 --all --sample 150 --check-only --baselines none --out "$OUT/ln_d${d}_check.json" > "$OUT/ln_d${d}_check.txt" 2>&1
done
mt bench matmul --m 1024 --n 1024 --k 1024 --all --sample 320 --check-only --baselines none --out "$OUT/mm_1024_check.json" > "$OUT/mm_1024_check.txt" 2>&1
mt bench matmul --m 1000 --n 1000 --k 1000 --all --sample 120 --check-only --baselines none --out "$OUT/mm_1000_check.json" > "$OUT/mm_1000_check.txt" 2>&1
mt bench matmul --m 513 --n 257 --k 129 --all --sample 80 --check-only --baselines none --out "$OUT/mm_odd_check.json" > "$OUT/mm_odd_check.txt" 2>&1
tail -n 3 "$OUT"/*.txt
