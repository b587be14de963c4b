"""Fault injection through the real console entry point: bad options, damaged records, a full disk, a stopped
database, tools that hang or crash, kills at random moments, two processes on one cache and one run directory.

Every case ends in one of two ways, and the test says which: a clean error (exit 2, one `mage-tune: error:` line
naming the user's file, no traceback, no temporary path) or a correct recovery (a resumed search counts exactly
--trials, every finished trial is kept, none is recorded twice, nothing recorded is rewritten).

Searches are static (no GPU) on a small layer norm; the compile cache is the session's (conftest), so compiles are
shared between tests and the file stays within a few minutes on two cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
import warnings
from pathlib import Path

import optuna
import pytest
from conftest import KERNELS

from mage_tune.arch import get_arch
from mage_tune.compile import _load_cached, _store, build_from_cu
from mage_tune.search import record
from mage_tune.search.runner import COUNTED

PROBLEM = ("layernorm", "--d", "64", "--m", "256")
TIMEOUT = 300


@pytest.fixture(scope="module")
def env(compile_cache) -> dict[str, str]:
    # 8 s (a beat every 2 s): a loaded machine's late beat never gets a live worker's trial failed as stale
    return {**os.environ, "MAGE_TUNE_CACHE": str(compile_cache), "MAGE_TUNE_HEARTBEAT_GRACE": "8"}


def mage(*args: str, cwd: Path, env: dict, limit: int | None = None) -> subprocess.CompletedProcess:
    """`python -m mage_tune ARGS`; `limit`: a file-size limit in bytes (a full disk: writes past it fail EFBIG)."""
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        preexec_fn=(lambda: _limit_files(limit)) if limit is not None else None,
    )


def _limit_files(limit: int) -> None:
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def search(run_dir: str, trials: int, *extra: str) -> list[str]:
    # TPE's first draws take each knob independently, so some break constraints (pruned, no report); with seed 4 two
    # of the first three are valid even with an empty tuning database.
    return ["search", *PROBLEM, "--trials", str(trials), "--static", "--seed", "4", "--run-dir", run_dir, *extra]


def clean_error(run: subprocess.CompletedProcess, *names: str) -> str:
    """Exit 2, no traceback, one error message (wrapped to the terminal: its lines are joined back) naming each of
    `names`; the message is returned."""
    assert run.returncode == 2, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout, run.stderr
    lines = run.stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("mage-tune: error:")]
    assert len(starts) == 1, run.stderr
    message = " ".join(line.strip() for line in lines[starts[0] :])
    squeezed = "".join(message.split())  # a long path may be broken across lines
    for name in names:
        assert "".join(name.split()) in squeezed, (name, message)
    assert "/tmp/mage-" not in squeezed  # a temporary copy is never what an error names
    return message


def study_of(run_dir: Path, storage: str | None = None) -> optuna.Study:
    from mage_tune.storage import sqlite_url

    name = json.loads((run_dir / "search.json").read_text())["study"]
    return optuna.load_study(study_name=name, storage=storage or sqlite_url(run_dir / "study.db"))


def assert_exact(run_dir: Path, trials: int, storage: str | None = None) -> None:
    """The study counts exactly `trials`; trials.jsonl holds each counted trial once, and besides them only duplicates
    (recorded, never counted) that the study holds as duplicates."""
    study = study_of(run_dir, storage)
    outcomes = {t.number: t.user_attrs.get("outcome") for t in study.get_trials(deepcopy=False)}
    counted = [n for n, outcome in outcomes.items() if outcome in COUNTED]
    assert len(counted) == trials == len(set(counted))
    lines = record.trials(run_dir)
    numbers = [t["number"] for t in lines]
    assert len(numbers) == len(set(numbers)), "a trial recorded twice"
    assert sorted(t["number"] for t in lines if t["outcome"] in COUNTED) == sorted(counted)
    assert all(outcomes[t["number"]] == "duplicate" for t in lines if t["outcome"] not in COUNTED)


# --- options and run directories ----------------------------------------------------------------------------------


@pytest.mark.parametrize("option", [("--workers", "0"), ("--workers", "-1"), ("--trials", "0"), ("--trials", "-5")])
def test_counts_out_of_range_are_usage_errors(tmp_path, env, option):
    run = mage(*search("run", 3), *option, cwd=tmp_path, env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"Invalid value for '{option[0]}'" in run.stderr
    assert not (tmp_path / "run").exists()


def test_one_study_per_run_directory(tmp_path, env):
    """A run directory reused for another shape (or study, or mode) is refused, naming both; nothing is touched."""
    assert mage(*search("run", 3), cwd=tmp_path, env=env).returncode == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    other = ["search", "layernorm", "--d", "128", "--m", "256", "--trials", "3", "--static", "--run-dir", "run"]
    message = clean_error(mage(*other, cwd=tmp_path, env=env), "run", "d=64", "d=128")
    assert "layernorm-m256-d64-sm_90-static" in message and "layernorm-m256-d128-sm_90-static" in message
    after = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    assert after == before


@pytest.mark.parametrize("name", ["r?1", "r#1", "r%201"])
def test_run_directory_names_are_escaped(tmp_path, env, name):
    """`?`, `#` and `%` in --run-dir stay in the path: the study lands in that folder, and a second folder gets its
    own study (not a 'resumed' one with 0 trials run)."""
    second = name[:-1] + "2"
    for folder in (name, second):
        assert mage(*search(folder, 2), cwd=tmp_path, env=env).returncode == 0
        assert (tmp_path / folder / "study.db").is_file()
        assert_exact(tmp_path / folder, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, second])


def test_run_directory_that_cannot_be_made(tmp_path, env):
    (tmp_path / "afile").write_text("x")
    clean_error(mage(*search("afile/run", 3), cwd=tmp_path, env=env), "afile/run")
    usage = mage(*search("afile", 3), cwd=tmp_path, env=env)  # refused by the option's own check
    assert usage.returncode == 2 and "Traceback" not in usage.stderr and "'afile' is a file" in usage.stderr
    long = "n" * 300
    clean_error(mage(*search(long, 3), cwd=tmp_path, env=env), long[:50])
    if os.geteuid() != 0:  # root writes through any mode bits
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        clean_error(mage(*search("locked/run", 3), cwd=tmp_path, env=env), "locked/run")


# --- storage URLs -------------------------------------------------------------------------------------------------


def test_storage_password_is_never_echoed(tmp_path, env):
    with socket.socket() as s:  # a port nothing listens on: the connection is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for scheme in ("postgresql", "postgresql+psycopg2"):
        url = f"{scheme}://mage:s3cr3t-pw@127.0.0.1:{port}/db"
        run = mage(*search("run", 3), "--storage", url, "--study", "s", cwd=tmp_path, env=env)
        message = clean_error(run, f"127.0.0.1:{port}")
        assert "s3cr3t-pw" not in run.stderr + run.stdout and "***" in message
        assert "Failed to import DB access module" not in message  # plain postgresql:// finds the installed driver


def test_journal_storage_fails_a_killed_workers_trial(tmp_path, monkeypatch):
    """A journal file gets heartbeats too: a RUNNING trial whose beats stopped is failed after the grace period."""
    from mage_tune import storage

    monkeypatch.setenv("MAGE_TUNE_HEARTBEAT_GRACE", "3")
    journal = storage.open_storage(f"journal:{tmp_path / 'j.log'}", tmp_path)
    study = optuna.create_study(study_name="j", storage=journal)
    with warnings.catch_warnings():  # ask() says Optuna beats only in optimize(): the search beats for its trials
        warnings.simplefilter("ignore", UserWarning)
        alive, dead, silent = study.ask(), study.ask(), study.ask()
    assert journal.get_heartbeat_interval() == 1
    for trial in (alive, dead):
        journal.record_heartbeat(trial._trial_id)
    now = time.time()
    monkeypatch.setattr(storage.time, "time", lambda: now + 10)
    journal.record_heartbeat(alive._trial_id)  # still beating, 10 s later
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        optuna.storages.fail_stale_trials(study)
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states[dead.number] == optuna.trial.TrialState.FAIL
    assert states[alive.number] == states[silent.number] == optuna.trial.TrialState.RUNNING  # never beat: adopt()


# --- kills, interrupts, two processes -----------------------------------------------------------------------------


def _start(args: list[str], cwd: Path, env: dict, err: Path) -> subprocess.Popen:
    with open(err, "w") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "mage_tune", *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=f
        )


def _wait_lines(path: Path, n: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not (path.exists() and len(path.read_bytes().splitlines()) >= n):
        if proc.poll() is not None:
            return
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.parametrize("storage", ["sqlite", "journal"])
def test_kill_9_at_random_moments_then_resume(tmp_path, env, storage):
    """Three kill -9s at random moments (seeded), then a run to the end: exactly --trials counted, each recorded
    once, and every line written before a kill still there, unchanged."""
    trials, rng = 10, random.Random(storage)
    extra = ("--storage", f"journal:{tmp_path / 'run.journal'}") if storage == "journal" else ()
    lines = tmp_path / "run" / "trials.jsonl"
    for kill in range(3):
        proc = _start(search("run", trials, *extra), tmp_path, env, tmp_path / f"kill{kill}.err")
        _wait_lines(lines, (kill + 1) * 2, proc)
        time.sleep(rng.uniform(0, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kept = lines.read_bytes() if lines.exists() else b""
    run = mage(*search("run", trials, *extra), cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert lines.read_bytes().startswith(kept.rsplit(b"\n", 1)[0])  # appended to, never rewritten
    if storage == "sqlite":
        assert_exact(tmp_path / "run", trials)
    else:
        assert_exact(tmp_path / "run", trials, journal_storage(tmp_path / "run.journal"))


def test_a_counted_trial_a_kill_left_without_its_line_gets_it_on_resume(tmp_path, env):
    """The narrow window a kill can hit: the outcome attr set (the trial counts), its trials.jsonl line not yet
    written, the tell never made. Made here deterministically; the resumed search writes the line from the study."""
    assert mage(*search("run", 3), cwd=tmp_path, env=env).returncode == 0
    study = study_of(tmp_path / "run")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        orphan = study.ask()
    planted = {"config": {"threads": 32}, "label": "planted", "run_dir": str((tmp_path / "run").resolve())}
    for key, value in {**planted, "value": None, "outcome": "pruned"}.items():
        orphan.set_user_attr(key, value)
    study.tell(orphan, state=optuna.trial.TrialState.FAIL)  # what the killed trial's silent heartbeat leads to
    run = mage(*search("run", 5), cwd=tmp_path, env=env)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    lines = [t for t in record.trials(tmp_path / "run") if t["number"] == orphan.number]
    assert len(lines) == 1 and lines[0]["outcome"] == "pruned" and lines[0]["label"] == "planted"
    assert_exact(tmp_path / "run", 5)


def journal_storage(path: Path):
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    return JournalStorage(JournalFileBackend(str(path)))


INTERRUPTED_QUERY = """
import logging, pathlib, sys
from mage_tune.storage import open_storage

