#!/usr/bin/env bash
# Layer norm's scale and bias copied into shared memory by cp.async as a block starts (affine=smem), against loading
# them late (as y is written) or early (into registers beside x's loads), at the ten layer-norm shapes of the
# leave-shape-out protocol. Bases per shape: the four fastest distinct configs (affine and full_occupancy aside) of its
# records/h200-2026-12-01-affine-loads.tar.xz record (member affine/), crossed with affine=late,early,smem and full_occupancy=0,1 (invalid
# combinations dropped: early needs passes=regs), one `mage-tune bench --configs` run per shape, baselines beside.
# Records: OUT/affine_shared/layernorm-SHAPE.{bases.json,configs.json,json,txt,log}; OUT/affine_shared.tgz.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/affine_shared.sh [SHAPE ...]
set -u
out=${OUT:-runs}/affine_shared
mkdir -p "$out"
start=$SECONDS
source benchmarks/gpu/crossed_bench.sh
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=("${LAYERNORM_SHAPES[@]}")
for shape in "${shapes[@]}"; do
  tag=layernorm-${shape//[=,]/}
  python analysis/top_configs.py "records/h200-2026-12-01-affine-loads.tar.xz:affine/$tag.json" --top 4 \
    --ignore affine,full_occupancy > "$out/$tag.bases.json"
  bench_crossed layernorm "$shape" "$out/$tag.bases.json" --set affine=late,early,smem --set full_occupancy=0,1
done
echo "done after $(( SECONDS - start )) s"
