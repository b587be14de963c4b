#!/usr/bin/env bash
# Layer norm's scale and bias loads: late (as y is written, after the reductions) or early (beside x's loads), at the
# ten layer-norm shapes of the leave-shape-out protocol. Bases per shape: the three fastest variants of its
# records/h200-2026-12-01-inner-loop.tar.xz record (member inner_loop/) and its three fastest with passes=regs, each also with passes=regs (the one
# mode affine=early applies to; invalid ones dropped), crossed with affine and full_occupancy, one `mage-tune bench --configs` run per shape, baselines beside.
# Records: OUT/affine/layernorm-SHAPE.{bases.json,configs.json,json,txt,log}; OUT/affine.tgz.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/affine_loads.sh [SHAPE ...]
set -u
out=${OUT:-runs}/affine
mkdir -p "$out"
start=$SECONDS
source benchmarks/gpu/crossed_bench.sh
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=("${LAYERNORM_SHAPES[@]}")
for shape in "${shapes[@]}"; do
  tag=layernorm-${shape//[=,]/}
  python - "records/h200-2026-12-01-inner-loop.tar.xz:inner_loop/$tag.json" > "$out/$tag.bases.json" <<'PY'
import json, sys
sys.path.insert(0, "analysis")
from archives import local_one
from mage_tune.measure.saved import result_time
ok = [r for r in json.loads(local_one(sys.argv[1]).read_text())["results"] if r["kind"] == "variant" and r["ok"] and result_time(r)]
ok.sort(key=result_time)
picked = [r["config"] for r in ok[:3] + [r for r in ok if r["config"]["passes"] == "regs"][:3]]
bases = []
for config in picked + [{**c, "passes": "regs"} for c in picked]:  # regs: the one mode affine=early applies to
    if config not in bases:
        bases.append(config)
print(json.dumps(bases))
PY
  bench_crossed layernorm "$shape" "$out/$tag.bases.json" --set affine=late,early --set full_occupancy=0,1
done
echo "done after $(( SECONDS - start )) s"
