"""The published records (records/CAMPAIGN.tar.xz) read as they are, each campaign extracted into a temporary folder:
every run directory and every bench record by the reader `db import` uses (bounded, validated), a sample of each by
`db import` itself, `mage-tune report` and `mage-tune explain` (`report` where nothing was timed); the crossed-bench
tables a campaign keeps beside its records are what analysis/crossed_bench.py makes of them; the index
(records/README.md) names every archive.

The only tests that read records/ (marker `records`: `pytest -m records` runs them alone, `pytest -m "not records"`
leaves them out); every other test reads the small fixtures of tests/fixtures/. The sample is up to SAMPLED run
directories and SAMPLED bench records of each campaign (the first, the last and others evenly between): each campaign
adds records, and writing all of them to a database cost CI minutes for no new kind of record."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from mage_tune.cli import cli
from mage_tune.errors import InputError
from mage_tune.measure.saved import timed_results
from mage_tune.search.sources import load_path

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "records"
ARCHIVES = sorted(RECORDS.glob("*.tar.xz"))
SAMPLED = 5
BENCH = '"schema": "mage-tune.bench/'
# crossed-bench tables kept as FOLDER.md beside FOLDER/ (analysis/crossed_bench.py FOLDER [FLAGS])
TABLE_FLAGS = {"tensor_core": ["--errors"]}
TABLE_SKIPPED = {"affine-l2-only"}  # its folder stays packed inside the archive (affine-l2-only.tgz)
# campaigns of device logs and a benchmark script's own JSON only (no bench record, no run directory)
SCRIPT_ONLY = {"h100-2026-12-07d-split-share"}

pytestmark = pytest.mark.records


def _campaign(archive: Path) -> str:
    return archive.name.removesuffix(".tar.xz")


@pytest.fixture(scope="module")
def extracted(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("records")
    for archive in ARCHIVES:
        with tarfile.open(archive, "r:xz") as tar:
            tar.extractall(root / _campaign(archive), filter="data")
    return root


def _cli(*args: str, db: str | None = None):
    env = {"COLUMNS": "100", **({"MAGE_TUNE_DB": db} if db else {})}
    return CliRunner().invoke(cli, list(args), env=env)


def _bench_records(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json") if BENCH in p.read_text(errors="replace")[:200])


def _run_dirs(folder: Path) -> list[Path]:
    return sorted(p.parent for p in folder.rglob("trials.jsonl"))


def _sample(paths: list[Path]) -> list[Path]:
    """Up to SAMPLED of the paths: the first, the last and others evenly between."""
    if len(paths) <= SAMPLED:
        return paths
    return [paths[round(i * (len(paths) - 1) / (SAMPLED - 1))] for i in range(SAMPLED)]


def _fits(output: str) -> bool:
    return max((len(line) for line in output.splitlines()), default=0) <= 100


def test_there_are_records_and_the_index_names_each():
    index = (RECORDS / "README.md").read_text()
    listed = set(re.findall(r"^\| \[([a-z0-9]+-\d{4}-\d{2}-\d{2}[\w-]*)\]", index, re.M))
    assert len(ARCHIVES) >= 15 and listed == {_campaign(a) for a in ARCHIVES}
    for archive in ARCHIVES:
        assert f"## {_campaign(archive)}\n" in index and f"`records/{archive.name}`" in index


@pytest.mark.parametrize("archive", ARCHIVES, ids=_campaign)
def test_every_record_of_a_campaign_reads(archive, extracted, tmp_path):
    folder = extracted / _campaign(archive)
    bench, runs = _bench_records(folder), _run_dirs(folder)
    if _campaign(archive) in SCRIPT_ONLY:  # its README tells the logs; its scripts' JSON parses
        assert not (bench or runs) and (folder / "README.md").is_file()
        assert all(isinstance(json.loads(p.read_text()), dict) for p in folder.rglob("*.json"))
        return
    assert bench or runs, f"{archive.name}: no bench record and no run directory"
    for path in _sample(bench):
        result = _cli("explain", str(path))
        if result.exit_code != 0:  # a correctness-only record (checked, never timed): nothing to explain
            assert not timed_results(json.loads(path.read_text()), "variant"), f"{path}: {result.output}"
            assert isinstance(result.exception, InputError) and "nothing to explain" in str(result.exception)
            result = _cli("report", str(path))  # what it holds: the variants checked
        assert result.exit_code == 0, f"{path.relative_to(folder)}: {result.output}"
        assert _fits(result.output), path
    for run in _sample(runs):
        result = _cli("report", str(run), "--no-plots")  # writes report.md into the extracted copy
        assert result.exit_code == 0, f"{run.relative_to(folder)}: {result.output}"
        assert _fits(result.output) and "trials by outcome:" in result.output, run

    for path in bench + runs:  # every record through the reader `db import` uses: bounded, validated, whole
        [(run, rows)] = load_path(path)
        assert run.name and (path in bench or len(rows) == _trial_lines(path)), path

    # Writing to the database costs Optuna about 20 ms a trial (a campaign holds thousands): a sample is written
    imported = _sample(bench) + _sample(runs)
    db = "sqlite:///" + str(tmp_path / "tuning.sqlite")
    result = _cli("db", "import", *map(str, imported), db=db)
    assert result.exit_code == 0, result.output
    assert f"imported {len(imported)} run(s); 0 already present" in result.output
    listed = json.loads(_cli("db", "list", "--json", db=db).output)
    assert {Path(r["where"]).resolve() for r in listed} == {p.resolve() for p in imported}
    trials = {Path(r["where"]).resolve(): r["trials"] for r in listed}
    for run in _sample(runs):  # every trial of a run directory is in the database
        assert trials[run.resolve()] == _trial_lines(run), run


def _trial_lines(run: Path) -> int:
    return len([x for x in (run / "trials.jsonl").read_text().splitlines() if x.strip()])


def _tables(folder: Path) -> list[Path]:
    """FOLDER.md beside a FOLDER/ of bench records (a folder of searches has leave_shape_out's table instead)."""
    return [
        md for md in sorted(folder.glob("*.md"))
        if md.stem not in TABLE_SKIPPED and (folder / md.stem).is_dir() and _bench_records(folder / md.stem)
        and not list((folder / md.stem).glob("*/trials.jsonl"))
    ]  # fmt: skip


def test_the_crossed_bench_tables_are_found(extracted):
    assert sum(len(_tables(extracted / _campaign(a))) for a in ARCHIVES) >= 18


@pytest.mark.parametrize("archive", ARCHIVES, ids=_campaign)
def test_crossed_bench_tables_rebuild_from_the_records(archive, extracted):
    """A campaign's FOLDER.md beside a FOLDER/ of bench records is what analysis/crossed_bench.py makes of it."""
    folder = extracted / _campaign(archive)
    for md in _tables(folder):
        done = subprocess.run(
            [sys.executable, str(ROOT / "analysis" / "crossed_bench.py"), str(folder / md.stem),
             *TABLE_FLAGS.get(md.stem, [])],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert done.stdout.strip() == md.read_text().strip(), md.relative_to(extracted)
