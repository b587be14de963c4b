#!/usr/bin/env bash
# Second pass over the shapes: layer norm at M ∈ {4096, 16384} × d ∈ {700, 768, 1000, 1024, 2048, 4096, 8192}, swept
# over threads (a warp per row up to 1024), rows per block and access width, with Triton at every num_warps,
# torch and the same-bytes copies in each run; matmul at 2048³: the 12 fastest of the first pass crossed with
# k_unroll and stages, the fastest 6 of those at 4096³; Nsight Compute on the layer-norm winner at 16384 × 4096.
set -uo pipefail
OUT=${OUT:-runs}; mkdir -p "$OUT"
mt() { python -m mage_tune "$@"; }
P=records/h200-2026-11-29-shapes.tar.xz:matmul  # the first pass, as published
python analysis/top_configs.py $P/mm_2048.json --top 12 > "$OUT/top12.json"
python benchmarks/gpu/expand_configs.py matmul "$OUT/top12.json" --m 2048 --n 2048 --k 2048 --set k_unroll=0,4,8 --set stages=2,3,4 > "$OUT/list_2048.json"
mt bench matmul --m 2048 --n 2048 --k 2048 --configs "$OUT/list_2048.json" --rounds 5 --out "$OUT/mm_2048.json" > "$OUT/mm_2048.txt" 2>&1
python analysis/top_configs.py "$OUT/mm_2048.json" --top 6 > "$OUT/top6.json"
mt bench matmul --m 4096 --n 4096 --k 4096 --configs "$OUT/top6.json" --rounds 3 --out "$OUT/mm_4096.json" > "$OUT/mm_4096.txt" 2>&1
python analysis/bench_table.py "$OUT"/mm_*.json
SW="--set threads=32,64,128,256,512,1024 --set rows=1,2,4 --set vec=8,16 --set passes=regs --set reduce=shfl --set rsqrt=approx --set hint=cs --set persist=0"
for m in 4096 16384; do
  for d in 700 768 1000 1024 2048 4096 8192; do
    mt bench layernorm --m $m --d $d $SW --rounds 5 --out "$OUT/ln_m${m}_d$d.json" > "$OUT/ln_m${m}_d$d.txt" 2>&1
  done
done
python analysis/bench_table.py "$OUT"/ln_m*.json
best=$(python analysis/top_configs.py "$OUT/ln_m16384_d4096.json" --top 1 | python -c "import json,sys; print(' '.join(f'--set {k}={v}' for k,v in json.load(sys.stdin)[0].items()))")
mt counters layernorm --m 16384 --d 4096 $best --baseline 'triton[num_warps=16]' --baseline 'copy[copy_one_per_thread]' --out "$OUT/counters_ln_16384x4096.json" > "$OUT/counters_ln.txt" 2>&1
cat "$OUT/counters_ln.txt"
