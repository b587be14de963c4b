#!/usr/bin/env bash
# Layer norm's scale and bias copied into shared memory by cp.async as a block starts (affine=smem), against loading
# them late (as y is written) or early (into registers beside x's loads), at the ten layer-norm shapes of the
# leave-shape-out protocol. Bases per shape: the four fastest distinct configs (affine and full_occupancy aside) of its
# runs/h200-2026-12-01-affine-loads record, crossed with affine=late,early,smem and full_occupancy=0,1 (invalid
# combinations dropped: early needs passes=regs), one `mage-tune bench --configs` run per shape, baselines beside.
# Records: OUT/affine_shared/layernorm-SHAPE.{bases.json,configs.json,json,txt,log}; OUT/affine_shared.tgz.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/affine_shared.sh [SHAPE ...]
set -u
out=${OUT:-out}/affine_shared
mkdir -p "$out"
start=$SECONDS
source benchmarks/gpu/crossed_bench.sh
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(m=16384,d=2560 m=32768,d=1024 m=32768,d=512 m=8192,d=1600 m=8192,d=6144 \
  m=1024,d=8192 m=1024,d=512 m=2048,d=1536 m=2048,d=5000 m=4096,d=3000)
for shape in "${shapes[@]}"; do
  tag=layernorm-${shape//[=,]/}
  python - "runs/h200-2026-12-01-affine-loads/affine/$tag.json" > "$out/$tag.bases.json" <<'PY'
import json, sys
from mage_tune.measure.saved import result_time
ok = [r for r in json.load(open(sys.argv[1]))["results"] if r["kind"] == "variant" and r["ok"] and result_time(r)]
ok.sort(key=result_time)
bases = []
for r in ok:
    config = {k: v for k, v in r["config"].items() if k not in ("affine", "full_occupancy")}
    if config not in bases:
        bases.append(config)
print(json.dumps(bases[:4]))
PY
  bench_crossed layernorm "$shape" "$out/$tag.bases.json" --set affine=late,early,smem --set full_occupancy=0,1
done
echo "done after $(( SECONDS - start )) s"
