"""The tuning data shipped with the package (mage_tune/data/h200.jsonl.gz): small, read through the one bounded
reader with every line inside the export schema, installed with the wheel; the warm start reads it only where the
user's database has nothing for the family, arch and GPU, and says so; `db list` shows it apart, read-only. The
rebuild from the records (analysis/shipped_data.py) is checked under the `records` marker."""

from __future__ import annotations

import fnmatch
import gzip
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from tuning_data import ARCH, GPU, layernorm_configs, run

from mage_tune.arch import get_arch
from mage_tune.kernels import get_family
from mage_tune.kernels.registry import BUILTINS
from mage_tune.problem import Problem
from mage_tune.records import reader, schema
from mage_tune.records.objectives import MEASURED_OBJECTIVE
from mage_tune.tuning import learned, shipped, warm
from mage_tune.tuning.db import Entry

ROOT = Path(__file__).resolve().parents[2]
H200 = "NVIDIA H200"


def test_the_file_is_small_schema_valid_and_installed():
    assert shipped.PATH.is_file() and shipped.PATH.stat().st_size < 512 * 1024
    raw = shipped.PATH.read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # no time in the gzip header: the same records give the same bytes
    lines = list(reader.lines(shipped.PATH))
    assert lines and all(not line.problem and not schema.problem("export line", line.data) for line in lines)
    keys = [(x.data["run"]["family"], x.data["run"]["name"], x.data["number"]) for x in lines]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    for line in lines:
        run_ = line.data["run"]
        assert run_["family"] in BUILTINS and run_["origin"] == run_["family"]
        arch = get_family(run_["family"]).target_arch(ARCH).name  # the Hopper families': sm_90a
        assert (run_["gpu"], run_["arch"], run_["objective"]) == (H200, arch, MEASURED_OBJECTIVE)
        assert line.data["outcome"] == "measured" and line.data["value"] > 0
        assert run_["where"].startswith("records/h200-") and ".tar.xz:" in run_["where"]
    assert len(gzip.decompress(raw).splitlines()) == len(lines) == sum(n for _, n in shipped.runs())

    families = {e.run.family for e in shipped.entries()}
    # every built-in family but those tuned as another (a fused variant, matmul-f16: the other's data chooses their
    # configs, and a few trials of their own would hide it)
    tuned_as = {name for name in BUILTINS if get_family(name).tuned_as}
    assert families == set(BUILTINS) - tuned_as
    # enough for the learned model of each family not tuned as another (what learned.fit asks) but the FP32 matmul
    # on wgmma, measured at three shapes only: its searches start from the nearest measured configs, without it
    assert "matmul-3xtf32-sm90" in families
    for name in families - tuned_as - {"matmul-3xtf32-sm90"}:
        arch = get_family(name).target_arch(ARCH)
        rows = learned.training_rows(get_family(name), arch, shipped.entries(name, arch.name))
        assert len(rows) >= learned.MIN_ROWS and len({r.run for r in rows}) >= learned.MIN_RUNS

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert shipped.PATH.parent == ROOT / "mage_tune/data" and "mage_tune.data" in setuptools["packages"]
    assert any(fnmatch.fnmatch(shipped.PATH.name, p) for p in setuptools["package-data"]["mage_tune.data"])


def test_it_serves_only_the_family_its_runs_name():
    assert shipped.entries("layernorm") and shipped.entries("layernorm", "sm_80") == []
    assert shipped.entries("path/to/my_family.py") == []  # a family file called layernorm is another family


@pytest.fixture
def no_model(monkeypatch):
    """The model's seeds need compiles: this checks where the seeds come from, so the model is left out."""
    monkeypatch.setattr(warm, "model_seeds", lambda *args: ([], "model: left out by the test", None))


