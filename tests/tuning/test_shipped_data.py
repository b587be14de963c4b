"""The tuning data shipped with the package (mage_tune/data/tuning.jsonl.gz): small, read through the one bounded
reader with every line inside the export schema, installed with the wheel; the warm start reads it beside the
user's database, every GPU's trials with the searching GPU's nearest first, and says so; `db list` shows it apart,
read-only. The rebuild from the records (analysis/shipped_data.py) is checked under the `records` marker."""

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
H100 = "NVIDIA H100 80GB HBM3"
RECORDS_OF = {H200: "records/h200-", H100: "records/h100-"}  # the archives each GPU's runs come from


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
        assert run_["gpu"] in RECORDS_OF and (run_["arch"], run_["objective"]) == (arch, MEASURED_OBJECTIVE)
        assert line.data["outcome"] == "measured" and line.data["value"] > 0
        assert run_["where"].startswith(RECORDS_OF[run_["gpu"]]) and ".tar.xz:" in run_["where"]
    assert len(gzip.decompress(raw).splitlines()) == len(lines) == sum(n for _, n in shipped.runs())

    families = {e.run.family for e in shipped.entries()}
    # every built-in family but those tuned as another (a fused variant, matmul-f16: the other's data chooses their
    # configs, and a few trials of their own would hide it)
    tuned_as = {name for name in BUILTINS if get_family(name).tuned_as}
    assert families == set(BUILTINS) - tuned_as
    # enough for the learned model of each family not tuned as another (what learned.fit asks) but the FP32 matmul
    # on wgmma, measured at three shapes only: its searches start from the nearest measured configs, without it
    assert "matmul-3xtf32-sm90" in families
    assert {e.run.gpu for e in shipped.entries("matmul-bf16")} == {H200, H100}  # each GPU's runs, apart
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


def _note(source: str, ours: list[Entry], gpu: str, with_database: bool) -> str:
    here = sum(e.run.gpu == gpu for e in ours)
    whose = "the tuning database's trials with " if with_database else "from "
    return f"warm start: {whose}{source} ({len(ours)} trials, {here} of them on this GPU)"


def test_warm_start_reads_it_beside_the_database(no_model):
    family = get_family("layernorm")
    shape = {"m": 4096, "d": 800}
    ours = warm.usable_entries(shipped.entries("layernorm", ARCH), shape, False)

    plan = warm.plan(Problem(family, shape, ARCH), [], H200, False, 1, 0)
    assert plan.notes[0] == _note(shipped.LABEL, ours, H200, False)
    assert plan.seeds and all(s.source.startswith(("nearest ", "new value ")) for s in plan.seeds)
    nearest = warm.nearest_seeds(Problem(family, shape, ARCH), ours, H200)
    assert [s.config for s in plan.seeds[: len(nearest)]] == [s.config for s in nearest]

    # The user's own trials on this GPU: the shipped ones join them (a first search keeps the records' shapes).
    info, rows = run("layernorm", {"m": 4096, "d": 768}, layernorm_configs({"m": 4096, "d": 768}, 4, 0), gpu=H200)
    mine = [Entry(info, r["number"], r["config"], r["outcome"], r["value"]) for r in rows]
    plan = warm.plan(Problem(family, shape, ARCH), mine, H200, False, 1, 0)
    assert plan.notes[0] == _note(shipped.LABEL, ours, H200, True)
    nearest = warm.nearest_seeds(Problem(family, shape, ARCH), mine + ours, H200)
    assert [s.config for s in plan.seeds[: len(nearest)]] == [s.config for s in nearest]
    assert len(nearest) > len(warm.nearest_seeds(Problem(family, shape, ARCH), mine, H200))  # more shapes

    # A database that imported the shipped file holds its runs already: they are read once, as the user's.
    imported = warm.plan(Problem(family, shape, ARCH), ours, H200, False, 1, 0)
    assert not any("shipped" in n for n in imported.notes)
    assert imported.seeds and all(s.source.startswith(("nearest ", "new value ")) for s in imported.seeds)

    # The user's trials of another GPU join too, but this GPU's shapes come first: the user's shape (0.06 away)
    # counts as 1.002 away (the GPU's factor of two as one more dimension), past the three nearest shipped H200 shapes.
    other = [
        Entry(info.__class__(**{**info.__dict__, "gpu": GPU}), e.number, e.config, e.outcome, e.value) for e in mine
    ]
    plan = warm.plan(Problem(family, shape, ARCH), other, H200, False, 1, 0)
    assert plan.notes[0] == _note(shipped.LABEL, ours, H200, True)
    near = [s.source for s in plan.seeds if s.source.startswith("nearest ")]
    assert near and not any(" on " in source for source in near)
    # On a GPU neither holds, both join as another GPU's.
    plan = warm.plan(Problem(family, shape, ARCH), other, "Third GPU", False, 1, 0)
    assert plan.notes[0] == _note(shipped.LABEL, ours, "Third GPU", True)
    near = [s.source for s in plan.seeds if s.source.startswith("nearest ")]
    assert near and all(" on " in source for source in near)
    # A static search (no GPU) never reads it, nor another arch: they start from the family's defaults alone.
    for arch, gpu in ((ARCH, ""), (get_arch("sm_80"), H200)):
        cold = warm.plan(Problem(family, shape, arch), [], gpu, False, 1, 0)
        assert [s.source for s in cold.seeds] == ["default"]
        assert cold.seeds[0].config == family.default_config(shape, arch)


