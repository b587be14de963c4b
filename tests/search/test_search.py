"""`mage-tune search`, `report` and `explain` on a machine without a GPU: real NVRTC/ptxas compiles, the static
model as the objective, Optuna's own storage checked directly.

What each test shows:
  * a static search runs end to end on both families: the run directory holds every file record.py lists, the study
    counts exactly --trials trials, `report` writes report.md and the plots, `explain` names the winner;
  * without --static and without a GPU the command says so loudly and runs the static model; a static study refuses
    to be resumed as a measured one (one-line error, exit 2);
  * a search killed with SIGKILL and re-run loses no finished trial and runs none twice, and leaves no compile
    process behind; the re-run waits MAGE_TUNE_HEARTBEAT_GRACE seconds (8 here) for the killed run's trial;
  * two worker processes share one study on a real PostgreSQL server (MAGE_TUNE_TEST_POSTGRES, set by .ci/run)
    and together count exactly --trials;
  * a config that does not compile and one that breaks a constraint are recorded trials with their reason, and the
    search goes on;
  * `report` and `explain` need the run directory's record only, not the study.

Commands run as subprocesses (`python -m mage_tune`) with cwd in a temporary folder and MAGE_TUNE_CACHE pointing at
the session's compile cache (conftest), so a config compiled by one test is reused by the next. Shapes are small
(layernorm 256×64, matmul 64×64×64) and trial counts few, to keep the file within a few minutes on two cores.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest

from mage_tune.arch import get_arch
from mage_tune.errors import InputError
from mage_tune.kernels import get_family
from mage_tune.kernels.base import Config, Shape
from mage_tune.kernels.layernorm import LayerNorm
from mage_tune.kernels.neighbours import neighbours
from mage_tune.problem import Problem
from mage_tune.records.objectives import MEASURED_OBJECTIVE, STATIC_OBJECTIVE
from mage_tune.search import polish, record, report
from mage_tune.search.runner import COUNTED, RECORDED, Search
from mage_tune.search.samplers import make_sampler
from mage_tune.search.spec import SearchSpec
from mage_tune.storage import GRACE_S, open_storage

LAYERNORM = ("layernorm", "--d", "64", "--m", "256")
MATMUL = ("matmul", "--m", "64", "--n", "64", "--k", "64")
RUN_FILES = (
    "study.db",
    "trials.jsonl",
    "search.json",
    "environment.jsonl",
    "best/kernel.cu",
    "best/kernel.ptx",
    "best/kernel.sass",
    "best/census.json",
    "best/best.json",
    "report.md",
)
GRACE = "8"  # MAGE_TUNE_HEARTBEAT_GRACE: how long a resumed run waits for a killed run's trial (default 30 s)
TIMEOUT = 300


# --- helpers -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(compile_cache) -> dict[str, str]:
    return {
        **os.environ,
        "MAGE_TUNE_CACHE": str(compile_cache),
        "MAGE_TUNE_HEARTBEAT_GRACE": GRACE,
    }


def mage(*args: str, cwd: Path, env: dict, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    command = [sys.executable, *(prefix or ("-m", "mage_tune")), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def search_args(problem: tuple[str, ...], run_dir: str, trials: int, *extra: str) -> list[str]:
    return ["search", *problem, "--trials", str(trials), "--workers", "2", "--run-dir", run_dir, *extra]


def sqlite_url(run_dir: Path) -> str:
    return f"sqlite:///{(run_dir / 'study.db').resolve()}"


def load(run_dir: Path) -> optuna.Study:
    """The run's study, named in its search.json, from the SQLite file in the run directory."""
    name = json.loads((run_dir / "search.json").read_text())["study"]
    return optuna.load_study(study_name=name, storage=sqlite_url(run_dir))


def counted(study: optuna.Study) -> list[int]:
    """Numbers of the trials that count toward --trials (those with a counted outcome)."""
    return [t.number for t in study.get_trials(deepcopy=False) if t.user_attrs.get("outcome") in COUNTED]


def line_numbers(run_dir: Path) -> list[int]:
    return [t["number"] for t in record.trials(run_dir)]


def children(pid: int) -> list[int]:
    """Live processes whose parent is `pid` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid) and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    """A live (not zombie) mage_tune process with this pid: a reused pid is never mistaken for one of ours."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z" and b"mage_tune" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return False


def proposal_of(line: dict) -> dict:
    """The sampler's draw of a trials.jsonl line: its config, before any redraw, before any repair."""
    return {**line["config"], **line.get("redrawn_from", {}), **line.get("repaired_from", {})}


