"""SQLite storage shared by processes at once: an enqueued trial is taken by one of them only, and a database being
created by another process is never mistaken for another application's."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from mage_tune.errors import InputError
from mage_tune.storage import open_storage, refuse_foreign_sqlite, sqlite_url

ASKER = """
import sys, warnings
import optuna
from pathlib import Path
from mage_tune.storage import open_storage
warnings.simplefilter("ignore")
optuna.logging.set_verbosity(optuna.logging.ERROR)
study = optuna.load_study(study_name="s", storage=open_storage(sys.argv[1], Path(".")))
print(" ".join(str(study.ask().number) for _ in range(int(sys.argv[2]))))
"""


def test_processes_asking_at_once_never_take_the_same_enqueued_trial(tmp_path):
    url = sqlite_url(tmp_path / "study.db")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(study_name="s", storage=open_storage(url, tmp_path))
    asks, processes = 60, 3
    for i in range(asks * processes):
        study.enqueue_trial({"x": i})
    procs = [
        subprocess.Popen([sys.executable, "-c", ASKER, url, str(asks)], stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    taken = [int(n) for p in procs for n in p.communicate(timeout=300)[0].split()]
    assert all(p.returncode == 0 for p in procs)
    assert len(taken) == asks * processes
    assert len(set(taken)) == len(taken), "an enqueued trial was taken by two processes"
    waiting = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
    assert not waiting  # each ask took a queued trial: none was made afresh while one waited


def _tables(path: Path, *names: str) -> Path:
    with sqlite3.connect(path) as con:
        for name in names:
            con.execute(f"create table {name} (id integer)")
    return path


def test_a_database_whose_optuna_tables_are_still_being_made_is_not_refused(tmp_path):
    refuse_foreign_sqlite(_tables(tmp_path / "half.db", "studies", "version_info"))  # made a table at a time
    with pytest.raises(InputError, match="something else"):
        refuse_foreign_sqlite(_tables(tmp_path / "other.db", "studies", "users"))


def test_a_run_directory_claimed_by_another_process_meanwhile_is_compared_not_refused(tmp_path, monkeypatch):
    """Two searches starting on one empty folder: the other's run.json (and its first files) can appear between this
    one's look for run.json and its check that the folder is empty; then it is that run's directory, compared."""
    from mage_tune.search import record

    identity = {"study": "s", "family": "layernorm"}
    check = record._refuse_foreign

    def other_process_first(run_dir):
        other = {**identity, "run_id": "theirs"}
        (run_dir / record.IDENTITY).write_text(json.dumps(other))
        (run_dir / "study.db").write_bytes(b"")
        check(run_dir)  # now it holds run.json and study.db

    monkeypatch.setattr(record, "_refuse_foreign", other_process_first)
    assert record.claim(tmp_path, identity) == "theirs"
    monkeypatch.setattr(record, "_refuse_foreign", check)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("a user's file")
    with pytest.raises(InputError, match="not a run directory and not empty"):
        record.claim(other, identity)
