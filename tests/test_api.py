"""mage_tune.search and mage_tune.bench without a GPU (mage_tune/api/): a static search of real compiled layer-norm
kernels returns typed results whose .to_json() is what `mage-tune search --json` prints for the same run directory
and whose .table() is what the command prints; nothing is printed but through `echo`; a search with no scored trial
raises with what ran attached; arguments the command line refuses are refused the same (a conflict as a usage
error); bench says it needs a GPU; `import mage_tune` stays light and `mage_tune.search` stays callable whatever
was imported before.

The searches are tiny (layer norm 256×64, 3 trials, one compile process, seeded, tuning database off) and share the
session's compile cache (conftest); the command line runs as a subprocess, as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import has_gpu

import mage_tune
from mage_tune.api import OptionConflict, SearchResult, TrialRecord
from mage_tune.api.common import setting_items, source_kwargs
from mage_tune.api.search_loop import NothingScored, SearchInterrupted
from mage_tune.cli import cli
from mage_tune.compile import SourceOptions
from mage_tune.errors import ConfigError, InputError, MageError, NoDeviceError
from mage_tune.kernels import load_family
from mage_tune.kernels.layernorm import LayerNorm
from mage_tune.search.runner import Search
from mage_tune.textwidth import wrap

ROOT = Path(__file__).resolve().parents[1]
SHAPE = {"m": 256, "d": 64}
ARGS = {"trials": 3, "static": True, "seed": 1, "workers": 1, "db": "off"}
CLI = ["search", "layernorm", "--m", "256", "--d", "64", "--trials", "3", "--static", "--seed", "1", "--workers", "1"]


def mage(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100"}  # MAGE_TUNE_CACHE: the session's compile cache (conftest)
    command = [sys.executable, "-m", "mage_tune", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """One static search from Python, and what it printed meanwhile (nothing: no echo, no progress)."""
    run_dir = tmp_path_factory.mktemp("api") / "run"
    said: list[str] = []
    result = mage_tune.search("layernorm", SHAPE, run_dir=run_dir, echo=said.append, **ARGS)
    return result, said


def test_a_static_search_of_an_arch_specific_family_targets_its_arch(tmp_path):
    """matmul-bf16 runs on sm_90a only: a static search with the arch left to "auto" builds for sm_90a, as on an sm_90
    GPU, where it took sm_90 and pruned every trial ("sm_90 cannot build or run this kernel")."""
    shape = {"m": 256, "n": 256, "k": 128}
    result = mage_tune.search("matmul-bf16", shape, run_dir=tmp_path / "run", **{**ARGS, "trials": 1})
    assert result.arch == "sm_90a" and result.study == "matmul-bf16-m256-n256-k128-sm_90a-static"
    assert result.outcomes == {"modelled": 1}


def test_a_static_search_returns_typed_results(searched):
    result, said = searched
    assert isinstance(result, SearchResult) and result.mode == "static" and result.arch == "sm_90"
    assert result.family == "layernorm" and result.shape == SHAPE and result.study == "layernorm-m256-d64-sm_90-static"
    assert result.outcomes == {"modelled": 3} and result.resumed_trials == 0 and result.stopped is None
    assert len(result.trials) == 3 and all(isinstance(t, TrialRecord) for t in result.trials)
    assert [t.number for t in result.trials] == [0, 1, 2]
    for trial in result.trials:  # each trial with its census features
        assert trial.scored and trial.value > 0 and trial.census["registers"] > 0 and "occupancy" in trial.census
        assert trial.source == "tpe" and trial.label.startswith("layernorm[") and not trial.why
    best = json.loads((result.run_dir / "best" / "best.json").read_text())
    assert result.best.number == best["trial"] and result.best_config == best["config"]
    assert result.best_us == best["value"] == min(t.value for t in result.trials)
    assert result.baselines == {}  # the static model times nothing
    for name in ("report.md", "trials.jsonl", "best/kernel.cu", "search.json"):
        assert (result.run_dir / name).is_file()
    assert said == [
        f"static census model (--static), no GPU used; new study {result.study}",
        "warm start: off",
    ]


def test_nothing_is_printed_but_through_echo(tmp_path, capfd):
    result = mage_tune.search(load_family("layernorm"), SHAPE, run_dir=tmp_path / "run", **ARGS)
    assert result.outcomes == {"modelled": 3}  # a Family object as well as a name
    assert capfd.readouterr() == ("", "")


def test_to_json_and_table_are_what_the_command_prints(searched, monkeypatch):
    """The command resumes the run directory the call wrote (nothing left to run); the same call again resumes it
    too: its to_json() is the --json the command printed, its table() the text."""
    first, _ = searched
    run_dir, cwd = first.run_dir, first.run_dir.parent
    printed = mage(*CLI, "--db", "off", "--run-dir", str(run_dir), "--json", cwd=cwd)
    assert printed.returncode == 0, printed.stderr
    cli = json.loads(printed.stdout)
    said: list[str] = []
    again = mage_tune.search("layernorm", SHAPE, run_dir=run_dir, echo=said.append, **ARGS)
    assert again.to_json() == cli
    assert first.to_json() == {**cli, "resumed_trials": 0}
    assert cli["number"] == first.best.number and cli["config"] == first.best_config and cli["value"] == first.best_us
    assert cli["run_dir"] == str(run_dir) and cli["outcomes"] == {"modelled": 3}
    assert said[0].endswith("resuming 3 recorded trial(s) of study layernorm-m256-d64-sm_90-static (asked for 3); "
                            "nothing left to run: raise --trials to search on")  # fmt: skip
    assert all(wrap(line, 100) in printed.stderr for line in said)  # what the command said, through echo

    text = mage(*CLI, "--db", "off", "--run-dir", str(run_dir), cwd=cwd)
    assert text.returncode == 0, text.stderr
    monkeypatch.setenv("COLUMNS", "100")
    assert text.stdout == again.table() + "\n"
    assert "trials by outcome: modelled 3 (3 recorded before this run)" in text.stdout
    assert f"run directory: {run_dir}" in again.table()


class NoCompile(LayerNorm):
    """Layer norm whose every variant fails to compile. Module level, so compile processes unpickle it by name."""

    def render(self, config, shape):
        return "this is not cuda;"


def test_a_search_with_no_scored_trial_raises_with_what_ran(tmp_path):
    with pytest.raises(NothingScored, match="no trial scored \\(compile_error 2; trial 0: ") as caught:
        mage_tune.search(NoCompile(), SHAPE, run_dir=tmp_path / "run", **{**ARGS, "trials": 2})
    assert isinstance(caught.value, MageError) and caught.value.file == str(tmp_path / "run" / "trials.jsonl")
    result = caught.value.result
    assert result.best is None and result.best_config is None and result.best_us is None
    assert result.outcomes == {"compile_error": 2} and all("NVRTC log" in t.why for t in result.trials)
    assert "trials by outcome: compile_error 2" in result.table() and "run directory" not in result.table()
    assert result.to_json() == {
        "run_dir": str(tmp_path / "run"),
        "resumed_trials": 0,
        "outcomes": {"compile_error": 2},
        "as_shipped": None,
        "stopped": None,
    }


@pytest.mark.parametrize(
    ("given", "error", "match"),
    [
        ({"sampler": "grid", "polish": 2}, OptionConflict, "--polish does not apply to --sampler grid"),
        ({"gpus": "all"}, OptionConflict, "--gpus measures on GPUs; --static measures nothing"),
        ({"trials": 0}, InputError, "trials=0: from 1 to 1000000"),
        ({"workers": 0}, InputError, "workers=0"),
        ({"sampler": "annealing"}, InputError, "unknown sampler 'annealing'"),
        ({"warm_start": "sometimes"}, InputError, "warm_start='sometimes'"),
        ({"arch": "sm_12"}, InputError, "unknown arch 'sm_12'"),
        ({"include_dirs": "no-such-folder"}, InputError, "-I no-such-folder: no such folder"),
        ({"compiler_options": ["--no-such-option"]}, InputError, "--no-such-option"),
    ],
)
def test_arguments_the_command_line_refuses_are_refused(tmp_path, given, error, match):
    with pytest.raises(error, match=match):
        mage_tune.search("layernorm", SHAPE, run_dir=tmp_path / "run", **{**ARGS, **given})
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_a_family_by_path_unknown_name_or_shape(tmp_path):
    with pytest.raises(InputError, match="-D: only a CUDA family is compiled with them"):
        mage_tune.search(ROOT / "examples/rmsnorm/triton_family.py", {"d": 64}, defines="X=1", **ARGS)
    with pytest.raises(ConfigError, match="unknown kernel family 'layernrm'; did you mean layernorm"):
        mage_tune.search("layernrm", SHAPE, **ARGS)
    with pytest.raises(ConfigError, match="layernorm takes the dimensions m, d; not k"):
        mage_tune.search("layernorm", {"k": 3}, run_dir=tmp_path / "run", **ARGS)
    for bad in ("abc", 4096.5, True):  # never a TypeError, never a different shape run in its place
        with pytest.raises(ConfigError, match=f"dimension m of layernorm must be a whole number, got {bad!r}"):
            mage_tune.search("layernorm", {"m": bad, "d": 768}, run_dir=tmp_path / "run", **ARGS)
        with pytest.raises(ConfigError, match="must be a whole number"):
            mage_tune.load("layernorm").choice({"m": bad, "d": 768})
    with pytest.raises(ConfigError, match="shape must be a mapping of dimension to size"):
        mage_tune.search("layernorm", [4096, 768], run_dir=tmp_path / "run", **ARGS)
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(has_gpu(), reason="the error paths of measuring, where no GPU is present")
def test_bench_and_gpus_without_a_gpu_say_so(tmp_path):
    with pytest.raises(NoDeviceError, match="no CUDA device found \\(this command times kernels on a GPU\\)"):
        mage_tune.bench("layernorm", {"d": 768})
    with pytest.raises(NoDeviceError, match="--gpus 0,1: no CUDA device is present here"):
        mage_tune.search("layernorm", SHAPE, gpus=[0, 1], run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_an_interrupted_search_names_its_run_directory(tmp_path, monkeypatch):
    def interrupted(self, progress):
        progress(0, float("inf"))
        raise KeyboardInterrupt

    monkeypatch.setattr(Search, "run", interrupted)
    with pytest.raises(SearchInterrupted) as caught:
        mage_tune.search("layernorm", SHAPE, run_dir=tmp_path / "api", **ARGS)
    assert isinstance(caught.value, KeyboardInterrupt) and caught.value.run_dir == tmp_path / "api"
    ran = CliRunner().invoke(cli, [*CLI, "--db", "off", "--run-dir", str(tmp_path / "cli")])
    assert ran.exit_code == 130
    assert f"interrupted; finished trials are kept in {tmp_path / 'cli'}: re-run the same command to resume" in (
        ran.stderr
    )


def test_bench_refuses_what_the_command_line_refuses_before_looking_for_a_gpu(tmp_path):
    with pytest.raises(OptionConflict, match="--configs lists the configs itself"):
        mage_tune.bench("layernorm", {"d": 768}, configs=[{"vec": 4}], settings={"vec": 8})
    with pytest.raises(InputError, match="regime='warm': one of cold, hot, both"):
        mage_tune.bench("layernorm", {"d": 768}, regime="warm")
    taken = tmp_path / "bench.json"
    taken.write_text("{}")
    with pytest.raises(InputError, match="exists; give --force"):
        mage_tune.bench("layernorm", {"d": 768}, out=taken)
    assert taken.read_text() == "{}"


def test_settings_and_compile_options_as_python_gives_them():
    assert setting_items({"threads": 128, "vec": [4, 8]}) == ["threads=128", "vec=4,8"]
    assert setting_items(["threads=128", "vec=4,8"]) == ["threads=128", "vec=4,8"]
    assert setting_items("vec=4") == ["vec=4"]
    assert source_kwargs(None) == {}
    source = SourceOptions(includes=("inc",), defines=("X=1",), options=("-lineinfo",))
    assert source_kwargs(source) == {"include_dirs": ("inc",), "defines": ("X=1",), "compiler_options": ("-lineinfo",)}


def test_the_cli_says_a_conflict_as_a_usage_error(tmp_path):
    done = mage("search", "layernorm", "--d", "64", "--static", "--gpus", "all", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert "Usage: " in done.stderr and "Error: --gpus measures on GPUs; --static measures nothing" in done.stderr


LIGHT = """
import sys
import mage_tune
heavy = [name for name in ("optuna", "sqlalchemy", "numpy", "mage_tune.api") if name in sys.modules]
import mage_tune.search.record  # binds the plain subpackage to mage_tune.search: still callable
assert mage_tune.search.record is sys.modules["mage_tune.search.record"]
from mage_tune.search import runner
print(heavy, callable(mage_tune.search), mage_tune.search.runner is runner, "mage_tune.api" in sys.modules)
print(mage_tune.bench.__module__, sorted(set(mage_tune.__all__) & {"search", "bench"}))
"""


def test_import_stays_light_and_search_stays_callable():
    done = subprocess.run([sys.executable, "-c", LIGHT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[] True True False",
        "mage_tune.api.bench_loop ['bench', 'search']",
    ]
