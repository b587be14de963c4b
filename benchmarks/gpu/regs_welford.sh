#!/usr/bin/env bash
# Layer norm with the row in registers: regs' two reductions (the sum, then the squared deviations) against
# regs_welford's one reduction of Welford triples, at DRAM-bound shapes. Bases per shape: the top 4 configs (passes
# aside) of each record or search run directory named for it, crossed with passes=regs,regs_welford; one
# `mage-tune bench --configs` run per shape, baselines beside, invalid combinations dropped.
# Records: OUT/regs_welford/layernorm-SHAPE.{bases.json,configs.json,json,txt,log}; OUT/regs_welford.tgz.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/regs_welford.sh SHAPE:SOURCE[,SOURCE...] ...
#   e.g. m=8192,d=6144:runs/h200-2026-12-01-x-hints-threads/searches-full-polish/layernorm-m8192d6144
set -u
out=${OUT:-out}/regs_welford
mkdir -p "$out"
start=$SECONDS
source benchmarks/gpu/crossed_bench.sh
for job in "$@"; do
  shape=${job%%:*} sources=${job#*:}
  tag=layernorm-${shape//[=,]/}
  python analysis/top_configs.py ${sources//,/ } --top 4 --ignore passes > "$out/$tag.bases.json"
  bench_crossed layernorm "$shape" "$out/$tag.bases.json" --set passes=regs,regs_welford
done
echo "done after $(( SECONDS - start )) s"
