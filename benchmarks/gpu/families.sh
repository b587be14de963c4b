#!/usr/bin/env bash
# User families on the GPU: the GPU-marked tests, searches of the RMSNorm CUDA family (fp32, bf16) and of the Triton
# RMSNorm family by path, then each search winner benched at M = 4096 and 16384 (d = 4096) with torch's rms_norm,
# the Triton RMSNorm at every num_warps and the same-bytes copies in the same run.
# Run from the repository root with OUT set; everything lands in $OUT/families.tar.gz plus logs.
set -uo pipefail
OUT=${OUT:-runs}; mkdir -p "$OUT"
W=$(mktemp -d)
mt() { python -m mage_tune "$@"; }
python -m pytest -m gpu -q -p no:cacheprovider tests/ > "$W/pytest_gpu.txt" 2>&1
tail -n 5 "$W/pytest_gpu.txt"
R=examples/rmsnorm
for fam in family.py family.py:BF16 triton_family.py:BF16; do
  name=$(echo "$fam" | tr ':.' '__')
  mt search "$R/$fam" --m 4096 --d 4096 --trials ${TRIALS:-40} --workers 14 --seed 0 --run-dir "$W/search_$name" \
    > "$W/search_$name.txt" 2>&1
  tail -n 4 "$W/search_$name.txt"
done
for fam in family.py family.py:BF16; do
  name=$(echo "$fam" | tr ':.' '__')
  python -c "import json,sys; print(json.dumps([json.load(open(sys.argv[1]))['config']]))" \
    "$W/search_$name/best/best.json" > "$W/winner_$name.json"
  for m in 4096 16384; do
    mt bench "$R/$fam" --m $m --d 4096 --configs "$W/winner_$name.json" --out "$W/bench_${name}_m$m.json" \
      > "$W/bench_${name}_m$m.txt" 2>&1
    tail -n 14 "$W/bench_${name}_m$m.txt"
  done
done
python -m mage_tune doctor > "$W/doctor.txt" 2>&1
nvidia-smi > "$W/nvidia-smi.txt" 2>&1
tar -czf "$OUT/families.tar.gz" -C "$W" .
