"""Optuna storage from a URL or path: SQLite in the run directory by default, any RDB URL, or a journal file.

Heartbeats: a worker records one for each of its running trials every `heartbeat_s()` seconds; a RUNNING trial
silent for longer than the grace period belongs to a killed worker and is failed (and not counted) by the next
worker that needs its place. The grace is GRACE_S seconds unless the environment variable
MAGE_TUNE_HEARTBEAT_GRACE gives another whole number of seconds (at least 3): lower it where runs resumed after a
kill should wait less, raise it where a loaded machine may delay a live worker's beat.
"""

from __future__ import annotations

import os
import random
import time
import warnings
from pathlib import Path

from mage_tune.errors import InputError

HEARTBEAT_S = 5
GRACE_S = 30  # a RUNNING trial silent this long belongs to a killed worker: it is failed and not counted
GRACE_ENV = "MAGE_TUNE_HEARTBEAT_GRACE"


def grace_s() -> int:
    """Seconds of heartbeat silence after which a running trial counts as abandoned (GRACE_S or the environment's)."""
    text = os.environ.get(GRACE_ENV, "").strip()
    if not text:
        return GRACE_S
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 3:
        raise InputError(f"{GRACE_ENV} must be a whole number of seconds, at least 3; got {text!r}")
    return value


def heartbeat_s(grace: int) -> int:
    """Beat at least three times per grace period, so one late beat never fails a live trial."""
    return max(1, min(HEARTBEAT_S, grace // 3))


def open_storage(url: str | None, run_dir: Path):
    import optuna

    if not url:
        url = f"sqlite:///{(run_dir / 'study.db').resolve()}"
    if url.startswith("journal:") or url.endswith((".journal", ".log")):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        path = url.removeprefix("journal://").removeprefix("journal:")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(path))
    if "://" not in url:
        raise InputError(f"storage {url!r} is neither a database URL (sqlite:///…, postgresql://…) nor journal:PATH")
    grace = grace_s()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return _rdb_storage(url, heartbeat_s(grace), grace)
    except Exception as exc:  # sqlalchemy raises many types for a bad URL or an unreachable server
        raise InputError(f"cannot open storage {url}: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None


def _rdb_storage(url: str, heartbeat: int, grace: int, attempts: int = 5):
    """RDBStorage, retried when workers started together on a fresh database race to create Optuna's tables
    (PostgreSQL fails the loser with a unique violation or "already exists"; a retry finds the tables made)."""
    import optuna
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    for attempt in range(attempts):
        try:
            return optuna.storages.RDBStorage(url, heartbeat_interval=heartbeat, grace_period=grace)
        except (IntegrityError, ProgrammingError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 + random.random())
