#!/usr/bin/env bash
# Searches on the GPU, baselines measured in the same run; the planted-defect run.
set -uo pipefail
OUT=${OUT:-runs}; mkdir -p "$OUT"
mt() { python -m mage_tune "$@"; }
P=benchmarks/planted
mt bench matmul --m 1024 --n 1024 --k 1024 --set bm=64 --set bn=64 --set tm=4 --set tn=4 --set stages=2 \
  --source $P/matmul_wrong_last_tile.cu --source $P/matmul_out_of_bounds.cu --source $P/matmul_infinite_loop.cu \
  --timeout 20 --baselines torch --out "$OUT/planted.json" > "$OUT/planted.txt" 2>&1
mt search layernorm --d 768 --m 4096 --trials ${TRIALS:-100} --workers 14 --seed 0 --run-dir "$OUT/search_ln" > "$OUT/search_ln.txt" 2>&1
mt search matmul --m 1024 --n 1024 --k 1024 --trials ${TRIALS:-100} --workers 14 --seed 0 --run-dir "$OUT/search_mm" > "$OUT/search_mm.txt" 2>&1
tail -n 8 "$OUT"/planted.txt; tail -n 16 "$OUT"/search_*.txt