def recorded_params(line: dict, trial: optuna.trial.FrozenTrial) -> list[dict]:
    """What the study may hold as a trial's params: an enqueued trial (warm start, polish) keeps the params it was
    given, settled after; a drawn one holds the config it ran (valid_draws.py), or, where another worker claimed
    that config first and it was redrawn once more (Search._claim), the config before that last redraw."""
    if trial.system_attrs.get("fixed_params"):
        return [proposal_of(line)]
    return [line["config"], {**line["config"], **line.get("redrawn_from", {})}]


def check_record_matches_study(run_dir: Path, study: optuna.Study, killed: bool = False) -> None:
    """Every trials.jsonl line is a recorded trial of the study (counted, or a duplicate) with the same config,
    outcome and value.

    killed: a process was killed; a trial it had recorded but not yet told is failed in the study, value-less."""
    by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
    for line in record.trials(run_dir):
        trial = by_number[line["number"]]
        assert trial.user_attrs["outcome"] == line["outcome"] in RECORDED
        assert trial.params in recorded_params(line, trial)
        if killed and trial.state == optuna.trial.TrialState.FAIL:
            continue
        if line["outcome"] in ("modelled", "measured", "duplicate"):
            assert trial.state == optuna.trial.TrialState.COMPLETE and trial.value == pytest.approx(line["value"])


# --- 1. a static search end to end, on both families --------------------------------------------------------------

PROBLEMS = {"layernorm": (LAYERNORM, 6), "matmul": (MATMUL, 12)}


