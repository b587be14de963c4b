#!/usr/bin/env bash
# The example cluster layer norm (examples/layernorm_cluster: a row split over a thread block cluster) swept over
# cluster × threads × affine at the layer-norm shapes given (default: four DRAM-bound ones, d = 6144 first), one
# `mage-tune bench` run per shape with Triton, torch and the same-bytes copy beside it; invalid combinations are
# dropped. cluster=1 is the same code with a CTA per row, the control. SWEEP replaces the --set options of the sweep.
# Records: $OUT/cluster/layernorm-cluster-mMdD.{json,txt,log}, packed into $OUT/cluster.tgz after each shape.
#
#   OUT=/tmp/w [SWEEP="--set cluster=1,2 --set threads=128"] bash benchmarks/gpu/cluster_layernorm.sh [m=8192,d=6144 ...]
# then: python analysis/crossed_bench.py $OUT/cluster
set -u
out=${OUT:-runs}/cluster
mkdir -p "$out"
source benchmarks/gpu/crossed_bench.sh
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(m=8192,d=6144 m=1024,d=8192 m=16384,d=2560 m=8192,d=1600)
for shape in "${shapes[@]}"; do
  bench_run examples/layernorm_cluster/family.py "$shape" "layernorm-cluster-${shape//[=,]/}" \
    ${SWEEP:---set cluster=1,2,4,8 --set threads=64,128,256,512 --set affine=late,early}
done
