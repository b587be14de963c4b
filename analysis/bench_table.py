"""Headline table from committed `mage-tune bench --out` records: per record, the best passing variant, Triton's
best config, torch, the floor and % of floor, all from the same session of the same run.

    python analysis/bench_table.py records/h200-2026-11-29.tar.xz:ln_d768_all.json ... [--regime cold] [--markdown]

A RECORD is a file on disk or a member of a campaign archive, ARCHIVE:MEMBER (a glob too: analysis/archives.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tabulate import tabulate

from mage_tune.measure.saved import best_result, floor_us, read_record, result_time

sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis/archives.py
from archives import RecordsError, local_all


def summarize(path: Path, regime: str) -> list | None:
    record = read_record(path, "mage-tune.bench/")
    best = {kind: best_result(record, kind, regime) for kind in ("variant", "triton", "torch")}
    if not any(best.values()):
        return None
    floor = floor_us(record)
    ours = best.get("variant")
    tri = best.get("triton")
    torch = best.get("torch")
    t_ours = result_time(ours, regime) if ours else None
    t_tri = result_time(tri, regime) if tri else None
    t_torch = result_time(torch, regime) if torch else None
    checked = sum(1 for r in record["results"] if r["kind"] == "variant")
    failed = sum(1 for r in record["results"] if r["kind"] == "variant" and not r["ok"])
    return [
        " × ".join(str(v) for v in record["shape"].values()),
        f"{t_ours:.2f}" if t_ours else "-",
        f"{t_tri:.2f}" if t_tri else "-",
        f"{t_torch:.2f}" if t_torch else "-",
        f"{floor:.2f}",
        f"{floor / t_ours:.0%}" if t_ours else "-",
        f"{t_ours / t_tri:.2f}" if (t_ours and t_tri) else "-",
        f"{t_ours / t_torch:.2f}" if (t_ours and t_torch) else "-",
        f"{checked} ({failed} failed)",
        ours["label"] if ours else "-",
        path.name,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="bench records: files, or ARCHIVE:MEMBER")
    parser.add_argument("--regime", default="cold")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    try:
        paths = local_all(args.records)
    except RecordsError as error:
        raise SystemExit(f"bench_table.py: {error}") from None
    rows = [row for path in paths if (row := summarize(path, args.regime))]
    headers = [
        "shape",
        "best variant µs",
        "Triton best µs",
        "torch µs",
        "floor µs",
        "% floor",
        "ours/Triton",
        "ours/torch",
        "variants",
        "best config",
        "record",
    ]
    print(tabulate(rows, headers=headers, tablefmt="github" if args.markdown else "simple", disable_numparse=True))


if __name__ == "__main__":
    main()
