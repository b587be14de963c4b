#!/usr/bin/env bash
# The RMSNorm family against torch's rms_norm and the Triton RMSNorm at d = 4096, M = 4096 and 16384, fp32 and bf16:
# a search at each shape (by path, as a user runs it), then the five fastest configs of that search benched again
# with every baseline in one separate run (the record the target is read from).
# Run from the repository root with OUT set; everything lands in $OUT/rmsnorm_targets.tar.gz.
set -uo pipefail
OUT=${OUT:-runs}; mkdir -p "$OUT"
W=$(mktemp -d)
mt() { python -m mage_tune "$@"; }
for fam in family.py family.py:BF16; do
  for m in 4096 16384; do
    name=$(echo "$fam" | tr ':.' '__')_m$m
    mt search "examples/rmsnorm/$fam" --m $m --d 4096 --trials ${TRIALS:-30} --workers 14 --seed 1 \
      --run-dir "$W/search_$name" > "$W/search_$name.txt" 2>&1
    python - "$W/search_$name" "$W/top_$name.json" <<'PY'
import json, sys
from pathlib import Path
rows = [json.loads(line) for line in (Path(sys.argv[1]) / "trials.jsonl").read_text().splitlines() if line.strip()]
rows = sorted((r for r in rows if r.get("outcome") == "measured"), key=lambda r: r["value"])
top = []
for r in rows:
    if r["config"] not in top:
        top.append(r["config"])
Path(sys.argv[2]).write_text(json.dumps(top[:5]))
PY
    mt bench "examples/rmsnorm/$fam" --m $m --d 4096 --configs "$W/top_$name.json" --out "$W/bench_$name.json" \
      > "$W/bench_$name.txt" 2>&1
    tail -n 16 "$W/bench_$name.txt"
  done
done
nvidia-smi > "$W/nvidia-smi.txt" 2>&1
tar -czf "$OUT/rmsnorm_targets.tar.gz" -C "$W" .
