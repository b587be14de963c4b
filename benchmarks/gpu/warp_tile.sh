#!/usr/bin/env bash
# The inner loop and the stores, probed at the winners of the leave-shape-out searches
# (runs/h200-2026-11-30-warm-start/summary.json), one `mage-tune bench --configs` run per shape, baselines beside:
#  - matmul, every shape with M, N, K >= 1024: the winner and a 128×128×(8|16) tile of 8×8 micro-tiles (256 threads,
#    two blocks per SM), each crossed with warp_n (how a warp's threads lie over the block tile) and bk;
#  - layer norm, every shape: the winner crossed with y_hint (plain or streaming stores of y) and hint=cs;
#  - Nsight Compute (`mage-tune counters`) of the 1024×4096×1024 winner with warp_n=0 and 8, cuBLAS beside.
# Records: OUT/warp_tile/{matmul,layernorm}-SHAPE.json (bench records), ncu-*.json; OUT/warp_tile.tgz.
#
# usage: OUT=/tmp/w bash benchmarks/gpu/warp_tile.sh [matmul|layernorm|counters ...]
set -u
out=${OUT:-out}/warp_tile
mkdir -p "$out"
winners=runs/h200-2026-11-30-warm-start/summary.json
parts=${*:-matmul layernorm counters}
start=$SECONDS

bases() {  # FAMILY SHAPE -> JSON list: the winner of that shape (and, for matmul, the 128×128 two-per-SM tile)
  python - "$winners" "$1" "$2" <<'EOF'
import json, sys
rows, family, shape = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
want = {k: int(v) for k, v in (item.split("=") for item in shape.split(","))}
configs = [r["winner_config"] for r in rows if r["family"] == family and r["shape"] == want]
if family == "matmul":
    configs.append({**configs[0], "bm": 128, "bn": 128, "bk": 8, "tm": 8, "tn": 8, "stages": 3, "a_vec": 4,
                    "b_vec": 16, "a_trans": 1, "pad": 4, "smem_vec": 1, "pipe": 1, "k_unroll": 0})
print(json.dumps(configs))
EOF
}

bench_family() {  # FAMILY SHAPE AXES...
  local family=$1 shape=$2 tag=$1-${2//[=,]/}
  shift 2
  bases "$family" "$shape" > "$out/$tag.bases.json"
  dims=$(echo "$shape" | sed -E 's/(^|,)([a-z])=/ --\2 /g')
  python benchmarks/gpu/expand_configs.py "$family" "$out/$tag.bases.json" $dims "$@" > "$out/$tag.configs.json"
  echo "== $tag: $(python -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$out/$tag.configs.json") configs ($(( SECONDS - start )) s)"
  python -m mage_tune bench "$family" --shape "$shape" --configs "$out/$tag.configs.json" --rounds 7 \
    --out "$out/$tag.json" > "$out/$tag.txt" 2> "$out/$tag.log"
  echo "exit $?" >> "$out/$tag.log"
  tar czf "$out/../warp_tile.tgz" -C "$out" .
}

for part in $parts; do
  case $part in
  matmul)
    for shape in m=1024,n=4096,k=1024 m=4096,n=1024,k=2048 m=8192,n=1024,k=1024 m=1024,n=1024,k=8192 \
      m=1536,n=1536,k=1536 m=2048,n=2048,k=6144 m=6000,n=2000,k=1500 m=3000,n=3000,k=3000 m=5120,n=5120,k=5120; do
      bench_family matmul "$shape" --set warp_n=0,4,8,16 --set bk=8,16,32
    done ;;
  layernorm)
    for shape in m=1024,d=512 m=1024,d=8192 m=16384,d=2560 m=2048,d=1536 m=2048,d=5000 m=32768,d=1024 \
      m=32768,d=512 m=4096,d=3000 m=8192,d=1600 m=8192,d=6144; do
      hint=$(bases layernorm "$shape" | python -c "import json,sys; print(json.load(sys.stdin)[0]['hint'])")
      bench_family layernorm "$shape" --set y_hint=none,cs --set "hint=$hint,cs"
    done ;;
  counters)
    shape=m=1024,n=4096,k=1024
    sets=$(bases matmul "$shape" | python -c "import json,sys; print(' '.join('--set %s=%s' % kv for kv in json.load(sys.stdin)[0].items()))")
    for warp_n in 0 8; do
      python -m mage_tune counters matmul --shape "$shape" $sets --set warp_n=$warp_n \
        --baseline 'torch.matmul (cuBLAS FP32)' --out "$out/ncu-matmul-${shape//[=,]/}-warp_n$warp_n.json" \
        > "$out/ncu-matmul-${shape//[=,]/}-warp_n$warp_n.txt" 2>&1
    done ;;
  esac
done
tar czf "$out/../warp_tile.tgz" -C "$out" .
echo "done after $(( SECONDS - start )) s"
