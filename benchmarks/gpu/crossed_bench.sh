# Sourced by rebench_winners.sh, rows_sweep.sh and the campaigns' crossing scripts (scripts/ in their archives under
# records/): bench a family's configs crossed with other knob values, one `mage-tune bench --configs` run per shape
# (its baselines beside them), records under $out, all packed into $out.tgz after each.
#
#   bench_crossed FAMILY SHAPE TAG.bases.json [--set KNOB=V1,V2 ...]
# TAG.configs.json (the crossing, invalid combinations dropped), TAG.json (bench record), TAG.txt (its table),
# TAG.log (stderr and exit status); TAG is the bases file's name up to its first dot.
#
#   bench_configs FAMILY SHAPE CONFIGS.json TAG
# the bench run alone: TAG.json, TAG.txt, TAG.log under $out, then $out.tgz.
#
#   bench_run FAMILY SHAPE TAG BENCH_OPTION...
# the same with any `mage-tune bench` options choosing the configs (--configs FILE, --set KNOB=V1,V2 ...).

# The ten layer-norm shapes of the leave-shape-out protocol, the DRAM-bound ones first.
LAYERNORM_SHAPES=(m=16384,d=2560 m=32768,d=1024 m=32768,d=512 m=8192,d=1600 m=8192,d=6144 m=1024,d=8192 m=1024,d=512
  m=2048,d=1536 m=2048,d=5000 m=4096,d=3000)

bench_crossed() {
  local family=$1 shape=$2 bases=$3 tag
  tag=$(basename "$bases")
  tag=${tag%%.*}  # the bases file's name up to its first dot names the records
  shift 3
  local dims
  dims=$(echo "$shape" | sed -E 's/(^|,)([a-z])=/ --\2 /g')
  python benchmarks/gpu/expand_configs.py "$family" "$bases" $dims "$@" > "$out/$tag.configs.json"
  echo "== $tag: $(python -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$out/$tag.configs.json") configs ($(( SECONDS - start )) s)"
  bench_configs "$family" "$shape" "$out/$tag.configs.json" "$tag"
}

bench_configs() {
  bench_run "$1" "$2" "$4" --configs "$3"
}

bench_run() {
  local family=$1 shape=$2 tag=$3
  shift 3
  python -m mage_tune bench "$family" --shape "$shape" "$@" --rounds 7 \
    --out "$out/$tag.json" > "$out/$tag.txt" 2> "$out/$tag.log"
  echo "exit $?" >> "$out/$tag.log"
  tar czf "$out.tgz" -C "$out" .
}

winner_of() {  # FAMILY SHAPE -> the JSON list [winner config] of that shape in $winners (a leave-shape-out summary,
  # a file or ARCHIVE:MEMBER of a published campaign: analysis/archives.py)
  python - "$winners" "$1" "$2" <<'PY'
import json, sys
sys.path.insert(0, "analysis")
from archives import local_one
rows, family, shape = json.loads(local_one(sys.argv[1]).read_text()), sys.argv[2], sys.argv[3]
want = {k: int(v) for k, v in (item.split("=") for item in shape.split(","))}
print(json.dumps([r["winner_config"] for r in rows if r["family"] == family and r["shape"] == want]))
PY
}
