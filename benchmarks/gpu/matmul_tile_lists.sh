#!/usr/bin/env bash
# Matmul: the large-tile list at 2048³ (pipe 0/1, 8×8 to 16×16 micro-tiles), its 12 fastest at 4096³;
# the small-tile list plus those 12 at 1024³; the fastest of both at 1000³; cuBLAS and Triton's configs in every
# run; then Nsight Compute on the 2048³ winner beside cuBLAS.
set -uo pipefail
OUT=${OUT:-runs}; mkdir -p "$OUT"
mt() { python -m mage_tune "$@"; }
C=benchmarks/gpu/configs
mt bench matmul --m 2048 --n 2048 --k 2048 --configs $C/mm_large_tiles.json --rounds 5 --out "$OUT/mm_2048.json" > "$OUT/mm_2048.txt" 2>&1
python analysis/top_configs.py "$OUT/mm_2048.json" --top 12 > "$OUT/top_2048.json"
mt bench matmul --m 4096 --n 4096 --k 4096 --configs "$OUT/top_2048.json" --rounds 3 --out "$OUT/mm_4096.json" > "$OUT/mm_4096.txt" 2>&1
python - "$OUT/top_2048.json" $C/mm_small_tiles.json > "$OUT/list_1024.json" <<'PY'
import json, sys
merged = []
for path in sys.argv[1:]:
    merged += [c for c in json.load(open(path)) if c not in merged]
print(json.dumps(merged))
PY
mt bench matmul --m 1024 --n 1024 --k 1024 --configs "$OUT/list_1024.json" --rounds 5 --out "$OUT/mm_1024.json" > "$OUT/mm_1024.txt" 2>&1
python analysis/top_configs.py "$OUT/mm_1024.json" "$OUT/mm_2048.json" --top 10 > "$OUT/top_1000.json"
mt bench matmul --m 1000 --n 1000 --k 1000 --configs "$OUT/top_1000.json" --rounds 5 --out "$OUT/mm_1000.json" > "$OUT/mm_1000.txt" 2>&1
python analysis/bench_table.py "$OUT"/mm_*.json
best=$(python analysis/top_configs.py "$OUT/mm_2048.json" --top 1 | python -c "import json,sys; print(' '.join(f'--set {k}={v}' for k,v in json.load(sys.stdin)[0].items()))")
mt counters matmul --m 2048 --n 2048 --k 2048 $best --baseline 'torch.matmul (cuBLAS FP32)' --out "$OUT/counters_mm_2048.json" > "$OUT/counters_mm.txt" 2>&1
cat "$OUT/counters_mm.txt"
