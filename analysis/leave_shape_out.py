"""The leave-shape-out evaluation, rebuilt from its run directories alone (made by benchmarks/run_suite.py).

Per held-out shape: the trials the search took until one came within 3 % of the best known config of the template
at that shape (the best of this search and of every other record of that shape in the tuning database, when given),
the final best time, and its ratio to the baselines timed in the same run: cuBLAS FP32 (matmul) or torch, Triton at
its best config, and the same-bytes copy (layer norm). Also where the trials that reached 3 % came from.

    python analysis/leave_shape_out.py RUN_FOLDER... [--db URL] [--latest] [--json out.json] [--figure out.png]

A RUN_FOLDER holds one run directory per shape: a folder on disk, or a member of a campaign archive, ARCHIVE:FOLDER
(records/h200-2026-12-01-tensor-core.tar.xz:searches; analysis/archives.py).

With --latest, a shape searched in several folders is reported once, by the search in the folder named last (name
the folders oldest first): where the protocol stands today, one search per shape.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from tabulate import tabulate

from mage_tune.measure.saved import result_time
from mage_tune.search import record

sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis/archives.py
from archives import RecordsError, local_all

from mage_tune.outputs import refuse_existing

WITHIN = 1.03


def baselines(run_dir: Path) -> dict[str, float]:
    """Fastest time of each baseline kind (triton, torch, copy), the median over the run's sessions (GPUs)."""
    per_label: dict[tuple[str, str], list[float]] = {}
    for b in record.baselines(run_dir):
        r = b["result"]
        t = result_time(r) if r["ok"] else None
        if t is not None:
            per_label.setdefault((r["kind"], r["label"]), []).append(t)
    out: dict[str, float] = {}
    for (kind, _), times in per_label.items():
        out[kind] = min(out.get(kind, float("inf")), statistics.median(times))
    return out


def known_best(db_url: str | None, family: str, shape: dict) -> float | None:
    if not db_url:
        return None
    from mage_tune.tuning.db import TuningDB

    values = [e.value for e in TuningDB(db_url).entries(family=family) if e.measured and e.run.shape == shape]
    return min(values, default=None)


