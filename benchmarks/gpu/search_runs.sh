#!/usr/bin/env bash
# Issue 6: searches on the GPU, baselines measured in the same run.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
mt() { python -m mage_tune "$@"; }
mt search layernorm --d 768 --m 4096 --trials ${TRIALS:-100} --workers 12 --seed 0 --run-dir "$OUT/search_ln" > "$OUT/search_ln.txt" 2>&1
mt search matmul --m 1024 --n 1024 --k 1024 --trials ${TRIALS:-100} --workers 12 --seed 0 --run-dir "$OUT/search_mm" > "$OUT/search_mm.txt" 2>&1
tail -n 30 "$OUT"/search_*.txt
