#!/usr/bin/env bash
# The second, separate run over the shapes: every shape's winner of the earlier passes measured again in a new process, with
# Triton, torch and the copies measured again beside it. Where layer norm trailed Triton (register-limited
# occupancy in the census), the same run also measures full_occupancy=1 variants (32 registers, 64 warps an SM).
set -uo pipefail
OUT=${OUT:-runs}; mkdir -p "$OUT"
mt() { python -m mage_tune "$@"; }
R=records/h200-2026-11-29-shapes.tar.xz:  # the earlier passes, as published (ARCHIVE:MEMBER)
FULL="--set threads=256,512,1024 --set rows=1 --set vec=8,16 --set full_occupancy=1"
for m in 4096 16384; do
  for d in 700 768 1000 1024 2048 4096 8192; do
    python analysis/top_configs.py $R/ln/ln_m${m}_d$d.json --top 1 > "$OUT/w.json"
    if [ $d -ge 2048 ] || [ $m = 16384 -a $d = 1024 ] || [ $m = 16384 -a $d = 768 ]; then  # ours/Triton >= 0.99
      python benchmarks/gpu/expand_configs.py layernorm "$OUT/w.json" --m $m --d $d $FULL > "$OUT/full.json"
      python -c "import json; a=json.load(open('$OUT/w.json')); b=json.load(open('$OUT/full.json')); print(json.dumps(a+[c for c in b if c not in a]))" > "$OUT/list.json"
    else
      cp "$OUT/w.json" "$OUT/list.json"
    fi
    mt bench layernorm --m $m --d $d --configs "$OUT/list.json" --rounds 5 --out "$OUT/ln_m${m}_d$d.json" > "$OUT/ln_m${m}_d$d.txt" 2>&1
  done
done
for s in 1000 1024 2048 4096; do
  python analysis/top_configs.py $R/matmul/mm_$s.json $R/matmul_k_unroll/mm_$s.json --top 1 2>/dev/null > "$OUT/w.json" || python analysis/top_configs.py $R/matmul/mm_$s.json --top 1 > "$OUT/w.json"
  mt bench matmul --m $s --n $s --k $s --configs "$OUT/w.json" --rounds 5 --out "$OUT/mm_$s.json" > "$OUT/mm_$s.txt" 2>&1
done
python analysis/bench_table.py "$OUT"/ln_m*.json "$OUT"/mm_*.json
