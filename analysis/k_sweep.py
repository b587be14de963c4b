"""Where a matmul's time goes as K grows: bench records of one family at one M × N and several K (e.g.
`benchmarks/gpu/k_sweep_checks.sh`), and per variant and per baseline the least-squares line time = fixed + per_64 ·
K / 64 over the K values. `per_64` is the cost of 64 more of K over the whole of C: the main loop's rate and whatever
scales with a tile's length, the last wave's idle SMs included (a tile lasts longer as K grows); `fixed` is what does
not grow with K: the launch, each tile's prologue and epilogue, the drain of its last wgmma. A variant behind cuBLAS by
its `fixed` loses between tiles; behind by its `per_64`, in the main loop or the wave count. A variant's waves
(explain's tail: its tiles, or stream-K's k-tiles, over the blocks resident at once) and its `per_64` with whole waves
(times the share of its last wave's slots that hold work) part the two: the latter compares main loops.

    python analysis/k_sweep.py FOLDER [--regime cold] [--min-k K] [--markdown OUT.md] [--json OUT.json]

FOLDER is a folder of bench records (a member of a campaign archive, ARCHIVE:FOLDER, or a folder on disk:
analysis/archives.py): one table per family and M × N, each record's session 0 (times of one run); a variant or
baseline enters the fit where it was timed at three K values or more. --min-k leaves out the records of a smaller K
(e.g. where cuBLAS's heuristics pick another kernel than at the larger ones, which no one line fits).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy
from tabulate import tabulate

from mage_tune.errors import MageError
from mage_tune.kernels import recorded
from mage_tune.measure.explain import bound_fractions
from mage_tune.measure.saved import read_record, result_time, varying_knobs
from mage_tune.outputs import refuse_existing

sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis/archives.py
from archives import RecordsError, local_one

MIN_POINTS = 3  # a line through two points says nothing about how well it fits


def _name(result: dict, knobs: list[str]) -> str:
    if result["kind"] != "variant":
        return result["label"]
    return ", ".join(f"{k}={result['config'].get(k)}" for k in knobs) or result["label"]


def _complete(record: dict):
    """A built-in family's knobs added since a record was written, at their defaults (what it was measured with), so
    one config is one variant whatever its record's date; a family file's configs as recorded (records never load
    code: recorded.family_for says which family serves a record)."""
    family, _ = recorded.family_for(record)
    return family.with_defaults if family is not None else dict


def _tail(record: dict, result: dict) -> dict | None:
    """A variant's waves of work over the resident blocks (explain's tail: tiles, or stream-K's k-tiles, over the
    blocks the census lets run at once); None for a baseline, whose tiles no record says."""
    if result["kind"] != "variant":
        return None
    return bound_fractions(record, result, result_time(result))["tail"]


def sweeps(records: list[dict], regime: str = "cold") -> list[tuple[dict, list[dict]]]:
    """(family, M, N; its sweep's rows) for each family and M × N of the records, in order."""
    groups: dict[tuple[str, int, int], list[dict]] = {}
    for record in records:
        groups.setdefault((record["family"], record["shape"]["m"], record["shape"]["n"]), []).append(record)
    return [({"family": f, "m": m, "n": n}, sweep(chosen, regime)) for (f, m, n), chosen in sorted(groups.items())]


def sweep(records: list[dict], regime: str = "cold") -> list[dict]:
    """Per variant (by config) and baseline (by label) of one family's records at one M × N timed at MIN_POINTS K
    values or more: its times by K, the fitted fixed µs and µs per 64 of K, and the largest residual's share of the
    time."""
    times: dict[str, dict[int, float]] = {}
    results: dict[str, dict] = {}
    longest: dict[str, tuple[dict, dict]] = {}  # each key's record and result at its largest K, for its waves
    complete = _complete(records[0]) if records else dict
    for record in records:
        k = record["shape"]["k"]
        for r in record["results"]:
            t = result_time(r, regime) if r["ok"] and r["session"] == 0 else None
            if t is None:
                continue
            if r["kind"] == "variant":
                r = {**r, "config": complete(r["config"])}
            key = r["label"] if r["kind"] != "variant" else json.dumps(r["config"], sort_keys=True)
            results.setdefault(key, r)
            times.setdefault(key, {})[k] = min(t, times.get(key, {}).get(k, t))
            if key not in longest or k > longest[key][0]["shape"]["k"]:
                longest[key] = (record, r)
    variants = [r for r in results.values() if r["kind"] == "variant"]
    knobs = varying_knobs([r["config"] for r in variants])
    rows = []
    for key, by_k in times.items():
        if len(by_k) < MIN_POINTS:
            continue
        xs = numpy.array(list(by_k)) / 64
        ys = numpy.array(list(by_k.values()))
        slope, fixed = numpy.polyfit(xs, ys, 1)
        worst = float(numpy.max(numpy.abs(ys - (fixed + slope * xs)) / ys))
        result = results[key]
        tail = _tail(*longest[key])
        rows.append(
            {
                "name": _name(result, knobs),
                "kind": result["kind"],
                "times_us": dict(sorted(by_k.items())),
                "fixed_us": float(fixed),
                "per_64_us": float(slope),
                "worst_residual": worst,
                "waves": tail["waves"] if tail else None,
                "per_64_whole_waves_us": float(slope) * (1 - tail["idle"]) if tail else None,
            }
        )
    rows.sort(key=lambda row: (row["kind"] == "variant", row["fixed_us"] + row["per_64_us"] * 40))
    return rows


def table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    ks = sorted({k for row in rows for k in row["times_us"]})
    base = next((row for row in rows if row["kind"] == "torch"), None)
    headers = ["variant", *(f"K={k}" for k in ks), "fixed µs", "µs/64 K", "fit", "waves", "µs/64 K, whole waves"]
    if base:
        headers += ["fixed/cuBLAS", "per 64/cuBLAS"]
    body = []
    for row in rows:
        line = [row["name"], *(f"{row['times_us'][k]:.2f}" if k in row["times_us"] else "-" for k in ks)]
        line += [f"{row['fixed_us']:.2f}", f"{row['per_64_us']:.3f}", f"{row['worst_residual']:.1%}"]
        whole = row.get("per_64_whole_waves_us")
        line += [f"{row['waves']:.2f}", f"{whole:.3f}"] if whole is not None else ["-", "-"]
        if base:  # a line through cuBLAS's times can meet zero or below: no ratio to it then
            line += [
                f"{row[key] / base[key]:.{digits}f}" if base[key] > 0 else "-"
                for key, digits in (("fixed_us", 2), ("per_64_us", 3))
            ]
        body.append(line)
    return headers, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a folder of bench records: ARCHIVE:FOLDER or a folder on disk")
    parser.add_argument("--regime", default="cold", help="the timing regime fitted (default cold)")
    parser.add_argument("--min-k", type=int, default=0, help="leave out the records of a smaller K")
    parser.add_argument("--markdown", type=Path, default=None, help="Also write the table here.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the rows here.")
    parser.add_argument("--force", action="store_true", help="replace an output file that exists")
    args = parser.parse_args(argv)
    try:
        refuse_existing("k_sweep.py", args.markdown, args.json, force=args.force)
        folder = local_one(args.folder)
        records = [
            read_record(path, "mage-tune.bench/")
            for path in sorted(folder.glob("bench-*.json"))
            if not path.name.endswith(".configs.json")
        ]
    except (RecordsError, MageError) as error:
        print(f"k_sweep.py: {error}", file=sys.stderr)
        return 1
    records = [r for r in records if {"m", "n", "k"} <= set(r["shape"]) and r["shape"]["k"] >= args.min_k]
    if not records:
        at = f" at K >= {args.min_k}" if args.min_k else ""
        print(f"k_sweep.py: no matmul bench records (bench-*.json){at} in {args.folder}", file=sys.stderr)
        return 1
    fitted = [(shape, rows) for shape, rows in sweeps(records, args.regime) if rows]
    if not fitted:
        print(f"k_sweep.py: nothing was timed at {MIN_POINTS} K values or more in {args.folder}", file=sys.stderr)
        return 1
    texts = []
    for shape, rows in fitted:
        headers, body = table(rows)
        heading = f"### {shape['family']} at M = {shape['m']}, N = {shape['n']} ({args.regime}, µs)"
        texts.append(heading + "\n\n" + tabulate(body, headers, tablefmt="github") + "\n")
    text = "\n".join(texts)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        sweeps_json = [{"shape": shape, "regime": args.regime, "rows": rows} for shape, rows in fitted]
        args.json.write_text(json.dumps(sweeps_json, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
