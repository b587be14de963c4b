"""Tables of crossed bench records (benchmarks/gpu/crossed_bench.sh, sourced by rebench_winners.sh, rows_sweep.sh and
the campaigns' crossing scripts, scripts/ in their archives): one table per shape, a row per variant named by the
knobs that vary within that record, its median time (cold regime), and its ratio to the baseline of the same run —
cuBLAS FP32 for the matmul families; Triton's best num_warps for layer norm, with the variant's share of Triton's
distance to the same-bytes copy.

    python analysis/crossed_bench.py records/h200-2026-12-01-template-ceiling.tar.xz:ceiling [--markdown OUT.md]
        [--errors]

FOLDER is a folder of bench records: a member of a campaign archive (ARCHIVE:FOLDER) or a folder on disk
(analysis/archives.py).

--errors adds each row's relative error against the float64 reference (the baseline's in the heading).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tabulate import tabulate

from mage_tune.measure.saved import best_result, result_time, varying_knobs

sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis/archives.py
from archives import RecordsError, local_one

from mage_tune.outputs import refuse_existing


def fastest(results: list[dict], kind: str) -> float | None:
    times = [result_time(r) for r in results if r["kind"] == kind and r["ok"]]
    return min((t for t in times if t is not None), default=None)


def table(record: dict, errors: bool = False) -> tuple[str, list[str], list[list]]:
    """(heading, headers, rows) of one bench record; with `errors`, each row's relative error too."""
    results = record["results"]
    variants = [r for r in results if r["kind"] == "variant"]
    knobs = varying_knobs([r["config"] for r in variants]) or ["label"]
    shape = ",".join(f"{k}={v}" for k, v in record["shape"].items())
    copy = fastest(results, "copy")
    if copy is None:  # a matmul family: no same-bytes copy, cuBLAS FP32 is the baseline
        base = fastest(results, "torch")
        heading = f"### {record['family']} {shape} (cuBLAS FP32 {base:.1f} µs"
        if errors:
            heading += f", relative error {best_result(record, 'torch')['rel_err']:.1e}"
        heading += ")"
        headers = [", ".join(knobs), "µs", "/cuBLAS"]
    else:
        base = fastest(results, "triton")
        heading = f"### {record['family']} {shape} (Triton best {base:.2f} µs, copy {copy:.2f} µs)"
        headers = [", ".join(knobs), "µs", "/Triton", "(ours-copy)/(Triton-copy)"]
    rows = []
    for r in variants:
        t = result_time(r) if r["ok"] else None
        if knobs == ["label"]:
            name = r["label"]
        elif len(knobs) == 1:
            name = str(r["config"][knobs[0]])
        else:
            name = ", ".join(f"{k}={r['config'][k]}" for k in knobs)
        row = [name, f"{t:.{1 if copy is None else 2}f}" if t else r.get("error", "failed")]
        row.append(f"{t / base:.3f}" if t else "-")
        if copy is not None:
            gap = (t - copy) / (base - copy) if t and base > copy else None
            row.append(f"{gap:.2f}" if gap is not None else "-")
        if errors:
            row.append(f"{r['rel_err']:.1e}" if r.get("rel_err") is not None else "-")
        rows.append(row)
    return heading, [*headers, "rel. error"] if errors else headers, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a folder of bench records: ARCHIVE:FOLDER or a folder on disk")
    parser.add_argument("--markdown", type=Path, default=None, help="Also write the tables here.")
    parser.add_argument("--errors", action="store_true", help="Add each row's relative error.")
    parser.add_argument("--force", action="store_true", help="replace an output file that exists")
    args = parser.parse_args()
    refuse_existing("crossed_bench.py", args.markdown, force=args.force)
    try:
        folder = local_one(args.folder)
    except RecordsError as error:
        raise SystemExit(f"crossed_bench.py: {error}") from None
    out = []
    for path in sorted(folder.glob("*.json")):
        if path.name.endswith((".configs.json", ".winner.json", ".bases.json")) or path.name.startswith("ncu-"):
            continue
        record = json.loads(path.read_text())
        if "results" not in record:  # not a bench record
            continue
        heading, headers, rows = table(record, args.errors)
        out += [heading + "\n", tabulate(rows, headers, tablefmt="github"), ""]
    text = "\n".join(out)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
