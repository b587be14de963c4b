#!/usr/bin/env bash
# Fill the tuning database ($MAGE_TUNE_DB, default the cache's) with every published record (H200 and H100): each campaign's
# archive records/CAMPAIGN.tar.xz is extracted into runs/CAMPAIGN (once; runs/ is not tracked), then its bench records
# (*.json with a mage-tune.bench schema) and search run directories (folders with trials.jsonl) are imported.
# Importing twice adds nothing. Usage: bash benchmarks/gpu/seed_tuning_db.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
campaigns=()
for archive in records/*.tar.xz; do
  dir=runs/$(basename "$archive" .tar.xz)
  [ -d "$dir" ] || python analysis/archives.py extract "$archive" "$dir" >&2
  campaigns+=("$dir")
done
mapfile -t records < <(grep -rl --include='*.json' '"schema": "mage-tune.bench/' "${campaigns[@]}" | sort)
mapfile -t run_dirs < <(find "${campaigns[@]}" -name trials.jsonl -printf '%h\n' | sort)
python -m mage_tune db import "${records[@]}" "${run_dirs[@]}"
