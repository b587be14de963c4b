"""Headline table from committed `mage-tune bench --out` records: per record, the best passing variant, Triton's
best config, torch, the floor and % of floor, all from the same session of the same run.

    python analysis/bench_table.py runs/h200/*.json [--regime cold] [--markdown]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tabulate import tabulate

from mage_tune.measure.saved import best_result, floor_us, read_record, result_time


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
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--regime", default="cold")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rows = [row for path in args.records if (row := summarize(path, args.regime))]
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