@pytest.fixture(scope="module", params=sorted(PROBLEMS))
def static_run(request, tmp_path_factory, env):
    """One `search --static` per family, shared by the tests that read its run directory."""
    problem, trials = PROBLEMS[request.param]
    cwd = tmp_path_factory.mktemp(f"static-{request.param}")
    done = mage(*search_args(problem, "run", trials, "--static", "--seed", "1", "--json"), cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return cwd / "run", trials, done


def test_static_search_end_to_end(static_run):
    run_dir, trials, done = static_run
    for name in RUN_FILES:
        assert (run_dir / name).is_file(), f"{name} missing from the run directory"
    assert "NOTICE" not in done.stderr  # --static asked for the model: nothing to warn about

    study = load(run_dir)
    numbers = counted(study)
    assert len(numbers) == trials
    assert len(set(numbers)) == len(numbers)
    assert study.user_attrs["objective"] == STATIC_OBJECTIVE
    assert sorted(line_numbers(run_dir)) == sorted(numbers)  # one process, no kill: the record has every trial
    check_record_matches_study(run_dir, study)

    # The best kernel is the lowest modelled trial, and --json printed it.
    best = json.loads((run_dir / "best" / "best.json").read_text())
    modelled = [t for t in record.trials(run_dir) if t["outcome"] == "modelled"]
    winner = min(modelled, key=lambda t: t["value"])
    assert best["trial"] == winner["number"] and best["config"] == winner["config"]
    assert best["objective"] == STATIC_OBJECTIVE
    assert json.loads(done.stdout)["number"] == winner["number"]
    assert "__global__" in (run_dir / "best" / "kernel.cu").read_text()
    assert ".entry" in (run_dir / "best" / "kernel.ptx").read_text()
    assert json.loads((run_dir / "best" / "census.json").read_text())["kernel"]
    assert json.loads((run_dir / "search.json").read_text())["static"] is True
    assert record.read_jsonl(run_dir / "environment.jsonl")[0]["python"]


def test_drawn_configs_that_break_a_constraint_run_as_their_nearest_valid_one(static_run):
    """TPE knows no constraint; at matmul 64³ most of its draws break one. Such a draw is drawn again (up to
    8 times, valid_draws.py); one still invalid runs as the valid config with the fewest other knobs changed (at most
    two; where none is that close, more knobs redrawn), the record keeps what was proposed, and the study what ran."""
    run_dir, _, _ = static_run
    lines = record.trials(run_dir)
    family = get_family(json.loads((run_dir / "run.json").read_text())["family"])
    shape = json.loads((run_dir / "run.json").read_text())["shape"]
    repaired = [t for t in lines if t.get("repaired_from")]
    # The study holds what each drawn trial ran, not its draw: TPE learns from the configs it has times for.
    by_number = {t.number: t for t in load(run_dir).get_trials(deepcopy=False)}
    for t in lines:
        if t["source"] == "tpe":
            assert by_number[t["number"]].params == t["config"]
    if family.name == "matmul":
        assert repaired  # seed 1: two of the twelve draws stay invalid after eight tries
        assert sum(t["outcome"] == "modelled" for t in lines) >= len(lines) // 2
    for t in repaired:
        assert family.violations(proposal_of(t), shape, get_arch("sm_90"))  # the draw was invalid
        assert not family.violations(t["config"], shape, get_arch("sm_90"))  # what ran is valid
        assert len(t["repaired_from"]) >= 1
        if len(t["repaired_from"]) > 2:  # no two changes repaired the draw (Family.redrawn_valid)
            assert family.nearest_valid(proposal_of(t), shape, get_arch("sm_90"), min_changes=1) is None
        if not t.get("redrawn_from"):
            assert all(t["config"][k] != v for k, v in t["repaired_from"].items())
        assert t["source"] == "tpe"


def test_report_and_explain(static_run, env):
    run_dir, _, _ = static_run
    (run_dir / "report.md").unlink()
    done = mage("report", str(run_dir), cwd=run_dir.parent, env=env)
    assert done.returncode == 0, done.stderr
    assert (run_dir / "report.md").read_text().startswith("# Search ")
    for png in ("time_vs_census.png", "best_so_far.png"):
        assert (run_dir / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    best = json.loads((run_dir / "best" / "best.json").read_text())
    done = mage("explain", str(run_dir), "--wide", cwd=run_dir.parent, env=env)  # labels whole, not wrapped
    assert done.returncode == 0, done.stderr
    label = next(t["label"] for t in record.trials(run_dir) if t["number"] == best["trial"])
    assert f"winner: trial {best['trial']} {label}" in done.stdout
    assert "vs Triton's " in done.stdout and "unavailable" not in done.stdout  # compiled offline, censused beside it

    family = json.loads((run_dir / "run.json").read_text())["family"]
    other = "layernorm" if family != "layernorm" else "matmul"
    done = mage("explain", str(run_dir), "--family", other, cwd=run_dir.parent, env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"--family {other} is family {other!r}; the record is of {family!r}" in done.stderr


# --- 5. report and explain from the record alone --------------------------------------------------------------------


def test_report_from_the_record_alone(static_run, tmp_path, env):
    run_dir, _, _ = static_run
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("study.db", "*.png", "report.md"))
    assert not (copy / "study.db").exists()

    done = mage("report", str(copy), "--no-plots", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    text = (copy / "report.md").read_text()
    assert text == (run_dir / "report.md").read_text()  # the same tables as beside the study
    assert "static-model-us/5" in text and "## Top configs" in text
    assert not list(copy.glob("*.png"))

    best = json.loads((copy / "best" / "best.json").read_text())
    done = mage("explain", str(copy), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert f"winner: trial {best['trial']} " in done.stdout

    done = mage("report", str(tmp_path), cwd=tmp_path, env=env)  # no trials.jsonl: a clear error, not a traceback
    assert done.returncode == 2 and "not a search run directory" in done.stderr
    assert "Traceback" not in done.stderr
    done = mage("report", str(tmp_path / "nowhere"), cwd=tmp_path, env=env)
    assert done.returncode == 2 and f"{tmp_path / 'nowhere'}: no such file or directory" in done.stderr

    (copy / "trials.jsonl").write_text("")  # a search stopped before its first trial: its baselines, said so
    done = mage("report", str(copy), "--no-plots", cwd=tmp_path, env=env)
    assert done.returncode == 0 and "trials by outcome: none recorded\n" in done.stdout, done.stderr
    assert "no scored trial in this run" in done.stdout and "config (≠ defaults)" not in done.stdout
    done = mage("explain", str(copy), cwd=tmp_path, env=env)
    assert done.returncode == 2 and "no scored trial in this run: nothing to explain" in done.stderr


# --- 1 (cont.). no GPU: a loud notice and the static model; a static study is never resumed as measured -------------

# `search` as on a machine with a GPU: device detection answers yes, and nothing else is faked. The identity check
# runs when the study opens, before any GPU work, so this shows what a GPU machine would print.
AS_IF_GPU = (
    "-c",
    "import sys; import mage_tune.measure.device as d; d.has_gpu = lambda: True; "
    "d.gpu_mode = lambda: ('measured', 'a GPU (simulated)'); "
    "from mage_tune.cli import main; sys.argv[0] = 'mage-tune'; main()",
)


def test_no_gpu_notice_and_objective_identity(tmp_path, env):
    done = mage(*search_args(LAYERNORM, "run", 3, "--study", "ln", "--seed", "1"), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "NOTICE: no CUDA device here: running the STATIC census model" in done.stderr
    run_dir = tmp_path / "run"
    study = load(run_dir)
    assert study.user_attrs["objective"] == STATIC_OBJECTIVE
    assert len(counted(study)) == 3
    assert {t["objective"] for t in record.trials(run_dir)} == {STATIC_OBJECTIVE}
    assert {t["outcome"] for t in record.trials(run_dir)} <= {"modelled", "pruned", "duplicate"}

    # Resuming that study as a measured search (same --study, same --storage) is refused in one line: by the run
    # directory, which records its study, and (from another run directory) by the study itself.
    storage = sqlite_url(run_dir)
    for folder, says in (
        ("run", "this run directory holds study 'ln' ("),
        ("other", "study 'ln' was made with objective = "),
    ):
        args = search_args(LAYERNORM, folder, 6, "--study", "ln", "--storage", storage, "--arch", "sm_90")
        done = mage(*args, cwd=tmp_path, env=env, prefix=AS_IF_GPU)
        assert done.returncode == 2, done.stderr
        error = done.stderr.strip()
        assert "\n" not in error and "Traceback" not in error
        assert error.startswith("mage-tune: error: ") and says in error
        assert STATIC_OBJECTIVE in error and MEASURED_OBJECTIVE in error
        assert len(load(run_dir).trials) == len(study.trials)  # the refused run touched nothing

    # And the other way round: a measured study is never continued with modelled values.
    spec = SearchSpec(
        "layernorm", {"m": 256, "d": 64}, get_arch("sm_90"), 3, "tpe", None, "measured", tmp_path / "m", 1, False, None
    )
    Search(spec, LayerNorm(), print).heartbeat.close()  # records the study's identity; a GPU is needed only by run()
    args = search_args(LAYERNORM, "m", 3, "--study", "measured", "--static")
    done = mage(*args, cwd=tmp_path, env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"measured, objective {MEASURED_OBJECTIVE}); this search is study 'measured'" in done.stderr
    assert f"static, objective {STATIC_OBJECTIVE})" in done.stderr


def test_a_folder_of_the_user_s_files_is_never_a_run_directory(tmp_path, env):
    """A --run-dir that holds files but no run is refused before anything is written: the user's report.md stays."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "report.md").write_text("MINE")
    done = mage(*search_args(LAYERNORM, "mine", 1, "--static"), cwd=tmp_path, env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "not a run directory and not empty (it holds report.md)" in done.stderr and "mine" in done.stderr
    assert (tmp_path / "mine" / "report.md").read_text() == "MINE"
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["report.md"]
    (tmp_path / "empty" / ".hidden").parent.mkdir()
    (tmp_path / "empty" / ".hidden").write_text("")
    done = mage(*search_args(LAYERNORM, "empty", 1, "--static"), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr


# --- 2. resume after kill -9 ----------------------------------------------------------------------------------------


def test_resume_after_sigkill(tmp_path, env):
    args = [sys.executable, "-m", "mage_tune", *search_args(LAYERNORM, "run", 10, "--static", "--seed", "7")]
    lines = tmp_path / "run" / "trials.jsonl"
    stderr = tmp_path / "killed-run.stderr"
    with open(stderr, "w") as err:  # a file, not a pipe nobody reads while the search writes its progress bar
        proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err)
    pool: list[int] = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (lines.exists() and len(lines.read_text().splitlines()) >= 3):
            assert proc.poll() is None, f"search ended before it was killed: {stderr.read_text()}"
            assert time.monotonic() < deadline, "no 3 trials within the time limit"
            time.sleep(0.05)
        pool = children(proc.pid) if sys.platform == "linux" else []  # its compile processes
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # The compile processes notice their parent is gone and end: a kill -9 leaves no orphans behind.
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in pool) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in pool if alive(pid)], "compile processes outlived the killed search"
    finally:
        for pid in [proc.pid, *pool]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = record.trials(tmp_path / "run")
    assert len(before) >= 3

    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr

    run_dir = tmp_path / "run"
    study = load(run_dir)
    numbers = counted(study)
    assert len(numbers) == 10
    assert len(set(numbers)) == 10

    after = record.trials(run_dir)
    assert [t for t in after if t["number"] in {b["number"] for b in before}] == before  # nothing lost or rewritten
    assert len(line_numbers(run_dir)) == len(set(line_numbers(run_dir)))  # no trial recorded (run) twice
    assert sorted(line_numbers(run_dir)) == sorted(numbers)  # every counted trial is in the record, and only those
    check_record_matches_study(run_dir, study, killed=True)
    by_number = {t.number: t for t in study.trials}
    for line in before:
        assert by_number[line["number"]].params in recorded_params(line, by_number[line["number"]])

    # The killed run's unfinished trials were failed once their heartbeat went stale; they count for nothing.
    abandoned = [t for t in study.trials if "outcome" not in t.user_attrs]
    assert all(t.state == optuna.trial.TrialState.FAIL for t in abandoned)

    # Run once more with every trial done: nothing runs, and the progress line gives the study's best, not "-".
    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert again.returncode == 0 and len(record.trials(run_dir)) == len(after)
    assert f"10/10 trials (100%), best {study.best_value:.2f} µs" in again.stderr


def test_heartbeat_grace_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MAGE_TUNE_HEARTBEAT_GRACE", "8")
    storage = open_storage(None, tmp_path)
    assert storage.grace_period == 8 and 0 < storage.heartbeat_interval <= 8 / 3
    monkeypatch.delenv("MAGE_TUNE_HEARTBEAT_GRACE")
    assert open_storage(None, tmp_path).grace_period == GRACE_S
    for bad in ("soon", "2"):
        monkeypatch.setenv("MAGE_TUNE_HEARTBEAT_GRACE", bad)
        with pytest.raises(InputError, match="MAGE_TUNE_HEARTBEAT_GRACE must be a whole number of seconds"):
            open_storage(None, tmp_path)


# --- 3. two workers on one study through PostgreSQL -----------------------------------------------------------------


def test_two_workers_share_a_postgres_study(tmp_path, env):
    url = os.environ.get("MAGE_TUNE_TEST_POSTGRES")
    if not url:
        pytest.skip("MAGE_TUNE_TEST_POSTGRES is not set (.ci/run starts a PostgreSQL server and sets it)")
    name = f"test-two-workers-{uuid.uuid4().hex}"
    procs = {}
    for worker in ("a", "b"):
        args = search_args(LAYERNORM, f"run-{worker}", 12, "--static", "--storage", url, "--study", name)
        procs[worker] = subprocess.Popen(
            [sys.executable, "-m", "mage_tune", *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        errors = {worker: proc.communicate(timeout=TIMEOUT)[1] for worker, proc in procs.items()}
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    for worker, proc in procs.items():
        assert proc.returncode == 0, f"worker {worker}: {errors[worker]}"

    try:
        study = optuna.load_study(study_name=name, storage=url)
        numbers = counted(study)
        assert len(numbers) == 12
        assert len(set(numbers)) == 12
        outcomes = {t.number: t.user_attrs.get("outcome") for t in study.get_trials(deepcopy=False)}
        assert set(outcomes.values()) <= {*RECORDED, "surplus"}  # every trial counts, is a duplicate or surplus
        for t in study.get_trials(deepcopy=False):
            if outcomes[t.number] == "surplus":
                assert t.state == optuna.trial.TrialState.FAIL

        a, b = (line_numbers(tmp_path / f"run-{worker}") for worker in ("a", "b"))
        assert not set(a) & set(b), "a trial recorded by both workers"
        recorded = [t.number for t in study.get_trials(deepcopy=False) if outcomes[t.number] in RECORDED]
        assert sorted(a + b) == sorted(recorded)
        for worker in ("a", "b"):
            check_record_matches_study(tmp_path / f"run-{worker}", study)
    finally:
        optuna.delete_study(study_name=name, storage=url)


# --- 4. compile errors and pruned configs are trials ----------------------------------------------------------------


def _narrow(knob, values=None):
    return dataclasses.replace(knob, domain=tuple(values) if values else knob.domain[:1])


class BrokenLayerNorm(LayerNorm):
    """Layer norm over a six-config grid: threads=64 renders a syntax error, threads=1024 with rows=2 breaks the
    threads × rows ≤ 1024 constraint, the rest compile. Module level, so compile processes unpickle it by name."""

    knobs = tuple(_narrow(k, {"threads": (128, 64, 1024), "rows": (1, 2)}.get(k.name)) for k in LayerNorm.knobs)

    def render(self, config: Config, shape: Shape) -> str:
        source = super().render(config, shape)
        return source + ("\nthis is not cuda;\n" if config["threads"] == 64 else "")


def test_compile_errors_and_pruned_configs_are_trials(tmp_path):
    family = BrokenLayerNorm()
    run_dir = tmp_path / "run"
    # Grid over the six configs; keep_going: the search would otherwise stop once the five valid ones have run,
    # whether or not the grid has reached the sixth yet.
    spec = SearchSpec(
        "layernorm",
        {"m": 256, "d": 64},
        get_arch("sm_90"),
        6,
        "grid",
        None,
        "broken",
        run_dir,
        2,
        True,
        0,
        keep_going=True,
    )
    progress = []
    Search(spec, family, print).run(lambda done, best: progress.append(done))
    assert progress[-1] == 6

    study = optuna.load_study(study_name="broken", storage=sqlite_url(run_dir))
    assert len(counted(study)) == 6
    lines = record.trials(run_dir)
    assert len(lines) == 6
    check_record_matches_study(run_dir, study)
    seen = {(t["config"]["threads"], t["config"]["rows"]) for t in lines}
    assert seen == {(threads, rows) for threads in (128, 64, 1024) for rows in (1, 2)}  # the whole grid ran

    states = {t.number: t.state for t in study.trials}
    for line in lines:
        threads, rows = line["config"]["threads"], line["config"]["rows"]
        if threads == 64:
            assert line["outcome"] == "compile_error"
            assert line["label"] in line["error"] and "NVRTC log:" in line["error"]
            assert "this" in line["error"]  # NVRTC's own message about the injected line
            assert states[line["number"]] == optuna.trial.TrialState.PRUNED  # so TPE learns to avoid it
        elif threads * rows > 1024:
            assert line["outcome"] == "pruned"
            assert "2048 threads per block, over 1024" in line["reason"]
            assert states[line["number"]] == optuna.trial.TrialState.PRUNED
        else:
            assert line["outcome"] in ("modelled", "duplicate")
            assert line["value"] > 0 and line["census"]["registers"] > 0
            assert states[line["number"]] == optuna.trial.TrialState.COMPLETE

    # The report says why trials did not score, grouped, with the knob value that sets them apart
    said = report.unscored_lines(run_dir)
    assert len(said) == 2, said
    compile_line = next(line for line in said if line.startswith("compile_error 2: "))
    assert compile_line.endswith("; every one with threads=64, which no scored trial has")
    assert next(line for line in said if line.startswith("pruned 1: ") and "over 1024" in line)
    assert "trials that did not score:\n  compile_error 2: " in report.terminal(run_dir)


class SeedLayerNorm(LayerNorm):
    """Layer norm with one config: the seed (each knob at its first value)."""

    knobs = tuple(_narrow(k) for k in LayerNorm.knobs)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_the_sampler_learns_to_avoid_a_knob_value_whose_variants_fail():
    """The search tells a failed variant as pruned (the test above): the default sampler then ranks it below every
    measured trial. Told as failed, TPE left those trials out and drew the failing value in most trials."""

    def failing_draws(state) -> int:
        study = optuna.create_study(sampler=make_sampler("tpe", get_family("layernorm"), seed=3))
        failing = 0
        for i in range(60):
            trial = study.ask()
            chain = trial.suggest_categorical("chain", [1, 2, 4])
            tile = trial.suggest_categorical("bm", [64, 128, 256])
            if chain == 4:  # every variant with chain 4 fails its check, as at the accuracy bar
                failing += 1
                study.tell(trial, state=state)
            else:
                study.tell(trial, 100.0 + 3 * chain + abs(tile - 128) / 10 + (i % 7) / 10)
        return failing

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    assert failing_draws(optuna.trial.TrialState.PRUNED) <= 15  # mostly the 10 random startup draws' share
    assert failing_draws(optuna.trial.TrialState.FAIL) >= 30


def test_a_trial_killed_between_outcome_and_tell(tmp_path):
    """What a kill between a trial's outcome attr and its tell leaves (a counted trial the heartbeat failed, without a
    value in the study) is no source for `duplicate`: the same binary is scored again, not given a missing value."""
    family, shape = SeedLayerNorm(), {"m": 256, "d": 64}
    variant = family.build({k.name: k.domain[0] for k in family.knobs}, shape, get_arch("sm_90"))
    run_dir = tmp_path / "run"
    spec = SearchSpec("layernorm", shape, get_arch("sm_90"), 2, "random", None, "killed", run_dir, 1, True, 0)
    search = Search(spec, family, print)
    left = search.study.ask()
    left.set_user_attr("sass_sha256", record.sha256(variant.artifact.sass))
    left.set_user_attr("outcome", "modelled")
    search.study.tell(left, state=optuna.trial.TrialState.FAIL)

    search.run(lambda done, best: None)
    (line,) = record.trials(run_dir)
    assert line["number"] == 1 and line["outcome"] == "modelled" and line["value"] > 0
    assert len(counted(search.study)) == 2


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_a_trial_killed_before_its_first_heartbeat_is_failed(tmp_path, monkeypatch):
    """A process killed between ask() and its first heartbeat leaves a RUNNING trial that never beat; Optuna alone
    would never call it stale, and a resumed search waiting for its place would wait for ever. The resumed search
    beats for it once, so it goes stale after the grace period and the search takes its place."""
    import threading

    monkeypatch.setenv("MAGE_TUNE_HEARTBEAT_GRACE", "3")
    run_dir = tmp_path / "run"
    spec = SearchSpec(
        "layernorm", {"m": 256, "d": 64}, get_arch("sm_90"), 1, "random", None, "orphan", run_dir, 1, True, 0
    )
    search = Search(spec, SeedLayerNorm(), print)
    with pytest.warns(UserWarning, match="Heartbeat"):
        orphan = search.study.ask()  # no heartbeat recorded: as if killed right here
    worker = threading.Thread(target=search.run, args=(lambda done, best: None,), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the search still waits for the place of a trial that never beat"
    states = {t.number: t.state for t in search.study.get_trials(deepcopy=False)}
    assert states[orphan.number] == optuna.trial.TrialState.FAIL
    (line,) = record.trials(run_dir)
    assert line["outcome"] == "modelled" and line["number"] != orphan.number


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_a_trial_killed_between_its_line_and_tell_is_failed_before_the_search_ends(tmp_path, monkeypatch):
    """A kill after a trial's trials.jsonl line but before its tell leaves a counted trial still marked running.
    The search that reaches the count waits for it to go stale, so it ends with none of its trials running."""
    monkeypatch.setenv("MAGE_TUNE_HEARTBEAT_GRACE", "3")
    run_dir = tmp_path / "run"
    spec = SearchSpec(
        "layernorm", {"m": 256, "d": 64}, get_arch("sm_90"), 2, "random", None, "lined", run_dir, 1, True, 0
    )
    said: list[str] = []
    search = Search(spec, SeedLayerNorm(), said.append)
    with pytest.warns(UserWarning, match="Heartbeat"):
        killed = search.study.ask()
    config = {k.name: k.domain[0] for k in SeedLayerNorm.knobs}
    attrs = {"config": config, "value": 1.0, "outcome": "modelled"}
    for key, value in {**attrs, "run_dir": str(run_dir.resolve())}.items():
        killed.set_user_attr(key, value)
    record.append_trial(run_dir, {"number": killed.number, **attrs})

    search.run(lambda done, best: None)
    states = {t.number: t.state for t in search.study.get_trials(deepcopy=False)}
    assert states[killed.number] == optuna.trial.TrialState.FAIL
    assert sorted(line["number"] for line in record.trials(run_dir)) == sorted(states)
    # its one config has been modelled, so the search runs no other; the wait is said once, with the trial and
    # the grace
    assert said == [
        "all 1 valid configs of the space have been modelled; stopping after 1 trial",
        f"waiting for trial(s) {killed.number}, running elsewhere: a live worker ends its own; a stopped process's "
        "are given up after 3 s without a heartbeat",
    ]


def test_the_last_trials_polish_the_best_configs(tmp_path):
    """--polish 6 of 14 trials: once 8 have counted, each batch of the search is enqueued untried one-knob neighbours
    of its three best distinct configs so far. Every one is recorded with its source ("polish knob=value on #N"): the
    knob has that value, trial N ran earlier, among the three best configs then, with another value of that knob, and
    the two configs differ in at most two knobs more (a constraint's repair); no config runs twice."""
    family = get_family("layernorm")
    shape = {"m": 256, "d": 64}
    spec = SearchSpec(
        "layernorm",
        shape,
        get_arch("sm_90"),
        14,
        "tpe",
        None,
        "polish",
        tmp_path / "run",
        2,
        True,
        3,
        db="off",
        polish=6,
    )
    Search(spec, family, print).run(lambda done, best: None)
    lines = sorted(record.trials(tmp_path / "run"), key=lambda t: t["number"])
    assert len(lines) == 14
    polished = [t for t in lines if t["source"].startswith("polish ")]
    assert [t["number"] for t in polished] == [t["number"] for t in lines[-6:]]
    configs = [json.dumps(t["config"], sort_keys=True) for t in lines]
    assert len(set(configs)) == len(configs)
    for t in polished:
        change, base_number = t["source"].removeprefix("polish ").split(" on #")
        knob, value = change.split("=")
        base = next(b for b in lines if b["number"] == int(base_number))
        assert str(t["config"][knob]) == value != str(base["config"][knob])
        assert sum(t["config"][k] != base["config"][k] for k in t["config"]) <= 3
        earlier = sorted(
            (b for b in lines if b["number"] < t["number"] and b["outcome"] == "modelled"), key=lambda b: b["value"]
        )
        distinct: list[dict] = []
        for b in earlier:
            if all(b["config"] != c["config"] for c in distinct):
                distinct.append(b)
        # the three best when the batch was enqueued; its other trial, numbered before this one, may have run since
        assert base in distinct[:4]


def test_polish_zero_leaves_every_trial_to_the_sampler(tmp_path):
    spec = SearchSpec(
        "layernorm",
        {"m": 256, "d": 64},
        get_arch("sm_90"),
        10,
        "tpe",
        None,
        "plain",
        tmp_path / "run",
        2,
        True,
        3,
        db="off",
        polish=0,
    )
    Search(spec, get_family("layernorm"), print).run(lambda done, best: None)
    lines = record.trials(tmp_path / "run")
    assert len(lines) == 10 and {t["source"] for t in lines} == {"tpe"}
    assert (polish.default_trials(100, "tpe"), polish.default_trials(100, "grid"), polish.default_trials(6, "tpe")) == (
        25,
        0,
        0,
    )


class PersistLayerNorm(LayerNorm):
    """Layer norm whose only choice is persist=2 or 4: one kernel (the value only sets the grid)."""

    knobs = tuple(_narrow(k, {"persist": (2, 4)}.get(k.name)) for k in LayerNorm.knobs)


@pytest.mark.parametrize(("m", "second"), [(4096, "modelled"), (256, "duplicate")])
def test_a_duplicate_is_the_same_kernel_on_the_same_launch(tmp_path, m, second):
    """persist=2 and 4 share one SASS. At m=4096 their grids differ (264 and 528 blocks), so each is scored; at m=256
    both grids are the 256 row groups, and the second is the first's duplicate."""
    spec = SearchSpec(
        "layernorm",
        {"m": m, "d": 64},
        get_arch("sm_90"),
        2,
        "grid",
        None,
        "persist",
        tmp_path / "run",
        1,
        True,
        0,
        db="off",
    )
    Search(spec, PersistLayerNorm(), print).run(lambda done, best: None)
    lines = sorted(record.trials(tmp_path / "run"), key=lambda t: t["number"])
    assert [t["outcome"] for t in lines] == ["modelled", second]
    assert lines[0]["sass_sha256"] == lines[1]["sass_sha256"]
    assert (lines[0]["grid"] == lines[1]["grid"]) == (second == "duplicate")


def test_a_config_already_tried_runs_as_an_untried_neighbour(tmp_path):
    """TPE draws its best configs again; each such draw runs as an untried one-knob neighbour (its record keeps the
    replaced values as redrawn_from), so no config of the search runs twice."""
    family = get_family("layernorm")
    # seed 7: TPE repeats a draw within the 40 trials (8 of the 10 seeds tried do, in a space this size)
    spec = SearchSpec(
        "layernorm", {"m": 256, "d": 64}, get_arch("sm_90"), 40, "tpe", None, "redraw", tmp_path / "run", 2, True, 7,
        db="off", polish=0,
    )  # fmt: skip
    Search(spec, family, print).run(lambda done, best: None)
    lines = sorted(record.trials(tmp_path / "run"), key=lambda t: t["number"])
    configs = [json.dumps(t["config"], sort_keys=True) for t in lines]
    assert len(lines) == 40 and len(set(configs)) == 40
    redrawn = [t for t in lines if t.get("redrawn_from")]
    assert redrawn
    for t in redrawn:
        drawn = {**t["config"], **t["redrawn_from"]}  # what the sampler asked for, once repaired
        assert json.dumps(drawn, sort_keys=True) in configs[: lines.index(t)]
        changed = [k for k in t["config"] if t["config"][k] != drawn[k]]
        assert 1 <= len(changed) <= 3 and not family.violations(t["config"], {"m": 256, "d": 64}, get_arch("sm_90"))


def test_the_polish_tries_a_value_the_search_has_only_seen_slow_last():
    """Without a model the neighbours come in a seeded random order, except that a neighbour whose changed value the
    search has measured goes back by how much slower its best time with that value was than the search's best."""
    family, shape = get_family("layernorm"), {"m": 4096, "d": 768}
    base = family.with_defaults({})
    found = list(neighbours(family, [("#0", base)], shape, get_arch("sm_90"), set()))
    assert len({n.knob for n in found}) == len(family.knobs)
    slow = {**base, "passes": "twopass"}
    fast = {**base, "threads": 64}
    measured = [(base, 10.0), (slow, 13.0), (fast, 10.0)]
    order = polish.ranked(Problem(family, shape, get_arch("sm_90")), found, None, 1, measured)
    assert sorted(order, key=lambda n: n.source) == sorted(found, key=lambda n: n.source)  # the same neighbours
    assert (order[-1].knob, order[-1].value) == ("passes", "twopass")
    plain = polish.ranked(Problem(family, shape, get_arch("sm_90")), found, None, 1)
    assert plain != order and plain == polish.ranked(
        Problem(family, shape, get_arch("sm_90")), found, None, 1
    )  # seeded