def summarise(run_dir: Path, db_url: str | None) -> dict | None:
    identity = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else None
    if not identity:
        return None
    trials = sorted(record.trials(run_dir), key=lambda t: t["number"])
    measured = [t for t in trials if t["outcome"] == "measured"]
    if not measured:
        return None
    best = min(t["value"] for t in measured)
    known = min(filter(None, [best, known_best(db_url, identity["family"], identity["shape"])]))
    # The first trial within 3 %; None when none came that close (a weaker search than the record that set `known`).
    reach = next(
        (i + 1 for i, t in enumerate(trials) if t["outcome"] == "measured" and t["value"] <= known * WITHIN), None
    )
    winner = min(measured, key=lambda t: t["value"])
    base = baselines(run_dir)
    return {
        "family": identity["family"],
        "shape": identity["shape"],
        "trials": len(trials),
        "trials_to_within_3pct": reach,
        "reached_by": trials[reach - 1].get("source", "") if reach else "",
        "best_us": best,
        "best_known_us": known,
        "winner_source": winner.get("source", ""),
        "winner_config": winner["config"],
        "baselines_us": base,
        "ratio": {kind: best / t for kind, t in base.items()},
        # how much of Triton's distance to the same-bytes copy remains in ours (layer norm's target: <= 0.5)
        "gap_to_copy_vs_triton": (
            (best - base["copy"]) / (base["triton"] - base["copy"])
            if "copy" in base and "triton" in base and base["triton"] > base["copy"]
            else None
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="folders holding one run directory per shape (or ARCHIVE:FOLDER)")
    parser.add_argument("--db", default=None, help="tuning database whose records of each shape count as known")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--figure", type=Path, default=None)
    parser.add_argument("--latest", action="store_true", help="one search per shape: the one in the last folder")
    parser.add_argument("--force", action="store_true", help="replace an output file that exists")
    args = parser.parse_args()
    refuse_existing("leave_shape_out.py", args.json, force=args.force)
    try:
        folders = local_all(args.folders)
    except RecordsError as error:
        raise SystemExit(f"leave_shape_out.py: {error}") from None
    rows = []
    for folder in folders:
        for run_dir in sorted(p.parent for p in folder.glob("*/run.json")):
            summary = summarise(run_dir, args.db)
            if summary:
                rows.append(summary)
    if args.latest:
        latest = {(r["family"], json.dumps(r["shape"], sort_keys=True)): r for r in rows}  # later folders overwrite
        rows = sorted(latest.values(), key=lambda r: (r["family"], *r["shape"].values()))
    table = []
    for r in rows:
        ratio = r["ratio"]
        table.append(
            [
                r["family"],
                ",".join(f"{k}={v}" for k, v in r["shape"].items()),
                r["trials"],
                r["trials_to_within_3pct"] or f"> {r['trials']}",
                r["reached_by"].split(" (", 1)[0],
                f"{r['best_us']:.2f}",
                *(f"{ratio[k]:.3f}" if k in ratio else "-" for k in ("torch", "triton", "copy")),
                "-" if r["gap_to_copy_vs_triton"] is None else f"{r['gap_to_copy_vs_triton']:.2f}",
            ]
        )
    headers = [
        "family",
        "shape",
        "trials",
        "to 3 %",
        "first within 3 % from",
        "best µs",
        "/torch",
        "/triton",
        "/copy",
        "(ours-copy)/(triton-copy)",
    ]
    print(tabulate(table, headers, tablefmt="github"))
    for family in sorted({r["family"] for r in rows}):
        # a search that never came within 3 % ranks above every one that did
        reach = [r["trials_to_within_3pct"] or math.inf for r in rows if r["family"] == family]
        print(f"\n{family}: median trials to within 3 % = {statistics.median(reach)} over {len(reach)} shapes")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.figure:
        figure(rows, args.figure)


def figure(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = sorted({r["family"] for r in rows})
    gaps = any(r["gap_to_copy_vs_triton"] is not None for r in rows)  # layer norm's target has its own panel
    fig, axes = plt.subplots(
        3 if gaps else 2, len(families), figsize=(6.5 * len(families), 10.5 if gaps else 7), squeeze=False
    )
    for col, family in enumerate(families):
        mine = [r for r in rows if r["family"] == family]
        labels = ["×".join(str(v) for v in r["shape"].values()) for r in mine]
        x = range(len(mine))
        ax = axes[0][col]
        for offset, kind in ((-0.2, "torch"), (0.2, "triton")):
            ax.bar([i + offset for i in x], [r["ratio"].get(kind, 0) for r in mine], 0.4, label=f"ours / {kind}")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_title(f"{family}: best after the search, over baselines of the same run (H200, cold)", fontsize=9)
        ax.set_xticks(list(x), labels, rotation=45, ha="right", fontsize=7)
        ax.legend(fontsize=8, loc="lower left")
        ax = axes[1][col]
        ax.bar(list(x), [r["trials_to_within_3pct"] or r["trials"] for r in mine], color="tab:green")  # never: all
        ax.set_title(f"{family}: trials until within 3 % of the best known (held-out shape)", fontsize=9)
        ax.set_xticks(list(x), labels, rotation=45, ha="right", fontsize=7)
        if gaps:
            ax = axes[2][col]
            ax.bar(list(x), [r["gap_to_copy_vs_triton"] or 0 for r in mine], color="tab:purple")
            ax.axhline(0.5, color="black", linewidth=0.8, linestyle="--")  # the target: at most half of Triton's
            ax.set_title(f"{family}: (ours - copy) / (Triton - copy), same run; target <= 0.5", fontsize=9)
            ax.set_xticks(list(x), labels, rotation=45, ha="right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
