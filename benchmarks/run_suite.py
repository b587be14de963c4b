"""Run a benchmark suite (benchmarks/suites/NAME.toml; suite_record.py says what a suite file holds): per shape one
`mage-tune search`, leave-shape-out style (`--warm-start other-shapes`: the warm start may use every record of the
tuning database but that shape's own; searches done earlier in the same call are in the database too), then one
suite record of what they found.

    python benchmarks/run_suite.py benchmarks/suites/layernorm-h200.toml --out runs/suite-layernorm \
        [--db URL] [--gpus all|0,1] [--dry-run]

Each search runs as an argument list, never through a shell:

    python -m mage_tune search FAMILY --shape DIM=V,... --trials N --sampler S --warm-start W [--seed N]
        [--workers N] [--polish N] [--gpus G] [--db URL] --run-dir OUT/FAMILY-SHAPE

its output in OUT/FAMILY-SHAPE.log. Running the suite again resumes each search where it stopped (a finished one
adds nothing). The record is OUT/NAME.json (schema mage-tune.suite/1); `python benchmarks/results_table.py
OUT/NAME.json` prints its table. --dry-run prints the commands and runs nothing. Exit status 1 where a search
failed or scored nothing (its shape is then missing from the record), 2 for a suite that cannot be run.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite_record
from suite_record import SuiteError


def commands(suite: dict, family_name: str, out: Path, db: str | None = None, gpus: str | None = None):
    """(tag, argument list) per shape of the suite, in its order."""
    gpus = gpus or suite.get("gpus")
    found = []
    for shape in suite["shapes"]:
        tag = suite_record.tag(family_name, shape)
        argv = [sys.executable, "-m", "mage_tune", "search", suite["family"], "--shape", suite_record.shape_text(shape)]
        argv += ["--trials", str(suite["trials"]), "--sampler", suite["sampler"], "--warm-start", suite["warm_start"]]
        for key in ("seed", "workers", "polish"):
            if key in suite:
                argv += [f"--{key}", str(suite[key])]
        argv += ["--gpus", gpus] if gpus else []
        argv += ["--db", db] if db else []
        found.append((tag, [*argv, "--run-dir", str(out / tag)]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", help="a suite file, or the name of one in benchmarks/suites/")
    parser.add_argument("--out", type=Path, required=True, help="folder of the run directories and the record")
    parser.add_argument("--db", default=None, help="tuning database URL of every search (default: $MAGE_TUNE_DB)")
    parser.add_argument("--gpus", default=None, help="--gpus of every search (default: the suite's)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)
    try:
        suite = suite_record.load(args.suite)
        family = suite_record.family_of(suite)
    except SuiteError as error:
        print(f"run_suite.py: {error}", file=sys.stderr)
        return 2
    planned = commands(suite, family.name, args.out, args.db, args.gpus)
    if args.dry_run:
        for _, command in planned:
            print(shlex.join(command))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    rows, failed = [], []
    for tag, command in planned:
        print(f"== {tag}", flush=True)
        with open(args.out / f"{tag}.log", "w") as log:
            code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
        try:
            if code != 0:
                raise SuiteError(f"the search ended with exit status {code}")
            rows.append(suite_record.from_run_dir(args.out / tag))
        except SuiteError as error:
            failed.append(tag)
            print(f"run_suite.py: {tag}: {error} (log: {args.out / f'{tag}.log'})", file=sys.stderr)
    made = suite_record.make(suite, rows, made_by="run_suite")
    path = args.out / f"{suite['name']}.json"
    path.write_text(json.dumps(made, indent=1) + "\n")
    print(f"{path}: {len(rows)} of {len(planned)} shapes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
