"""The tables of docs/results.md from suite records (run_suite.py, suite_from_runs.py): per record one table, a row
per shape: ours, each baseline of the suite (the fastest of its kind, from the same run), ours over the best
baseline that is not the copy, (ours − copy)/(Triton − copy), trials to within 3 % of the run's best, the record.

    python benchmarks/results_table.py SUITE_RECORD.json... [--markdown [--links-from docs]]

--markdown: GitHub tables, each under its suite's and family's names, each record linked (an archive member as a
link to records/CAMPAIGN.tar.xz and the member's name; --links-from: the folder the links are relative to, default
the current one), each table followed by the median trials to within 3 %. Without it: plain tables under the
suite, family, GPU and date.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite_record
from suite_record import REPORTS, SuiteError

from mage_tune.textwidth import table

NAMES = {"triton": "Triton best", "torch": "torch", "copy": "copy"}


def _link(run: str, links_from: Path) -> str:
    archive, sep, member = run.partition(".tar.xz:")
    if not sep:
        return f"`{run}`"
    target = os.path.relpath(Path(archive + ".tar.xz").resolve(), links_from.resolve())
    return f"[{Path(archive).name}]({target}) `{member}`"


def rows(record: dict, markdown: bool = False, links_from: Path = Path(".")) -> tuple[list[str], list[list[str]]]:
    settings = record["settings"]
    names = {**NAMES, **settings.get("names", {})}
    kinds, report = settings["baselines"], settings.get("report", [])
    dims = record["shapes"][0]["shape"] if record["shapes"] else {}
    headers = [" × ".join(dims) or "shape", "ours µs", *(f"{names[k]} µs" for k in kinds)]
    headers += [REPORTS[r] for r in REPORTS if r in report] + ["record"]
    out = []
    for row in record["shapes"]:
        cells = [" × ".join(str(v) for v in row["shape"].values()), f"{row['best_us']:.2f}"]
        cells += [_number(row["baselines_us"].get(k), 2) for k in kinds]
        if "ratio" in report:
            cells.append(_number(row["ratio_best_baseline"], 3))
        if "copy_gap" in report:
            cells.append(_number(row["copy_gap"], 2))
        if "within_3pct" in report:
            reached = row["within_3pct"]
            cells.append(str(reached) if reached else f"> {row['trials']}" if row["trials"] else "–")
        out.append([*cells, _link(row["run"], links_from) if markdown else row["run"]])
    return headers, out


def _number(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def median_reach(record: dict) -> str:
    """The median trials to within 3 % over the record's searches (one that never came within 3 % ranks last)."""
    reach = [r["within_3pct"] or float("inf") for r in record["shapes"] if r["kind"] == "search"]
    if not reach or "within_3pct" not in record["settings"].get("report", []):
        return ""
    return f"Median trials to within 3 %: {statistics.median(reach):g} over {len(reach)} shapes."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path, help="suite records (JSON)")
    parser.add_argument("--markdown", action="store_true", help="GitHub tables with the records linked")
    parser.add_argument("--links-from", type=Path, default=Path("."), help="the folder links are relative to")
    args = parser.parse_args(argv)
    parts = []
    for path in args.records:
        try:
            record = suite_record.read(path)
        except SuiteError as error:
            print(f"results_table.py: {error}", file=sys.stderr)
            return 2
        headers, body = rows(record, args.markdown, args.links_from)
        head = f"{record['suite']} ({record['family']}; {record['gpu'] or 'no GPU'}, {record['date'] or 'undated'})"
        if args.markdown:
            head = f"Suite `{record['suite']}`, family `{record['family']}`:\n"
        text = head + "\n" + table(body, headers, "github" if args.markdown else "simple", fit=False)
        parts.append("\n\n".join(filter(None, [text, median_reach(record)])))
    print("\n\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
