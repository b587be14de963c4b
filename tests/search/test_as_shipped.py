"""The config a family's authors ship (`as_shipped`) beside a search's best: ours / yours.

What each test shows:
  * a static search models the shipped config like a trial: its summary line, its --json, `report` and report.md
    give the shipped value and the best's over it;
  * a shipped config that is not valid at the shape is said in one line and the search runs without it;
  * a measured search builds the shipped config in the parent and hands it to the Measurer with the baselines (so
    every session times it); its result lands in baselines.jsonl with kind "shipped", never among the tuning
    database's baselines; the summary takes its time from the best trial's session.

Static searches with real compiles (layer norm at 256×64, tests/fixtures/data/tiny_layernorm_family.py); the
measured parts are driven without a GPU, with results made here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mage_tune.arch import get_arch
from mage_tune.kernels.registry import load_family
from mage_tune.measure.records import Result, Session, Timing
from mage_tune.search import record, report
from mage_tune.search.runner import Search
from mage_tune.search.spec import SearchSpec

FAMILIES = Path(__file__).parents[1] / "fixtures" / "data" / "tiny_layernorm_family.py"
SHAPE = {"m": 256, "d": 64}
LABEL = "as shipped[threads=256,rows=2]"


def _mage(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MAGE_TUNE_CACHE": str(cache)}
    command = [sys.executable, "-m", "mage_tune", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _search(name: str, trials: int) -> list[str]:
    return ["search", f"{FAMILIES}:{name}", "--m", "256", "--d", "64", "--trials", str(trials), "--static"]


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def static_run(tmp_path_factory, compile_cache):
    cwd = tmp_path_factory.mktemp("shipped")
    args = [*_search("TINY", 4), "--seed", "1", "--run-dir", "run", "--db", "off"]
    done = _mage(*args, "--json", cwd=cwd, cache=compile_cache)
    assert done.returncode == 0, done.stderr
    return cwd, args, json.loads(done.stdout)


def test_a_static_search_models_the_shipped_config(static_run, compile_cache):
    cwd, args, said = static_run
    run_dir = cwd / "run"
    kept = json.loads((run_dir / "shipped.json").read_text())
    assert kept["label"] == LABEL and kept["config"]["threads"] == 256 and kept["config"]["rows"] == 2
    assert kept["value"] > 0 and kept["model"]

    best = min(t["value"] for t in record.trials(run_dir) if t["outcome"] == "modelled")
    shipped = said["as_shipped"]
    assert shipped["label"] == LABEL and shipped["modelled"] is True
    assert shipped["value"] == pytest.approx(kept["value"])
    assert shipped["best"] == pytest.approx(best) == pytest.approx(said["value"])
    assert shipped["ratio"] == pytest.approx(best / kept["value"])
    ratio = best / kept["value"]
    line = f"as shipped: {kept['value']:.2f} µs (model); best {best:.2f} µs (model), {ratio:.2f} × as shipped"

    # The same line ends the text summary (the study has its 4 trials: a re-run only reports), report and report.md.
    again = _mage(*args, cwd=cwd, cache=compile_cache)
    assert again.returncode == 0, again.stderr
    assert line in _flat(again.stdout)
    shown = _mage("report", "run", "--no-plots", cwd=cwd, cache=compile_cache)
    assert shown.returncode == 0, shown.stderr
    assert line in _flat(shown.stdout)
    assert line in (run_dir / "report.md").read_text()


def test_a_shipped_config_not_valid_at_the_shape_is_said_and_left_out(tmp_path, compile_cache):
    args = [*_search("SHIPS_INVALID", 2), "--seed", "1", "--run-dir", "run", "--db", "off", "--json"]
    done = _mage(*args, cwd=tmp_path, cache=compile_cache)
    assert done.returncode == 0, done.stderr
    note = json.loads(done.stdout)["as_shipped"]["error"]
    assert "\n" not in note and note.startswith("as shipped: not valid at m=256, d=64 (")
    assert "2048 threads per block, over 1024" in note and note.endswith("; going on without it")
    assert _flat(done.stderr).count("as shipped: not valid") == 1  # said once
    assert [t["outcome"] for t in record.trials(tmp_path / "run")] == ["modelled", "modelled"]  # and the run went on
    shown = _mage("report", "run", "--no-plots", cwd=tmp_path, cache=compile_cache)
    assert shown.returncode == 0 and "as shipped: not valid at m=256, d=64" in _flat(shown.stdout)


def test_a_family_without_a_shipped_config_says_nothing_of_it(static_run, tmp_path, compile_cache):
    args = [*_search("UNSHIPPED", 1), "--seed", "1", "--run-dir", "run", "--db", "off", "--json"]
    done = _mage(*args, cwd=tmp_path, cache=compile_cache)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["as_shipped"] is None and "as shipped" not in done.stderr
    assert not (tmp_path / "run" / "shipped.json").exists()


# --- measured: without a GPU, with results made here -------------------------------------------------------------


def _result(label: str, kind: str, session: int, us: float | None, error: str = "") -> Result:
    timings = (Timing("cold", us, us, us, 10, 2, 7),) if us else ()
    return Result(label, kind, session, us is not None, error=error, timings=timings, config={"threads": 256})


def _session(index: int) -> Session:
    return Session(index, 900.0, 4000.0, {}, 60.0, {})


class _Measurer:
    def __init__(self):
        self.sessions = []


class _Recorder:
    def __init__(self):
        self.said: list[dict] = []

    def baselines(self, baselines: dict) -> None:
        self.said.append(baselines)


def test_a_measured_search_times_the_shipped_config_as_a_baseline(tmp_path):
    family = load_family(f"{FAMILIES}:TINY")
    run_dir = tmp_path / "run"
    spec = SearchSpec(
        family.name, SHAPE, get_arch("sm_90"), 4, "tpe", None, "m", run_dir, 1, False, 1, family.origin, db="off"
    )
    search = Search(spec, family, print)  # a GPU is needed by run() only
    search.heartbeat.close()
    search._prepare_shipped()
    job = search.shipped_job
    assert job.label == LABEL and job.kind == "variant" and job.cubin and job.kernel_name == "layernorm"
    assert job.config["threads"] == 256 and job.config["rows"] == 2
    assert json.loads((run_dir / "shipped.json").read_text())["label"] == LABEL  # no value: it is measured

    # What the Measurer hands back: every session times the baselines, the shipped config among them.
    search.measurer, search.recorder = _Measurer(), _Recorder()
    for session, us in ((0, 17.0), (1, 16.0)):
        search.measurer.sessions.append(_session(session))
        search._baseline_measured(_result("triton[num_warps=1]", "triton", session, 20.0))
        search._baseline_measured(_result(LABEL, "variant", session, us))
        search._baseline_measured(_result("tiny_layernorm[threads=64]", "variant", session, 15.0))  # a trial's
    lines = record.baselines(run_dir)
    assert [b["result"]["label"] for b in lines] == ["triton[num_warps=1]", LABEL] * 2
    assert [b["result"]["kind"] for b in lines] == ["triton", "shipped"] * 2
    assert all(LABEL not in said for said in search.recorder.said)  # the database's runs: other kernels only

    # The best trial ran in session 1: ours / yours takes the shipped time of that session.
    for number, value in enumerate((15.0, 12.0)):
        trial = {"number": number, "outcome": "measured", "value": value, "session": number}
        record.append_trial(run_dir, {**trial, "config": job.config, "label": f"trial {number}"})
    info = report.shipped(run_dir)
    assert (info["value"], info["session"], info["best"], info["modelled"]) == (16.0, 1, 12.0, False)
    assert report.shipped_line(run_dir) == "as shipped: 16.00 µs; best 12.00 µs, 0.75 × as shipped"
    assert "as shipped: 16.00 µs" in report.terminal(run_dir)
    assert LABEL in report.baseline_table(run_dir, 12.0)


def test_a_shipped_config_that_fails_its_check_is_said(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record.write_shipped(run_dir, {"label": LABEL, "config": {"threads": 256}, "objective": "measured"})
    record.append_baseline(run_dir, _result(LABEL, "shipped", 0, None, "relative error 0.3 over 1e-05"), _session(0))
    record.append_trial(run_dir, {"number": 0, "outcome": "measured", "value": 12.0, "config": {}, "session": 0})
    assert report.shipped_line(run_dir) == (
        f"as shipped: {LABEL} has no passing timing in this run (relative error 0.3 over 1e-05)"
    )
    assert report.shipped(run_dir)["ratio"] is None