open_storage("sqlite:///" + sys.argv[1], pathlib.Path(sys.argv[1]).parent)
try:
    raise KeyboardInterrupt
except KeyboardInterrupt:
    logging.getLogger("sqlalchemy.pool.impl.QueuePool").error("Error closing cursor", exc_info=True)
"""


def test_a_connection_interrupted_mid_query_prints_no_traceback(tmp_path, env):
    """A Ctrl-C during a database query makes SQLAlchemy log the cursor it could not close, with a traceback, which
    Python prints to stderr when no handler takes that logger (in its own process: pytest would take it here). Every
    study and tuning database opens through open_storage, which gives the logger a handler."""
    script = [sys.executable, "-c", INTERRUPTED_QUERY, str(tmp_path / "study.db")]
    done = subprocess.run(script, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_ctrl_c_prints_no_traceback(tmp_path, env):
    """SIGINT to the whole process group (what a terminal's Ctrl-C does): the search says how to resume, and no
    compile process prints a traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mage_tune", *search("run", 40)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # as from a terminal: a suite started in the background (`pytest &`) passes Ctrl-C on ignored, and a
        # process that starts with SIGINT ignored (a shell's background job) rightly never sees it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    _wait_lines(tmp_path / "run" / "trials.jsonl", 2, proc)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "re-run the same command to resume" in err


def test_two_processes_on_one_run_directory(tmp_path, env):
    """Two searches of the same study on one run directory at once share the work: exactly --trials in all."""
    procs = [_start(search("run", 10), tmp_path, env, tmp_path / f"p{i}.err") for i in range(2)]
    for proc in procs:
        proc.wait(timeout=TIMEOUT)
    errors = [(tmp_path / f"p{i}.err").read_text() for i in range(2)]
    for proc, err in zip(procs, errors, strict=True):
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    assert_exact(tmp_path / "run", 10)


def _store_many(args) -> int:
    """Child process: store the same key again and again, reading it back between stores."""
    key, art, rounds = args
    damaged = 0
    for _ in range(rounds):
        _store(key, art)
        got = _load_cached(key, art.label, art.arch, None)
        damaged += got is None or got.sass != art.sass or got.cubin != art.cubin
    return damaged


def test_two_processes_on_one_cache(tmp_path, monkeypatch):
    """Writers racing on one key never expose a partial entry: every read is the whole entry."""
    from concurrent.futures import ProcessPoolExecutor

    monkeypatch.setenv("MAGE_TUNE_CACHE", str(tmp_path))
    art = build_from_cu((KERNELS / "vec_scale.cu").read_text(), get_arch("sm_89"), "vec_scale.cu")
    key = "f" * 32
    with ProcessPoolExecutor(2) as pool:
        assert sum(pool.map(_store_many, [(key, art, 40)] * 2)) == 0
    assert not [p.name for p in tmp_path.joinpath("compile").iterdir() if p.name.startswith(".")]  # none left over


def test_damaged_cache_entry_is_compiled_again(tmp_path, monkeypatch):
    """A cached kernel.sass cut short (or any file of the entry changed) fails its digest and is rebuilt: never
    'SASS global loads 0' from a truncated listing."""
    from mage_tune.census import census_artifact

    monkeypatch.setenv("MAGE_TUNE_CACHE", str(tmp_path))
    source = (KERNELS / "vec_scale.cu").read_text()
    first = build_from_cu(source, get_arch("sm_89"), "vec_scale.cu")
    (entry,) = (tmp_path / "compile").iterdir()
    for name, damage in (("kernel.sass", b""), ("kernel.cubin", b"\x7fELF"), ("manifest.json", b"{")):
        path = entry / name
        good = path.read_bytes()
        path.write_bytes(damage)
        again = build_from_cu(source, get_arch("sm_89"), "vec_scale.cu")
        assert again.sass == first.sass and again.cubin == first.cubin
        (entry,) = (tmp_path / "compile").iterdir()
        replaced = (entry / name).read_bytes()  # the entry was replaced whole
        assert replaced == good if name != "manifest.json" else json.loads(replaced)["files"]
    (census,) = census_artifact(again)
    assert sum(census.sass.global_loads.values()) > 0


# --- a full disk, a stopped database -------------------------------------------------------------------------------


def test_full_disk_mid_search_then_resume(tmp_path, env):
    """Writes fail part-way (a file-size limit): a clean error that says the trials are kept; once there is room, the
    same command finishes with exact counts and every line written before is still there."""
    run = mage(*search("run", 30), cwd=tmp_path, env=env, limit=150_000)
    message = clean_error(run)
    assert "re-run the same command" in message or "trials.jsonl" in message or "cannot write" in message
    kept = (tmp_path / "run" / "trials.jsonl").read_bytes()
    assert kept
    done = mage(*search("run", 30), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "run" / "trials.jsonl").read_bytes().startswith(kept.rsplit(b"\n", 1)[0])
    assert_exact(tmp_path / "run", 30)


def test_report_where_nothing_can_be_written(tmp_path, env):
    assert mage(*search("run", 3), cwd=tmp_path, env=env).returncode == 0
    (tmp_path / "run" / "report.md").unlink()
    run = mage("report", "run", cwd=tmp_path, env=env, limit=0)
    clean_error(run, "report.md")
    assert "Trials by outcome" in run.stdout or "trials by outcome" in run.stdout  # the tables are still printed


class Proxy:
    """A TCP forwarder to the test PostgreSQL server: stopping it is, to a search, the server going away."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.socks: list[socket.socket] = []
        self.stopped = False
        self.lock = threading.Lock()  # a connection accepted while stop() runs is closed by one of them, never left
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self.lock:
                if self.stopped:
                    _close(client, server)
                    return
                self.socks += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            self.listener.close()
            _close(*self.socks)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()


def test_postgres_stopped_mid_search_then_resume(tmp_path, env):
    url = os.environ.get("MAGE_TUNE_TEST_POSTGRES")
    if not url:
        pytest.skip("MAGE_TUNE_TEST_POSTGRES is not set (.ci/run starts a PostgreSQL server and sets it)")
    from sqlalchemy.engine import make_url

    real = make_url(url)
    proxy = Proxy(real.host or "127.0.0.1", real.port or 5432)
    through = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    name = f"test-stopped-{uuid.uuid4().hex}"
    extra = ("--storage", through, "--study", name)
    proc = _start(search("run", 20, *extra), tmp_path, env, tmp_path / "stopped.err")
    try:
        _wait_lines(tmp_path / "run" / "trials.jsonl", 3, proc)
        proxy.stop()
        proc.wait(timeout=120)
        err = (tmp_path / "stopped.err").read_text()
        assert proc.returncode == 2, err
        assert "Traceback" not in err
        (line,) = [ln for ln in err.splitlines() if ln.startswith("mage-tune: error:")]
        assert "storage" in line and "re-run the same command" in line
        kept = record.trials(tmp_path / "run")
        assert kept
        proxy = Proxy(real.host or "127.0.0.1", real.port or 5432)  # the server is back (on another port)
        # ... and is named as PostgreSQL documents it: plain postgresql://, whichever driver is installed.
        again = real.set(drivername="postgresql", host="127.0.0.1", port=proxy.port)
        again = again.render_as_string(hide_password=False)
        done = mage(*search("run", 20, "--storage", again, "--study", name), cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        assert record.trials(tmp_path / "run")[: len(kept)] == kept
        assert_exact(tmp_path / "run", 20, url)
    finally:
        proc.kill()
        proxy.stop()
        optuna.delete_study(study_name=name, storage=url)


# --- tools that hang or crash ---------------------------------------------------------------------------------


def _fake_tools(folder: Path, behaviour: str) -> dict:
    """CUDA_HOME/bin with a ptxas and a cuobjdump that answer --version and --help, then hang or crash on real
    work."""
    (folder / "bin").mkdir(parents=True)
    for name in ("ptxas", "cuobjdump"):
        tool = folder / "bin" / name
        action = "exec sleep 30" if behaviour == "hang" else "kill -SEGV $$"
        tool.write_text(
            '#!/bin/sh\ncase "$1" in --version|--help) echo "Cuda compilation tools, release 13.0, V13.0.1"; '
            f"exit 0;; esac\n{action}\n"
        )
        tool.chmod(0o755)
    return {"CUDA_HOME": str(folder), "MAGE_TUNE_TOOL_TIMEOUT": "2"}


@pytest.mark.parametrize("behaviour", ["hang", "crash"])
def test_tool_that_hangs_or_crashes(tmp_path, env, behaviour):
    """ptxas and cuobjdump timing out or crashing: an error naming the user's file, never the temporary copy."""
    from mage_tune.compile import nvrtc_ptx

    ptx = tmp_path / "k.ptx"
    ptx.write_text(nvrtc_ptx((KERNELS / "vec_scale.cu").read_text(), get_arch("sm_89"), "vec_scale.cu"))
    fake = {**env, **_fake_tools(tmp_path / "cuda", behaviour), "MAGE_TUNE_CACHE": str(tmp_path / "cache")}
    message = clean_error(mage("census", "k.ptx", cwd=tmp_path, env=fake), "k.ptx", "ptxas")
    assert ("did not finish within 2 s" if behaviour == "hang" else "crashed (SIGSEGV)") in message
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(build_from_cu((KERNELS / "vec_scale.cu").read_text(), get_arch("sm_89"), "v.cu").cubin)
    clean_error(mage("census", "k.cubin", cwd=tmp_path, env=fake), "k.cubin", "cuobjdump")


# --- inputs that are too big or not files -------------------------------------------------------------------------


def test_census_reads_are_bounded(tmp_path, env):
    big = tmp_path / "big.ptx"
    with open(big, "wb") as f:  # sparse: 50 MB on paper, nothing on disk
        f.truncate(50 * 2**20)
    start = time.monotonic()
    clean_error(mage("census", str(big), cwd=tmp_path, env=env), "big.ptx", "limit")
    assert time.monotonic() - start < 60
    clean_error(mage("census", "/dev/zero", cwd=tmp_path, env=env), "/dev/zero", "not a regular file")
    os.mkfifo(tmp_path / "pipe.ptx")
    clean_error(mage("census", "pipe.ptx", cwd=tmp_path, env=env), "pipe.ptx")
    clean_error(mage("census", str(tmp_path), cwd=tmp_path, env=env), str(tmp_path))


# --- hand-damaged records -------------------------------------------------------------------------------------------


def test_damaged_run_record_is_read_around(tmp_path, env):
    """Lines that are not sound trials are reported with file:line and skipped; the sound ones are reported on;
    nothing in the run directory is rewritten, and a resumed search appends after the damage."""
    assert mage(*search("run", 4), cwd=tmp_path, env=env).returncode == 0
    run_dir = tmp_path / "run"
    sound = (run_dir / "trials.jsonl").read_bytes()
    damage = [
        b"null",
        b"[1,2,3]",
        b'{"number": 90}',
        b'{"number": 91, "outcome": "modelled", "value": "fast", "config": {}}',
        b'{"number": 92, "outcome": "modelled", "value": 1e999, "config": {}}',
        b"\xff\xfe not utf-8",
        b'{"number": 93, "outc',
    ]
    (run_dir / "trials.jsonl").write_bytes(sound + b"\n".join(damage))  # the last line cut short, no newline
    (run_dir / "search.json").write_text("garbage {")
    (run_dir / "baselines.jsonl").write_text('{"result": {"label": "triton"}, "session": {"copy_gbs": "x"}}\n')
    damaged = (run_dir / "trials.jsonl").read_bytes()
    first_bad = len(sound.splitlines()) + 1
    for command in ("report", "explain"):
        run = mage(command, "run", "--no-plots", cwd=tmp_path, env=env) if command == "report" else None
        run = run or mage(command, "run", cwd=tmp_path, env=env)
        assert run.returncode == 0, run.stderr
        assert "Traceback" not in run.stderr
        for offset in range(len(damage)):
            assert f"trials.jsonl:{first_bad + offset}:" in run.stderr, run.stderr
        assert "search.json" in run.stderr
        assert "baselines.jsonl:1:" in run.stderr or command == "explain"  # explain reads no baselines
    assert (run_dir / "trials.jsonl").read_bytes() == damaged
    # A resumed search (search.json is rewritten whole, as it is on every run) appends after the damage.
    (run_dir / "search.json").unlink()
    done = mage(*search("run", 6), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    after = (run_dir / "trials.jsonl").read_bytes()
    assert after.startswith(damaged)
    assert len(record.trials(run_dir)) == 6


@pytest.mark.parametrize(
    "damage",
    [
        lambda r: r.pop("sessions"),
        lambda r: r["sessions"][0].update(copy_gbs=0),
        lambda r: r.update(results="none"),
        lambda r: r["sessions"].clear(),
    ],
    ids=["no-sessions", "copy-gbs-0", "results-not-a-list", "empty-sessions"],
)
def test_damaged_bench_record(tmp_path, env, damage):
    source = Path(__file__).resolve().parents[1] / "fixtures/shape-benches/rerun/ln_m4096_d768.json"
    data = json.loads(source.read_text())
    damage(data)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    clean_error(mage("explain", "bench.json", cwd=tmp_path, env=env), "bench.json", "damaged bench record")


def test_bench_record_with_one_damaged_result(tmp_path, env):
    source = Path(__file__).resolve().parents[1] / "fixtures/shape-benches/rerun/ln_m4096_d768.json"
    data = json.loads(source.read_text())
    data["results"].insert(0, {"label": "x", "kind": "variant", "ok": True, "timings": [{"regime": "cold"}]})
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    run = mage("explain", "bench.json", cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert "bench.json: results[0]:" in run.stderr and "winner:" in run.stdout
