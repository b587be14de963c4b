#!/usr/bin/env bash
# Layer norm's bulk L2 prefetch of the row a later block reads (l2_ahead: MiB of x ahead, AHEAD=0,1,2,4 unless set), at
# DRAM-bound shapes. Bases per shape: the fastest distinct configs of its latest leave-shape-out search (cache hints,
# rsqrt and the prefetch knobs aside), crossed with x_prefetch=0,128 and every l2_ahead; one `mage-tune bench
# --configs` run per shape, baselines beside; invalid combinations dropped.
# Records: OUT/l2_ahead/layernorm-SHAPE.{bases.json,configs.json,json,txt,log}, packed into OUT/l2_ahead.tgz.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/l2_ahead.sh [SHAPE ...]
#   (default: m=8192,d=6144 m=16384,d=2560 m=32768,d=1024, whose searches are in SEARCHES: a folder or an archive's
#   member, by default records/h200-2026-12-01-cluster-split.tar.xz:searches)
set -u
out=${OUT:-runs}/l2_ahead
searches=${SEARCHES:-records/h200-2026-12-01-cluster-split.tar.xz:searches}
mkdir -p "$out"
start=$SECONDS
source benchmarks/gpu/crossed_bench.sh
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(m=8192,d=6144 m=16384,d=2560 m=32768,d=1024)
for shape in "${shapes[@]}"; do
  tag=layernorm-${shape//[=,]/}
  python analysis/top_configs.py "$searches/$tag" --top 3 --ignore hint,rsqrt,x_prefetch,l2_ahead \
    > "$out/$tag.bases.json"
  bench_crossed layernorm "$shape" "$out/$tag.bases.json" --set x_prefetch=0,128 --set l2_ahead=${AHEAD:-0,1,2,4}
done
echo "done after $(( SECONDS - start )) s"
