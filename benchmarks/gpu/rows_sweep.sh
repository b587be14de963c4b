#!/usr/bin/env bash
# The same configs benched at several shapes (e.g. one width, rows from few to many), each shape one
# `mage-tune bench --configs` run with its baselines beside it: whether a kernel's gap to the same-bytes copy is a
# fixed cost per launch (it shrinks, relative to the copy, as the rows grow) or a cost per row (it stays).
# Records: OUT/rows_sweep/FAMILY-SHAPE.{json,txt,log}; OUT/rows_sweep.tgz, rewritten after every shape.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/rows_sweep.sh FAMILY CONFIGS.json SHAPE...   (SHAPE as DIM=N,DIM=N,...)
#   e.g. layernorm benchmarks/gpu/configs/ln_d6144_rows_sweep.json m=4096,d=6144 m=8192,d=6144 m=16384,d=6144
# then:  python analysis/crossed_bench.py OUT/rows_sweep
set -u
family=$1 configs=$2
shift 2
out=${OUT:-runs}/rows_sweep
mkdir -p "$out"
source benchmarks/gpu/crossed_bench.sh
for shape in "$@"; do
  tag=${family//[^A-Za-z0-9_-]/_}-${shape//[=,]/}  # a family given by path: its path, flattened, names the records
  echo "== $tag"
  bench_configs "$family" "$shape" "$configs" "$tag"
done
