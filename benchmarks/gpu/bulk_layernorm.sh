#!/usr/bin/env bash
# The example bulk-copy layer norm (examples/layernorm_bulk) swept over warps × stages × blocks × rows at the
# layer-norm shapes given (default: the six where x and y do not fit in L2), one `mage-tune bench` run per shape with Triton, torch and the same-bytes copy beside it.
# Records: $OUT/bulk/layernorm-bulk-mMdD.{json,txt,log}, packed into $OUT/bulk.tgz after each shape.
#
#   OUT=/tmp/w bash benchmarks/gpu/bulk_layernorm.sh [m=16384,d=2560 ...]
set -u
out=${OUT:-runs}/bulk
mkdir -p "$out"
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(m=16384,d=2560 m=32768,d=1024 m=32768,d=512 m=8192,d=1600 m=8192,d=6144 m=1024,d=8192)
for shape in "${shapes[@]}"; do
  tag=layernorm-bulk-$(echo "$shape" | tr -d '=,')
  python -m mage_tune bench examples/layernorm_bulk/family.py --shape "$shape" ${SWEEP:---set warps=1,2,4,8,16 --set stages=2,3,4,6 \
    --set blocks=1,2,4,8 --set rows=1,2} --rounds 7 --out "$out/$tag.json" > "$out/$tag.txt" 2> "$out/$tag.log"
  echo "exit $?" >> "$out/$tag.log"
  tar czf "$out.tgz" -C "$out" .
done
