"""A suite record (schema mage-tune.suite/1) from searches that already ran — a campaign's run directories in
records/CAMPAIGN.tar.xz, or your own under runs/ — read as run_suite.py reads its own.

    python benchmarks/suite_from_runs.py --suite layernorm-h200 [--latest] [--out FILE] RUN...

RUN: a search's run directory, a folder of run directories, or a bench record (`mage-tune bench --out`: its fastest
variant and baselines of one session; a bench has no trial order, so no trials to within 3 %); each also as
ARCHIVE:MEMBER or 'ARCHIVE:PATTERN' (analysis/archives.py), which the record then names. --suite: a suite file or
the name of one in benchmarks/suites/: the runs must be of its family; a shape outside it is skipped (said on
stderr). --latest: a shape given more than once is taken from the run named last (name campaigns oldest first);
without it that is an error. The record goes to FILE (default: standard output).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mage_tune.outputs import refuse_existing

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "analysis"))
import suite_record  # noqa: E402
from archives import RecordsError, local_all, shown  # noqa: E402
from suite_record import SuiteError  # noqa: E402


def run_paths(paths: list[Path]) -> list[Path]:
    """Run directories and bench records: a folder without trials.jsonl stands for the run directories in it."""
    found = []
    for path in paths:
        if path.is_dir() and not (path / "trials.jsonl").exists():
            found += sorted(p.parent for p in path.glob("*/trials.jsonl"))
        else:
            found.append(path)
    return found


def rows_of(suite: dict, paths: list[Path], latest: bool) -> list[dict]:
    rows: dict[str, dict] = {}
    for path in run_paths(paths):
        row = suite_record.row_of(path)
        row["run"] = shown(path)
        if not suite_record.matches(suite, row):
            raise SuiteError(f"{row['run']}: a run of {row['origin']}, not of the suite's {suite['family']}")
        key = suite_record.shape_text(row["shape"])
        if not suite_record.in_suite(suite, row):
            print(f"suite_from_runs.py: {row['run']}: {key} is not in {suite['name']}; skipped", file=sys.stderr)
            continue
        if key in rows and not latest:
            raise SuiteError(f"{key}: given by {rows[key]['run']} and {row['run']} (--latest takes the last)")
        rows[key] = row
    return list(rows.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories, folders of them, bench records (or ARCHIVE:MEMBER)")
    parser.add_argument("--suite", required=True, help="a suite file, or the name of one in benchmarks/suites/")
    parser.add_argument("--latest", action="store_true", help="a shape given twice: the run named last")
    parser.add_argument("--out", type=Path, default=None, help="the record's file (default: standard output)")
    parser.add_argument("--force", action="store_true", help="replace an output file that exists")
    args = parser.parse_args(argv)
    refuse_existing("suite_from_runs.py", args.out, force=args.force)
    try:
        suite = suite_record.load(args.suite)
        made = suite_record.make(suite, rows_of(suite, local_all(args.runs), args.latest), "suite_from_runs")
    except (SuiteError, RecordsError) as error:
        print(f"suite_from_runs.py: {error}", file=sys.stderr)
        return 2
    text = json.dumps(made, indent=1) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"{args.out}: {len(made['shapes'])} shapes" + (f", missing {made['missing']}" if made["missing"] else ""))
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