def test_another_gpu_s_shape_counts_one_doubling_further_in_the_warm_start():
    """This GPU's shape 0.36 away comes before another GPU's 0.06 away (1.002 with the GPU's doubling), which comes
    before this GPU's shape 3.8 away (tuning.db.OTHER_GPU_DISTANCE); a static search ranks shapes alone."""
    family = get_family("layernorm")
    problem = Problem(family, {"m": 4096, "d": 800}, ARCH)
    near, far, theirs = {"m": 4096, "d": 1024}, {"m": 512, "d": 4096}, {"m": 4096, "d": 768}

    def entries(shape: dict, gpu: str, seed: int) -> list[Entry]:
        info, rows = run("layernorm", shape, layernorm_configs(shape, 3, seed), gpu=gpu)
        return [Entry(info, r["number"], r["config"], r["outcome"], r["value"]) for r in rows]

    mine_near, mine_far, other = entries(near, "GPU A", 0), entries(far, "GPU A", 1), entries(theirs, "GPU B", 2)
    seeds = warm.nearest_seeds(problem, mine_near + other, "GPU A")
    assert [s.source for s in seeds[:2]] == ["nearest m4096-d1024 #1", "nearest m4096-d768 on GPU B #1"]
    seeds = warm.nearest_seeds(problem, mine_far + other, "GPU A")
    assert [s.source for s in seeds[:2]] == ["nearest m4096-d768 on GPU B #1", "nearest m512-d4096 #1"]
    fastest = min(other, key=lambda e: e.value)
    assert seeds[0].config == warm.valid_here(problem, fastest.config)
    # A static search measures on no GPU: one group a shape, whoever measured it (here two GPUs at d=768 and a run
    # without a GPU name at d=1024), the nearest shape first, no GPU named and none nearer.
    unnamed = entries(near, "", 3)
    seeds = warm.nearest_seeds(problem, other + entries(theirs, "GPU A", 4) + unnamed, "")
    assert [s.source for s in seeds] == [
        "nearest m4096-d768 #1", "nearest m4096-d1024 #1", "nearest m4096-d768 #2", "nearest m4096-d1024 #2"
    ]  # fmt: skip


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_db_list_shows_it_apart_and_read_only(tmp_path):
    env = {**os.environ, "MAGE_TUNE_CACHE": str(tmp_path / "cache")}
    env.pop("MAGE_TUNE_DB", None)
    done = cli("db", "list", env=env)
    assert done.returncode == 0, done.stderr
    assert "0 run(s)" in done.stderr and f"{shipped.LABEL} (read-only" in done.stdout
    table = done.stdout.split(shipped.LABEL)[1]
    counts = {}
    for run_, n in shipped.runs():
        counts.setdefault((run_.family, run_.gpu), 0)
        counts[run_.family, run_.gpu] += n
    assert len({gpu for _, gpu in counts}) == 2  # a row per family and GPU
    for (family, gpu), n in counts.items():
        assert any(
            line.split()[0] == family and gpu in line and line.split()[-1] == str(n)
            for line in table.splitlines()
            if line
        )
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
    theirs = warm.usable_entries(shipped.entries("matmul-bf16", "sm_90a"), shape, False)
    assert theirs
    plan = warm.plan(Problem(f16, shape, arch), [], H200, False, 1, 0)
    assert plan.notes[0] == _note(f"matmul-bf16's trials in {shipped.LABEL}", theirs, H200, False)
    nearest = warm.nearest_seeds(Problem(bf16, shape, arch), theirs, H200)
    assert [s.config for s in plan.seeds[: len(nearest)]] == [s.config for s in nearest]
    assert all(f16.violations(s.config, shape, arch) == [] for s in plan.seeds)
