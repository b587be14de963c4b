#!/usr/bin/env bash
# The templates' newer paths against the winners of the leave-shape-out searches
# (records/h200-2026-11-30-warm-start.tar.xz member summary.json):
#  - matmul, at each shape where the search missed its cuBLAS target: the winner crossed with split_k (serial
#    split-K) and with a_trans=2 (A through registers; it needs a_vec=16 and pipe=0), benched in one run per shape
#    with cuBLAS FP32 (torch.matmul, TF32 off) beside them;
#  - layer norm, at every shape of that evaluation: the winner with reduce=shfl and with reduce=shfl2, benched with
#    Triton's best num_warps and the same-bytes copy beside them; then Nsight Compute's shared-memory bank conflicts
#    for both reductions at the two widest-row winners.
# Records: OUT/ceiling/{matmul,layernorm}-SHAPE.json (bench records) and ncu-*.json; OUT/ceiling.tgz.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/template_ceiling.sh
set -u
out=${OUT:-runs}/ceiling
mkdir -p "$out"
winners=records/h200-2026-11-30-warm-start.tar.xz:summary.json
start=$SECONDS

source benchmarks/gpu/crossed_bench.sh

bench_family() {  # FAMILY SHAPE AXES...: the winner of SHAPE crossed with AXES
  local tag=$1-${2//[=,]/}
  winner_of "$1" "$2" > "$out/$tag.winner.json"
  bench_crossed "$1" "$2" "$out/$tag.winner.json" "${@:3}"
}

for shape in m=1024,n=4096,k=1024 m=4096,n=1024,k=2048 m=8192,n=1024,k=1024 m=1024,n=1024,k=8192 \
  m=2048,n=2048,k=6144 m=5120,n=5120,k=5120 m=1536,n=1536,k=1536; do
  w=$(winner_of matmul "$shape")
  a_trans=$(echo "$w" | python -c "import json,sys; print(json.load(sys.stdin)[0]['a_trans'])")
  a_vec=$(echo "$w" | python -c "import json,sys; print(json.load(sys.stdin)[0]['a_vec'])")
  pipe=$(echo "$w" | python -c "import json,sys; print(json.load(sys.stdin)[0]['pipe'])")
  bench_family matmul "$shape" --set split_k=1,2,3,4 --set "a_trans=$a_trans,2" --set "a_vec=$a_vec,16" \
    --set "pipe=$pipe,0"
done

for shape in m=1024,d=512 m=1024,d=8192 m=16384,d=2560 m=2048,d=1536 m=2048,d=5000 m=32768,d=1024 \
  m=32768,d=512 m=4096,d=3000 m=8192,d=1600 m=8192,d=6144; do
  bench_family layernorm "$shape" --set reduce=shfl,smem,shfl2
done

for shape in m=16384,d=2560 m=8192,d=1600; do
  w=$(winner_of layernorm "$shape")
  sets=$(echo "$w" | python -c "import json,sys; print(' '.join('--set %s=%s' % kv for kv in json.load(sys.stdin)[0].items() if kv[0] != 'reduce'))")
  for reduce in shfl shfl2; do
    python -m mage_tune counters layernorm --shape "$shape" $sets --set reduce=$reduce \
      --out "$out/ncu-layernorm-${shape//[=,]/}-$reduce.json" > "$out/ncu-layernorm-${shape//[=,]/}-$reduce.txt" 2>&1
  done
done
tar czf "$out.tgz" -C "$out" .
echo "done after $(( SECONDS - start )) s"
