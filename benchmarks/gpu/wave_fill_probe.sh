#!/usr/bin/env bash
# Two probes of what a tile's width costs matmul-bf16, under $OUT (default /tmp/w). From the repository root, after
# `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/probe bash benchmarks/gpu/wave_fill_probe.sh
#
#   width-BN.json    one wave of 128 × BN tiles as multicast pairs (16896 × BN × 4096: 132 tiles, 66 pairs) for BN
#                    from 192 to 256 in steps of 8, beside cuBLAS BF16: the time of one tile at each width
#   proxy.json       4704 × 2900 × 3104, 2900 × 4704 × 3104 transposed (what cuBLAS's NNT kernel computes there),
#                    configs/mm_bf16_transposed_proxy.json beside cuBLAS BF16: what a kernel that computes Cᵀ could
#                    reach with our tiles (its operands' pitches are those of the transposed problem, not the same)
# Each step has its own time limit and leaves its log whatever the others do.
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # step LOG SECONDS COMMAND...

for bn in 192 200 208 216 224 232 240 248 256; do
  step "width-$bn.log" 40 python -m mage_tune bench matmul-bf16 --m 16896 --n "$bn" --k 4096 \
    --set bn="$bn" --set cluster=2 --set multicast=1 --baselines torch --rounds 5 --out "$out/width-$bn.json"
done
step proxy.log 60 python -m mage_tune bench matmul-bf16 --m 4704 --n 2900 --k 3104 \
  --configs "$here/configs/mm_bf16_transposed_proxy.json" --baselines torch --rounds 5 --out "$out/proxy.json"
