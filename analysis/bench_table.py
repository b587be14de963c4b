"""Headline table from committed `mage-tune bench --out` records: per record, the best passing variant, Triton's
best config, torch, the floor and % of floor, all from the same session of the same run.

    python analysis/bench_table.py runs/h200/*.json [--regime cold] [--markdown]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tabulate import tabulate


def _time(result: dict, regime: str) -> float | None:
    return next((t["median_us"] for t in result["timings"] if t["regime"] == regime), None)


def summarize(path: Path, regime: str) -> list | None:
    record = json.loads(path.read_text())
    session = record["sessions"][0]
    results = [r for r in record["results"] if r["ok"] and r["session"] == 0 and _time(r, regime) is not None]
    if not results:
        return None
    best = {}
    for r in results:
        group = r["kind"]
        if group not in best or _time(r, regime) < _time(best[group], regime):
            best[group] = r
    if record["flops"]:
        floor = record["flops"] / (session["fp32_tflops"] * 1e12) * 1e6
    else:
        floor = record["bytes_moved"] / (session["copy_gbs"] * 1e9) * 1e6
    ours = best.get("variant")
    tri = best.get("triton")
    torch = best.get("torch")
    t_ours = _time(ours, regime) if ours else None
    t_tri = _time(tri, regime) if tri else None
    t_torch = _time(torch, regime) if torch else None
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
