# Sourced by the device scripts here: `step LOG SECONDS COMMAND...` runs COMMAND under a time limit, its output in
# $out/LOG and its exit status as the log's last line ("rc N"), whatever the other steps do. Needs $out.
# First, that the package imports here with everything it reads records with: a device image lacks some of it, and
# a call that finds out test by test spends its minutes on import errors (benchmarks/gpu/README.md says what to fetch).
if ! command -v python > /dev/null; then
  echo "step.sh: no python on PATH (run from the device image's shell, after source .whl/use-wheels.sh)" >&2
  exit 3
fi
if ! missing=$(python -c "import mage_tune.records.schema, mage_tune.search.runner" 2>&1); then
  echo "step.sh: mage_tune does not import on this machine; fetch the wheels benchmarks/gpu/README.md names:" >&2
  echo "$missing" | tail -n 1 >&2
  exit 3
fi

step() {
  local log=$1 limit=$2
  shift 2
  timeout "$limit" "$@" > "$out/$log" 2>&1
  echo "rc $?" >> "$out/$log"
}

# `checks TESTS_K CONFIGS "DEFAULT SHAPES" [MxNxK...]`: a campaign's device call in one line. The matmul-bf16 GPU
# tests that the -k expression TESTS_K selects (gpu.log; CHECKS_TESTS_S seconds, default 300, on CHECKS_WORKERS
# workers, default 8), then, once they pass, CONFIGS benched at the shapes given or the default ones (CHECKS_BENCH_S
# seconds a shape, default 90), then, where CHECKS_RETIME_TOP is set, that many of the fastest of each bench re-timed
# outside the harness (CHECKS_RETIME_S seconds, default 150; CHECKS_REGIMES, default graph). The variables prefix the
# call in each script (`CHECKS_TESTS_S=150 checks ...`): their own names, so no other setting of the shell steers it.
checks() {
  local tests_k=$1 configs=$2 defaults=$3
  shift 3
  step gpu.log "${CHECKS_TESTS_S:-300}" python -m pytest -v -x -m gpu tests/kernels/test_gpu_matmul_bf16.py \
    -n "${CHECKS_WORKERS:-8}" --dist load -k "$tests_k" -p no:cacheprovider
  bench_if_passed "$configs" "${CHECKS_BENCH_S:-90}" "$defaults" "$@"
  if [ -n "${CHECKS_RETIME_TOP:-}" ]; then
    retime_benches "${CHECKS_RETIME_S:-150}" "$CHECKS_RETIME_TOP" "${CHECKS_REGIMES:-graph}"
  fi
}

# `bench_if_passed CONFIGS SECONDS "DEFAULT SHAPES" [MxNxK...]`: once $out/gpu.log shows no failure, bench_shapes at
# the shapes given, or at the default ones where none are.
bench_if_passed() {
  local configs=$1 limit=$2 defaults=$3
  shift 3
  grep -q "failed\|error" "$out/gpu.log" && return
  # shellcheck disable=SC2086  # the defaults split into shapes
  [ $# -eq 0 ] && set -- $defaults
  bench_shapes "$configs" "$limit" "$@"
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

# `retime_benches SECONDS TOP [REGIMES]`: the TOP fastest variants of every $out/bench-*.json (bench_shapes', all
# matmul-bf16) re-timed outside mage-tune's harness (benchmarks/gpu/retime_independent.py; REGIMES, default graph,
# besides the cold single launches), in $out/retime.json and retime.log. Nothing where no bench left a record.
retime_benches() {
  local limit=$1 top=$2 regimes=${3:-graph} benches=("$out"/bench-*.json)
  [ -e "${benches[0]}" ] || return 0
  step retime.log "$limit" python "$(dirname "${BASH_SOURCE[0]}")/retime_independent.py" "${benches[@]}" \
    --family matmul-bf16 --top "$top" --rounds 3 --regimes "$regimes" --json "$out/retime.json"
}

# `bundle_out DIR`: everything under DIR (a device call's $OUT) as one DIR/out.tar.xz, Optuna's study.db left out
# (trials.jsonl holds the trials): the device returns at most 8 files, two folders down, so a call that wrote run
# directories ends with this, and `mkdir -p runs/CAMPAIGN/callN && tar -xJf …/out.tar.xz -C runs/CAMPAIGN/callN` here.
bundle_out() {
  local dir=$1 bundle
  bundle=$(mktemp /tmp/out.XXXXXX.tar.xz)
  tar -cJf "$bundle" --exclude=study.db -C "$dir" . && find "$dir" -mindepth 1 -delete && mv "$bundle" "$dir/out.tar.xz"
}
