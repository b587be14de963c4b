#!/usr/bin/env bash
# Where matmul-bf16 loses to cuBLAS BF16 at a long K (4500 × 3000 × 8800: 1.065 × with the best config): per cycle,
# or at a lower clock. `configs/mm_bf16_long_k_clocks.json` and cuBLAS under sustained load with NVML's SM clock and
# power (clocks_under_load.py) at that shape and at 4224 × 3072 × 8800, whose 396 tiles of 128 × 256 fill three waves
# of 132 exactly (the same configs without a part-full wave), then one launch of each under Nsight Compute (speed of
# light, compute workload, warp states) and the kernels cuBLAS runs at both shapes. From the repository root, after
# `source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH MAGE_TUNE_CACHE=/tmp/mtc`:
#
#   OUT=$OUT/clocks bash benchmarks/gpu/long_k_clocks.sh [MxNxK ...]
out=${OUT:-/tmp/w}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/step.sh"  # step LOG SECONDS COMMAND...
configs=${LONG_K_CONFIGS:-$here/configs/mm_bf16_long_k_clocks.json}
shapes=("$@")
[ ${#shapes[@]} -eq 0 ] && shapes=(4500x3000x8800 4224x3072x8800)
step smi.log 20 nvidia-smi -q -d CLOCK,POWER,PERFORMANCE
step cublas.log 60 python "$here/cublas_kernels.py" "${shapes[@]}" --json "$out/cublas.json"
for shape in "${shapes[@]}"; do
  IFS=x read -r m n k <<< "$shape"
  step "clocks-$shape.log" 200 python "$here/clocks_under_load.py" matmul-bf16 --dims "m=$m,n=$n,k=$k" \
    --configs "$configs" --seconds 2 --rounds 2 --json "$out/clocks-$shape.json"
done
IFS=x read -r m n k <<< "${shapes[0]}"
step "ncu-${shapes[0]}.log" 200 ncu --nvtx --nvtx-include mage-profile/ --clock-control none \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis \
  --csv --page raw --log-file "$out/ncu-${shapes[0]}.csv" python "$here/profile_configs.py" matmul-bf16 \
  --dims "m=$m,n=$n,k=$k" --configs "$configs" --out "$out/order-${shapes[0]}.json"
