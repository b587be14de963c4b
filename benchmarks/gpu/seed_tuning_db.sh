#!/usr/bin/env bash
# Fill the tuning database ($MAGE_TUNE_DB, default the cache's) with every H200 record committed under runs/:
# bench records (*.json with a mage-tune.bench schema) and search run directories (folders with trials.jsonl).
# Importing twice adds nothing. Usage: bash benchmarks/gpu/seed_tuning_db.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
mapfile -t records < <(grep -rl --include='*.json' '"schema": "mage-tune.bench/' runs)
mapfile -t run_dirs < <(find runs -name trials.jsonl -printf '%h\n' | sort)
python -m mage_tune db import "${records[@]}" "${run_dirs[@]}"
