"""What a record holds is data, also where mage-tune writes it out again: a recorded GPU name never becomes code in an
export, a recorded knob value never reaches a kernel's source or a best/ file unless it is one the family offers (type
and all), writes never go through a link planted in a run directory, an import never lets one run's trials ride on
another's context, and a record that passes the schema but lacks what a reader takes is an error naming the file
(docs/trust-model.md). Every record here is made by the test, from a tiny search or a tuning database of made-up runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tuning_data import run

from mage_tune.kernels import get_family
from mage_tune.kernels.base import ConfigError
from mage_tune.search import record
from mage_tune.tuning.db import TuningDB

ROOT = Path(__file__).resolve().parents[2]
TRITON_FAMILY = str(ROOT / "tests/fixtures/data/triton_scale_family.py")
TIMEOUT = 600


def cli(*args: str, db: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MAGE_TUNE_DB"}
    if db:
        env["MAGE_TUNE_DB"] = db
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=TIMEOUT
    )


def sqlite(folder: Path) -> str:
    return "sqlite:///" + str(folder / "db.sqlite")


def test_a_recorded_gpu_name_is_never_code_in_an_export(tmp_path):
    marker = tmp_path / "RAN"
    evil = f'Evil """; open({str(marker)!r}, "w").close()  # */ int injected_by_record = 1; /*'
    triton = get_family(TRITON_FAMILY)
    shape = {"m": 64, "n": 1000}
    runs = [
        run(triton.name, shape, list(triton.configs(shape, "sm_90"))[:3], gpu=evil, origin=TRITON_FAMILY),
        run("layernorm", {"m": 1024, "d": 768}, [get_family("layernorm").defaults()], gpu=evil),
    ]
    db = sqlite(tmp_path)
    TuningDB(db).add_runs(runs)

    module = tmp_path / "configs.py"
    done = cli("db", "export", str(module), "--format", "triton", "--family", TRITON_FAMILY, db=db)
    assert done.returncode == 0, done.stderr
    probe = (
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('exported', {str(module)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(m.GPU)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == evil  # kept whole as the literal it is, and nothing of it ran
    assert not marker.exists()

    header = tmp_path / "layernorm.h"
    done = cli("db", "export", str(header), "--format", "header", "--family", "layernorm", db=db)
    assert done.returncode == 0, done.stderr
    holding = [line for line in header.read_text().splitlines() if "injected_by_record" in line]
    literal = f"inline constexpr const char* GPU = {json.dumps(evil)};"
    comments = [line for line in holding if line != literal]
    assert literal in holding and len(comments) == 1
    # a line comment that no backslash continues, nor a quote or */ in it
    assert comments[0].startswith("// ") and all(c not in comments[0][3:] for c in ("\\", '"', "'", "*/"))


@pytest.mark.parametrize("field", ["gpu", "arch", "family", "origin"], ids=lambda f: f"run.{f}")  # not the gpu mark
def test_a_name_with_a_newline_is_refused_at_import(tmp_path, field):
    (info, rows) = run("layernorm", {"m": 1024, "d": 768}, [get_family("layernorm").defaults()])
    line = {"schema": "mage-tune.tuning-db/2", "run": {**info.__dict__, field: "x\nimport os"}, **rows[0]}
    path = tmp_path / "edited.jsonl"
    path.write_text(json.dumps(line) + "\n")
    done = cli("db", "import", str(path), db=sqlite(tmp_path))
    assert done.returncode == 2 and f"{path}:1" in done.stderr and "control character" in done.stderr
    assert "Traceback" not in done.stderr


def _static_search(run_dir: Path, family: str, trials: int, *dims: str) -> subprocess.CompletedProcess:
    return cli("search", family, *dims, "--static", "--trials", str(trials), "--run-dir", str(run_dir), "--db", "off")


def _plant_trial(run_dir: Path, config: dict) -> None:
    """A trial line edited into a run directory: the fastest of all, so the next summary would pick it first."""
    planted = {"number": 999, "outcome": "modelled", "value": 1e-3, "config": config, "label": "planted"}
    with open(run_dir / "trials.jsonl", "a") as f:
        f.write(json.dumps(planted) + "\n")


@pytest.mark.parametrize(
    "change",
    [
        {"rsqrt": "approx */ __device__ int injected_by_record = 42; /*"},  # no value of the knob
        {"l2_ahead": 1.0},  # the knob's 1, as a float
        {"full_occupancy": True},  # the knob's 1, as a boolean
        {"no_such_knob": 1},
    ],
)
def test_a_recorded_config_value_never_reaches_a_kernel(tmp_path, change):
    run_dir = tmp_path / "run"
    dims = ("--m", "256", "--d", "256")
    first = _static_search(run_dir, "layernorm", 2, *dims)
    assert first.returncode == 0, first.stderr
    best = json.loads((run_dir / "best" / "best.json").read_text())
    _plant_trial(run_dir, {**best["config"], **change})
    again = _static_search(run_dir, "layernorm", 3, *dims)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert "1 trial(s) whose config layernorm does not offer left out" in again.stderr
    assert json.loads((run_dir / "best" / "best.json").read_text())["trial"] != 999
    assert "injected_by_record" not in (run_dir / "best" / "kernel.cu").read_text()
    family = get_family("layernorm")
    with pytest.raises(ConfigError, match=r"not allowed|unknown knob"):
        family.build({**best["config"], **change}, {"m": 256, "d": 256}, "sm_90")


def test_a_recorded_triton_option_is_never_code_in_best_configs(tmp_path):
    run_dir = tmp_path / "run"
    dims = ("--m", "64", "--n", "1000")
    first = _static_search(run_dir, TRITON_FAMILY, 2, *dims)
    assert first.returncode == 0, first.stderr
    best = json.loads((run_dir / "best" / "best.json").read_text())
    marker = tmp_path / "RAN"
    _plant_trial(run_dir, {**best["config"], "num_warps": f"4, pre_hook=open({str(marker)!r}, 'w').close)#"})
    again = _static_search(run_dir, TRITON_FAMILY, 3, *dims)
    assert again.returncode == 0 and "left out" in again.stderr, again.stderr
    configs = (run_dir / "best" / "triton_configs.py").read_text()
    assert "pre_hook" not in configs
    # and the family itself refuses to write such a config as code
    with pytest.raises(ConfigError):
        get_family(TRITON_FAMILY).best_files([{**best["config"], "num_warps": "4, pre_hook=print"}])


def test_no_write_goes_through_a_link_in_a_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    assert _static_search(run_dir, "layernorm", 2, "--m", "256", "--d", "256").returncode == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own\n")
    for name in ("report.md", "time_vs_census.png", "best/kernel.cu"):
        link = run_dir / name
        link.unlink(missing_ok=True)
        link.symlink_to(victim)
        resume = ("search", "layernorm", "--m", "256", "--d", "256", "--static", "--trials", "3")
        for args in (("report", str(run_dir)), (*resume, "--run-dir", str(run_dir), "--db", "off")):
            done = cli(*args)
            assert done.returncode == 2 and "symbolic link" in done.stderr and str(link) in done.stderr, done.stderr
            assert victim.read_text() == "the user's own\n"
        link.unlink()
    # a trial line is never appended through one either
    (run_dir / "trials.jsonl").rename(run_dir / "kept.jsonl")
    (run_dir / "trials.jsonl").symlink_to(victim)
    with pytest.raises(record.RecordError):
        record.append_trial(run_dir, {"number": 5})
    assert victim.read_text() == "the user's own\n"


def test_an_import_never_puts_trials_under_another_run_s_context(tmp_path):
    db = sqlite(tmp_path)
    info, rows = run("layernorm", {"m": 1024, "d": 768}, [get_family("layernorm").defaults()])
    TuningDB(db).add_runs([(info, rows)])
    rider = {
        "schema": "mage-tune.tuning-db/2",
        "run": {**info.__dict__, "gpu": "Other GPU", "shape": {"m": 1, "d": 4}},
        **{**rows[0], "number": 500, "value": 0.001},
    }
    path = tmp_path / "rider.jsonl"
    path.write_text(json.dumps(rider) + "\n")
    done = cli("db", "import", str(path), db=db)
    assert done.returncode == 2 and "with another shape, gpu" in done.stderr and "Traceback" not in done.stderr
    assert [e.number for e in TuningDB(db).entries()] == [0]


@pytest.mark.parametrize(
    "edit, why",
    [
        (lambda r: r["environment"].update(toolchain="s"), "environment.toolchain"),
        (lambda r: r["environment"].update(sm_count="s"), "environment.sm_count"),
        (lambda r: r["shape"].pop("m"), "has no m"),
    ],
)
def test_a_bench_record_a_reader_cannot_use_is_an_error_naming_it(tmp_path, edit, why):
    source = ROOT / "tests/fixtures/data/bench_layernorm_16384x4096.json"
    data = json.loads(source.read_text())
    edit(data)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    for args in (("explain", str(path)), ("db", "import", str(path))):
        done = cli(*args, db=sqlite(tmp_path))
        assert done.returncode != 0 and str(path) in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
        assert why in done.stderr, (args, done.stderr)


def test_a_trial_or_baseline_short_of_what_a_search_writes_is_still_reported(tmp_path):
    run_dir = tmp_path / "run"
    assert _static_search(run_dir, "layernorm", 2, "--m", "256", "--d", "256").returncode == 0
    best = json.loads((run_dir / "best" / "best.json").read_text())
    unlabelled = {"number": 998, "outcome": "modelled", "value": 1e-3, "config": best["config"]}
    failed = {"result": {"label": "torch.layer_norm", "ok": False, "timings": []},
              "session": {"copy_gbs": 1.0, "control_us": 1.0}}  # fmt: skip
    with open(run_dir / "trials.jsonl", "a") as f:
        f.write(json.dumps(unlabelled) + "\n")
    with open(run_dir / "baselines.jsonl", "a") as f:
        f.write(json.dumps(failed) + "\n")
    for command in ("report", "explain"):
        done = cli(command, str(run_dir))
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stderr)
    assert "winner: trial 998 threads=" in cli("explain", str(run_dir)).stdout
    assert "failed" in cli("report", str(run_dir)).stdout


def test_counters_never_overwrites_a_record_unasked(tmp_path):
    kept = tmp_path / "counters.json"
    kept.write_text('{"schema": "mage-tune.counters/1"}')
    done = cli("counters", "layernorm", "--d", "768", "--out", str(kept))
    assert done.returncode == 2 and f"{kept}: exists; give --force" in done.stderr, done.stderr
    assert kept.read_text() == '{"schema": "mage-tune.counters/1"}'
