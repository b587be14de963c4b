#!/usr/bin/env bash
# The k loop's code size and y's stores, probed at the winners of the leave-shape-out searches
# (records/h200-2026-11-30-warm-start.tar.xz member summary.json), one `mage-tune bench --configs` run per shape, baselines beside:
#  - matmul, at the shapes with M, N, K >= 1024 where the winner is over 1.10× cuBLAS: the winner and cuBLAS's own
#    tiling (256×128×8, 16×8 micro-tiles, four stages, register double buffering), each crossed with pipe, k_unroll
#    and stages. At commit d55a6ef k_unroll also applied with pipe=1 (a rolled loop of k_unroll k steps and the last
#    body unrolled: a smaller loop for the instruction cache); it gained nothing and was taken out, so at later
#    commits expand_configs drops those combinations;
#  - layer norm, at every shape: the winner crossed with y_hint (plain or streaming stores of y) and hint=cs.
# Records: OUT/inner_loop/{matmul,layernorm}-SHAPE.{configs.json,json,txt,log}; OUT/inner_loop.tgz.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/inner_loop.sh [matmul] [layernorm]
set -u
out=${OUT:-runs}/inner_loop
mkdir -p "$out"
winners=records/h200-2026-11-30-warm-start.tar.xz:summary.json
start=$SECONDS
source benchmarks/gpu/crossed_bench.sh

for part in ${*:-matmul layernorm}; do
  case $part in
  matmul)
    for shape in m=1024,n=4096,k=1024 m=4096,n=1024,k=2048 m=8192,n=1024,k=1024 m=1024,n=1024,k=8192 \
      m=2048,n=2048,k=6144 m=5120,n=5120,k=5120; do
      tag=matmul-${shape//[=,]/}
      winner_of matmul "$shape" | python -c '
import json, sys
winner = json.load(sys.stdin)[0]
cublas_like = {"bm": 256, "bn": 128, "bk": 8, "tm": 16, "tn": 8, "stages": 4, "a_vec": 4, "b_vec": 16,
               "a_trans": 1, "pad": 4, "smem_vec": 1, "pipe": 1, "k_unroll": 0, "raster": 0}
print(json.dumps([winner, cublas_like]))' > "$out/$tag.bases.json"
      bench_crossed matmul "$shape" "$out/$tag.bases.json" --set pipe=0,1 --set k_unroll=0,4,8 --set stages=2,3,4
    done ;;
  layernorm)
    for shape in m=1024,d=512 m=1024,d=8192 m=16384,d=2560 m=2048,d=1536 m=2048,d=5000 m=32768,d=1024 \
      m=32768,d=512 m=4096,d=3000 m=8192,d=1600 m=8192,d=6144; do
      tag=layernorm-${shape//[=,]/}
      winner_of layernorm "$shape" > "$out/$tag.bases.json"
      hint=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))[0]['hint'])" "$out/$tag.bases.json")
      bench_crossed layernorm "$shape" "$out/$tag.bases.json" --set y_hint=none,cs --set "hint=$hint,cs"
    done ;;
  esac
done
echo "done after $(( SECONDS - start )) s"