def test_warm_start_reads_it_beside_the_database(no_model):
    family = get_family("layernorm")
    shape = {"m": 4096, "d": 800}
    ours = warm.usable_entries(shipped.entries("layernorm", ARCH), shape, H200, False)

    plan = warm.plan(Problem(family, shape, ARCH), [], H200, False, 1, 0)
    assert plan.notes[0] == f"warm start: from the shipped H200 data ({len(ours)} trials)"
    assert plan.seeds and all(s.source.startswith(("nearest ", "new value ")) for s in plan.seeds)
    nearest = warm.nearest_seeds(Problem(family, shape, ARCH), ours)
    assert [s.config for s in plan.seeds[: len(nearest)]] == [s.config for s in nearest]

    # The user's own trials on this GPU: the shipped ones join them (a first search keeps the records' shapes).
    info, rows = run("layernorm", {"m": 4096, "d": 768}, layernorm_configs({"m": 4096, "d": 768}, 4, 0), gpu=H200)
    mine = [Entry(info, r["number"], r["config"], r["outcome"], r["value"]) for r in rows]
    plan = warm.plan(Problem(family, shape, ARCH), mine, H200, False, 1, 0)
    assert plan.notes[0] == f"warm start: the tuning database's trials with the shipped H200 data ({len(ours)} trials)"
    nearest = warm.nearest_seeds(Problem(family, shape, ARCH), mine + ours)
    assert [s.config for s in plan.seeds[: len(nearest)]] == [s.config for s in nearest]
    assert len(nearest) > len(warm.nearest_seeds(Problem(family, shape, ARCH), mine))  # more shapes than the user's

    # A database that imported the shipped file holds its runs already: they are read once, as the user's.
    imported = warm.plan(Problem(family, shape, ARCH), ours, H200, False, 1, 0)
    assert not any("shipped" in n for n in imported.notes)
    assert imported.seeds and all(s.source.startswith(("nearest ", "new value ")) for s in imported.seeds)

    # Trials of another GPU only: this GPU's shipped trials come first.
    other = [
        Entry(info.__class__(**{**info.__dict__, "gpu": GPU}), e.number, e.config, e.outcome, e.value) for e in mine
    ]
    assert (
        warm.plan(Problem(family, shape, ARCH), other, H200, False, 1, 0)
        .notes[0]
        .startswith("warm start: from the shipped")
    )
    # ... but on a GPU the shipped data does not hold, the user's other GPUs do.
    assert not any(
        "shipped" in n for n in warm.plan(Problem(family, shape, ARCH), other, "Third GPU", False, 1, 0).notes
    )
    # A static search (no GPU) never reads it, nor another arch: they start from the family's defaults alone.
    for arch, gpu in ((ARCH, ""), (get_arch("sm_80"), H200)):
        cold = warm.plan(Problem(family, shape, arch), [], gpu, False, 1, 0)
        assert [s.source for s in cold.seeds] == ["default"]
        assert cold.seeds[0].config == family.default_config(shape, arch)


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_db_list_shows_it_apart_and_read_only(tmp_path):
    env = {**os.environ, "MAGE_TUNE_CACHE": str(tmp_path / "cache")}
    env.pop("MAGE_TUNE_DB", None)
    done = cli("db", "list", env=env)
    assert done.returncode == 0, done.stderr
    assert "0 run(s)" in done.stderr and "the shipped H200 data (read-only" in done.stdout
    table = done.stdout.split("the shipped H200 data")[1]
    counts = {}
    for run_, n in shipped.runs():
        counts.setdefault(run_.family, 0)
        counts[run_.family] += n
    for family, n in counts.items():
        assert any(line.split()[0] == family and line.split()[-1] == str(n) for line in table.splitlines() if line)
    assert json.loads(cli("db", "list", "--json", env=env).stdout) == []  # the database's runs alone
    listed = json.loads(cli("db", "list", "--shipped", "--json", env=env).stdout)
    assert len(listed) == len(shipped.runs()) and all(r["source"] == "shipped" for r in listed)
    assert not (tmp_path / "cache").exists()  # reading made no database, nor its folder


@pytest.mark.records
def test_the_records_rebuild_it_byte_for_byte():
    done = subprocess.run(
        [sys.executable, str(ROOT / "analysis/shipped_data.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_learned_model_answers_an_empty_batch():
    """A search's polish asks the model about the neighbours left untried, which may be none (a 100-trial matmul-bf16
    search on the H200 crashed there at its 99th trial)."""
    family = get_family("layernorm")
    rows = learned.training_rows(family, ARCH, shipped.entries("layernorm", ARCH))
    model = learned.fit(rows, with_census=False)
    assert model is not None and model.predict([]) == []
    one = learned.features(Problem(family, {"m": 4096, "d": 768}, get_arch(ARCH)), family.with_defaults({}), None)
    assert len(model.predict([one])) == 1


def test_a_family_tuned_as_another_starts_from_that_one_s_shipped_trials(no_model):
    """matmul-f16 runs matmul-bf16's kernels on FP16: the shipped data holds none of its trials (its own search's
    would hide the bf16 family's), so its search starts from the bf16 family's, and says so; the seeds are the
    nearest configs of those trials."""
    assert shipped.entries("matmul-f16") == []
    f16, bf16 = get_family("matmul-f16"), get_family("matmul-bf16")
    assert f16.tuned_as == "matmul-bf16"
    arch = get_arch("sm_90a")
    shape = {"m": 3000, "n": 2600, "k": 3500}
    theirs = warm.usable_entries(shipped.entries("matmul-bf16", "sm_90a"), shape, H200, False)
    assert theirs
    plan = warm.plan(Problem(f16, shape, arch), [], H200, False, 1, 0)
    assert plan.notes[0] == f"warm start: from matmul-bf16's trials in {shipped.LABEL} ({len(theirs)} trials)"
    nearest = warm.nearest_seeds(Problem(bf16, shape, arch), theirs)
    assert [s.config for s in plan.seeds[: len(nearest)]] == [s.config for s in nearest]
    assert all(f16.violations(s.config, shape, arch) == [] for s in plan.seeds)
