# Sourced by the device scripts here: `step LOG SECONDS COMMAND...` runs COMMAND under a time limit, its output in
# $out/LOG and its exit status as the log's last line ("rc N"), whatever the other steps do. Needs $out.
step() {
  local log=$1 limit=$2
  shift 2
  timeout "$limit" "$@" > "$out/$log" 2>&1
  echo "rc $?" >> "$out/$log"
}

# `bench_shapes CONFIGS SECONDS MxNxK...`: matmul-bf16 at each shape, CONFIGS (a JSON list) beside cuBLAS BF16, each a
# step of its own: $out/bench-MxNxK.log and .json.
bench_shapes() {
  local configs=$1 limit=$2 shape m n k
  shift 2
  for shape in "$@"; do
    IFS=x read -r m n k <<< "$shape"
    step "bench-$shape.log" "$limit" python -m mage_tune bench matmul-bf16 --m "$m" --n "$n" --k "$k" \
      --configs "$configs" --baselines torch --rounds 5 --out "$out/bench-$shape.json"
  done
}
