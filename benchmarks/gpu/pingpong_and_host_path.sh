#!/usr/bin/env bash
# One device call's checks of matmul-bf16's ping-pong schedule and of the operators' host path, with their numbers,
# under $OUT (default /tmp/w). Each step has its own time limit and leaves its log whatever the others do. From the
# repository root, after `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/checks bash benchmarks/gpu/pingpong_and_host_path.sh
#
#   torch.log     pytest -m gpu tests/torch: the operators through their autograd shortcut, the Hopper bound launch
#   pingpong.log  the ping-pong configs at ragged shapes and many tiles per block, and every knob value
#   host.json     benchmarks/host_cost.py: host time per call and per compiled forward, by operator and by function
#   bench-*.json  both schedules beside cuBLAS BF16 at 4096³ and 8192 × 8192 × 2048
out=${OUT:-/tmp/w}
mkdir -p "$out"

source "$(dirname "$0")/step.sh"  # step LOG SECONDS COMMAND...

step torch.log 90 python -m pytest -v -m gpu tests/torch -p no:cacheprovider
step pingpong.log 150 python -m pytest -v -m gpu tests/kernels/test_gpu_matmul_bf16.py -k "pingpong or knob_value" \
  -p no:cacheprovider
step host.log 100 python benchmarks/host_cost.py --out "$out/host.json"
for shape in "4096 4096 4096" "8192 8192 2048"; do
  read -r m n k <<< "$shape"
  step "bench-m${m}n${n}k${k}.log" 70 python -m mage_tune bench mage_tune/kernels/matmul_bf16.py --m "$m" --n "$n" \
    --k "$k" --set schedule=cooperative,pingpong --set bm=64,128 --set bn=128,192,256 --set stages=4 \
    --set epilogue=tma --rounds 7 --out "$out/bench-m${m}n${n}k${k}.json"
done
