"""Optuna storage from a URL or path: SQLite in the run directory by default, any RDB URL, or a journal file."""

from __future__ import annotations

import warnings
from pathlib import Path

from mage_tune.errors import InputError

HEARTBEAT_S = 5
GRACE_S = 30  # a RUNNING trial silent this long belongs to a killed worker: it is failed and not counted


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
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
    except Exception as exc:  # sqlalchemy raises many types for a bad URL or an unreachable server
        raise InputError(f"cannot open storage {url}: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
