#!/usr/bin/env bash
# Leave-shape-out evaluation of the warm start. For each SHAPE, one search of TRIALS trials (default 100) on every
# GPU of the host, whose warm start may use every record of the tuning database except that shape's own
# (--warm-start other-shapes); searches done earlier in the same call are in the database too. Each shape's run
# directory and log go to OUT/FAMILY-SHAPE; OUT/FAMILY.tgz is rewritten after every shape, so a call cut short keeps
# what finished. Shapes not started before DEADLINE_S seconds (default 540) are listed in OUT/FAMILY-skipped.txt.
#
# WARM=off runs the same searches cold (no warm start), for contrast.
#
# usage: bash benchmarks/gpu/leave_shape_out.sh FAMILY OUT SHAPE...   (SHAPE as DIM=N,DIM=N,...)
# then:  python benchmarks/leave_shape_out_report.py OUT_FOLDER...   (tables, JSON and the figure)
set -u
family=$1 out=$2
shift 2
trials=${TRIALS:-100}
deadline=${DEADLINE_S:-540}
workers=${WORKERS:-14}
mkdir -p "$out"
start=$SECONDS
for shape in "$@"; do
  tag=$family-${shape//[=,]/}
  if (( SECONDS - start > deadline )); then
    echo "$shape" >> "$out/$family-skipped.txt"
    continue
  fi
  echo "== $tag ($(( SECONDS - start )) s)"
  python -m mage_tune search "$family" --shape "$shape" --trials "$trials" --warm-start "${WARM:-other-shapes}" --gpus all \
    --workers "$workers" --seed 0 --run-dir "$out/$tag" --json > "$out/$tag.json" 2> "$out/$tag.log"
  echo "exit $? after $(( SECONDS - start )) s" >> "$out/$tag.log"
  tail -n 3 "$out/$tag.log"
  tar czf "$out/../$family.tgz" -C "$out" --exclude=study.db --exclude='*.sass' --exclude='*.ptx' .
done
