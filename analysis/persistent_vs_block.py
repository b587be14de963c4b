"""Persistent layer norms against a block per row group, from the tuning database: per shape with both measured, the
fastest persistent config (persist > 0) over the fastest one-group-per-block config (persist = 0). The static model's
walk twin rests on this (docs/static-model.md).

    MAGE_TUNE_DB=URL bash benchmarks/gpu/seed_tuning_db.sh    # every committed record in one database
    python analysis/persistent_vs_block.py --db URL [--arch sm_90]
"""

from __future__ import annotations

import argparse
import json
import statistics

from tabulate import tabulate

from mage_tune.tuning.db import TuningDB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="tuning database URL")
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args()
    best: dict[str, dict[bool, float]] = {}
    for e in TuningDB(args.db).entries(family="layernorm", arch=args.arch):
        if e.measured:
            per_shape = best.setdefault(json.dumps(e.run.shape, sort_keys=True), {})
            persistent = bool(e.config.get("persist", 0))
            per_shape[persistent] = min(per_shape.get(persistent, e.value), e.value)
    rows = [
        (shape, times[True], times[False], times[True] / times[False])
        for shape, times in sorted(best.items())
        if len(times) == 2
    ]
    headers = ["shape", "persistent µs", "a group per block µs", "ratio"]
    print(tabulate(rows, headers, tablefmt="github", floatfmt=".3f"))
    if rows:
        ratios = [r[3] for r in rows]
        spread = f"{min(ratios):.3f}-{max(ratios):.3f}, median {statistics.median(ratios):.3f}"
        print(f"\n{len(rows)} shapes: ratio {spread}")


if __name__ == "__main__":
    main()
