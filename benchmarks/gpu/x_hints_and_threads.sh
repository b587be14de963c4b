#!/usr/bin/env bash
# Layer norm's loads of x without an L1 line (hint=nc_na) and with an L2 prefetch size (x_prefetch=128, 256), and
# thread counts of 3 · 2^k or 5 · 2^k, at DRAM-bound shapes. Bases per shape: the fastest distinct configs of its
# latest leave-shape-out search (SEARCHES: records/h200-2026-12-01-affine-shared.tar.xz:searches), crossed
#   cache:   the top 4 (hint aside) × hint=none,nc,nc_na × x_prefetch=0,128,256
#   threads: the top 3 (threads and vec aside) × the shape's thread counts × vec=4,8,16
# one `mage-tune bench --configs` run per crossing and shape, baselines beside; invalid combinations dropped.
# Records: OUT/x_hints_and_threads/layernorm-SHAPE-{cache,threads}.{bases.json,configs.json,json,txt,log}, packed
# into OUT/x_hints_and_threads.tgz.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/x_hints_and_threads.sh [SHAPE=THREADS ...]
#   e.g. m=8192,d=6144=96,128,192,384,768 (default: that and m=16384,d=2560=128,160,256,320,640)
set -u
out=${OUT:-runs}/x_hints_and_threads
searches=${SEARCHES:-records/h200-2026-12-01-affine-shared.tar.xz:searches}
mkdir -p "$out"
start=$SECONDS
source benchmarks/gpu/crossed_bench.sh
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=(m=8192,d=6144=96,128,192,384,768 m=16384,d=2560=128,160,256,320,640)
for job in "${jobs[@]}"; do
  shape=${job%=*} threads=${job##*=}
  tag=layernorm-${shape//[=,]/}
  python analysis/top_configs.py "$searches/$tag" --top 4 --ignore hint,x_prefetch > "$out/$tag-cache.bases.json"
  bench_crossed layernorm "$shape" "$out/$tag-cache.bases.json" --set hint=none,nc,nc_na --set x_prefetch=0,128,256
  python analysis/top_configs.py "$searches/$tag" --top 3 --ignore threads,vec > "$out/$tag-threads.bases.json"
  bench_crossed layernorm "$shape" "$out/$tag-threads.bases.json" --set "threads=$threads" --set vec=4,8,16
done
echo "done after $(( SECONDS - start )) s"
