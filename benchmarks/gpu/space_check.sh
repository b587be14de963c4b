#!/usr/bin/env bash
# Every valid layer-norm config at d = 768 checked and timed (cold) in one run, with the baselines.
set -uo pipefail
OUT=${OUT:-runs}; mkdir -p "$OUT"
python -m mage_tune bench layernorm --d 768 --m 4096 --all --rounds 5 --baselines triton,torch \
  --out "$OUT/ln_d768_all.json" > "$OUT/ln_d768_all.txt" 2>&1
tail -n 5 "$OUT/ln_d768_all.txt"
