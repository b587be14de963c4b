#!/usr/bin/env bash
# A search's winner benched again in a separate run, its baselines (Triton at every config, torch, the same-bytes
# copy) timed beside it, so a ratio the search reported can be checked against a second same-run measurement.
# Records: OUT/rebench/TAG.{configs.json,json,txt,log} per run directory (TAG its folder name); OUT/rebench.tgz.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/rebench_winners.sh RUN_DIR...
# then:  python analysis/crossed_bench.py OUT/rebench
set -u
out=${OUT:-runs}/rebench
mkdir -p "$out"
source benchmarks/gpu/crossed_bench.sh
for run in "$@"; do
  tag=$(basename "$run")
  read -r family shape < <(python -c "import json,sys; r=json.load(open(sys.argv[1]));
print(r['family'], ','.join(f'{k}={v}' for k, v in r['shape'].items()))" "$run/run.json")
  python -c "import json,sys; print(json.dumps([json.load(open(sys.argv[1]))['config']]))" "$run/best/best.json" \
    > "$out/$tag.configs.json"
  echo "== $tag: $family $shape"
  bench_configs "$family" "$shape" "$out/$tag.configs.json" "$tag"
done
