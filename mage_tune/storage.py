"""Optuna storage from a URL or path: SQLite in the run directory by default, any RDB URL, or a journal file.

Heartbeats: a worker records one for each of its running trials every `heartbeat_s()` seconds; a RUNNING trial
silent for longer than the grace period belongs to a killed worker and is failed (and not counted) by the next
worker that needs its place. The grace is GRACE_S seconds unless the environment variable
MAGE_TUNE_HEARTBEAT_GRACE gives another whole number of seconds (at least 3): lower it where runs resumed after a
kill should wait less, raise it where a loaded machine may delay a live worker's beat.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import logging
import os
import random
import re
import sqlite3
import time
import warnings
from pathlib import Path
from urllib.parse import quote, unquote

import optuna
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.storages.journal import JournalFileBackend, JournalStorage
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError, SQLAlchemyError

from mage_tune.errors import InputError, MageError

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


def redact(text: str) -> str:
    """`text` with the password of every URL in it replaced by ***."""
    return _PASSWORD.sub(r"\1***@", text)


_PASSWORD = re.compile(r"(\w[\w+.-]*://[^\s:/@]*:)[^\s@]*@")


def sqlite_url(path: Path) -> str:
    """The SQLite URL of a database file, escaped: `?`, `#` or `%` in a folder name stay part of the path."""
    return "sqlite:///" + quote(str(path.resolve()))


def _driver_url(url: str) -> str:
    """`postgresql://…` (what PostgreSQL documents) through whichever driver is installed: SQLAlchemy's default for
    the plain scheme is psycopg 3, the dev extra installs psycopg2."""
    scheme, sep, rest = url.partition("://")
    if scheme not in ("postgresql", "postgres"):
        return url
    for module, driver in (("psycopg", "psycopg"), ("psycopg2", "psycopg2")):
        if importlib.util.find_spec(module) is not None:
            return f"postgresql+{driver}{sep}{rest}"
    return url


def _no_driver(url: str) -> str:
    scheme = url.split("://", 1)[0]
    return (
        f"cannot open storage {redact(url)}: no Python driver for {scheme} is installed (e.g. `pip install "
        "psycopg2-binary` for postgresql://, `pip install pymysql` with mysql+pymysql://)"
    )


def check_url(url: str) -> None:
    """Refuse what cannot name a database, without connecting: not a URL nor a journal, a scheme no installed
    SQLAlchemy dialect serves, another application's SQLite file. Whether the database can be reached (a server, a
    folder's permissions) is known only by opening it."""
    if url.startswith("journal:") or url.endswith((".journal", ".log")):
        return
    if "://" not in url:
        raise InputError(
            f"storage {redact(url)!r} is neither a database URL (sqlite:///…, postgresql://…) nor journal:PATH"
        )
    from sqlalchemy.engine import make_url

    try:
        dialect = make_url(_driver_url(url)).get_dialect()
    except Exception as exc:  # ArgumentError for a malformed URL, NoSuchModuleError for an unknown scheme
        first = (str(exc).strip().splitlines() or [""])[0]
        raise InputError(f"not a database URL {redact(url)}: {type(exc).__name__}: {redact(first)}") from None
    try:
        dialect.import_dbapi()
    except ImportError:
        raise InputError(_no_driver(url)) from None
    if url.startswith("sqlite:///"):
        refuse_foreign_sqlite(Path(unquote(url.removeprefix("sqlite:///"))))


def open_storage(url: str | None, run_dir: Path):
    if not url:
        url = sqlite_url(run_dir / "study.db")
    if url.startswith("journal:") or url.endswith((".journal", ".log")):
        path = url.removeprefix("journal://").removeprefix("journal:")
        # Optuna replays the journal at open and raises anything (json, KeyError, AssertionError) on a damaged line;
        # a damaged last line it even skips until the first write. Every line is read here first, to name it.
        why = "a line that is not a JSON object"
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            bad = _bad_journal_line(Path(path))
            if bad is None:
                return journal_storage(path, grace_s())
        except OSError as exc:
            raise InputError(f"cannot open the journal: {exc.strerror}", file=path) from None
        except Exception as exc:
            bad, why = None, f"{type(exc).__name__}: {exc}"
        raise InputError(
            f"not a readable Optuna journal (damaged, or another kind of file): {why}", file=path, line=bad
        )
    if "://" not in url:
        raise InputError(
            f"storage {redact(url)!r} is neither a database URL (sqlite:///…, postgresql://…) nor journal:PATH"
        )
    if url.startswith("sqlite:///"):
        refuse_foreign_sqlite(Path(unquote(url.removeprefix("sqlite:///"))))
    grace = grace_s()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return _rdb_storage(_driver_url(url), heartbeat_s(grace), grace)
    except ImportError:  # Optuna's words for a missing database driver name no driver: these do
        raise InputError(_no_driver(url)) from None
    except Exception as exc:  # sqlalchemy raises many types for a bad URL or an unreachable server
        first = (str(exc).strip().splitlines() or [""])[0]
        raise InputError(f"cannot open storage {redact(url)}: {type(exc).__name__}: {redact(first)}") from None


OPTUNA_TABLES = ("studies", "trials", "version_info")  # what marks a SQLite file as Optuna's storage


def _sqlite_tables(path: Path) -> set[str] | None:
    """The tables of the SQLite file at `path`, read through a read-only connection; None where that cannot tell (a
    locked database, or a hot journal only a writer rolls back: a killed writer's). sqlite3.DatabaseError where it
    is not a SQLite database, OSError where it cannot be read."""
    try:
        con = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
        try:
            return {row[0] for row in con.execute("select name from sqlite_master where type = 'table'")}
        finally:
            con.close()
    except sqlite3.OperationalError:
        return None


def holds_optuna(path: Path) -> bool:
    """Whether the SQLite file at `path` holds Optuna's tables (True where that cannot be told: opening it will)."""
    try:
        tables = _sqlite_tables(path)
    except (sqlite3.DatabaseError, OSError):
        return False
    return tables is None or set(OPTUNA_TABLES) <= tables


def refuse_foreign_sqlite(path: Path) -> None:
    """A SQLite file that holds tables and none of Optuna's is someone else's database: opening it as storage would
    add Optuna's tables to it, so it is refused (read without writing). An empty file or one without tables is free."""
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return
        tables = _sqlite_tables(path)
    except sqlite3.DatabaseError as exc:
        raise InputError(f"not a SQLite database ({exc})", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read it: {exc.strerror or exc}", file=str(path)) from None
    if tables is None:
        return
    # A file whose tables are all Optuna's is Optuna's, made by a process still creating them (one table at a time)
    if tables and not set(OPTUNA_TABLES) <= tables and not tables <= _optuna_schema():
        shown = ", ".join(sorted(tables)[:4]) + (", …" if len(tables) > 4 else "")
        raise InputError(
            f"a SQLite database of something else (tables {shown}), not an Optuna study store or tuning database: "
            "mage-tune never writes into it; name another file",
            file=str(path),
        )


@functools.cache
def _optuna_schema() -> frozenset[str]:
    """Every table Optuna's RDB storage makes (its models' and Alembic's)."""
    from optuna.storages._rdb import models

    return frozenset(models.BaseModel.metadata.tables) | {"alembic_version"}


def _bad_journal_line(path: Path) -> int | None:
    """The first line of a journal that is not a JSON object (a last line without its newline is a write in progress,
    which Optuna skips); None where every line reads (or there is no file yet)."""
    with contextlib.suppress(OSError), path.open("rb") as lines:
        for number, line in enumerate(lines, 1):
            if not line.endswith(b"\n"):
                return None
            try:
                if not isinstance(json.loads(line), dict):
                    return number
            except ValueError:
                return number
    return None


HEARTBEAT_ATTR = "mage_tune:heartbeat"  # journal storage: a running trial's last beat, seconds since the epoch


def journal_storage(path: str, grace: int):
    """A journal file with heartbeats: Optuna's JournalStorage records none, so a killed worker's trial would stay
    RUNNING for ever. Each beat is a system attr of the trial (one journal line); `fail_stale_trials` fails a
    RUNNING trial whose last beat is older than `grace` seconds, as it does for an RDB storage."""
    return _journal_class()(JournalFileBackend(path), heartbeat_s(grace), grace)


@functools.cache
def _journal_class():
    class HeartbeatJournalStorage(JournalStorage, BaseHeartbeat):
        def __init__(self, backend, heartbeat: int, grace: int):
            super().__init__(backend)
            self.heartbeat_interval, self.grace_period = heartbeat, grace

        def record_heartbeat(self, trial_id: int) -> None:
            self.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, time.time())

        def _get_stale_trial_ids(self, study_id: int) -> list[int]:
            cutoff = time.time() - self.grace_period
            running = self.get_all_trials(study_id, deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
            return [t._trial_id for t in running if t.system_attrs.get(HEARTBEAT_ATTR, cutoff) < cutoff]

        def get_heartbeat_interval(self) -> int:
            return self.heartbeat_interval

        def get_heartbeat_stale_trial_callback(self):
            return None

    return HeartbeatJournalStorage


# SQLAlchemy logs a connection it could not close cleanly (a Ctrl-C during a query) with its traceback, which Python
# prints to stderr when nothing handles the logger; the command already says what happened.
_QUIET = logging.NullHandler()


SQLITE_WAIT_S = 60  # how long a SQLite transaction waits for another process's to end before it fails


def _begin_immediate(connection) -> None:
    """Begin a SQLite transaction holding the write lock from its first statement (SQLAlchemy's "begin" event)."""
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _rdb_storage(url: str, heartbeat: int, grace: int, attempts: int = 5):
    """RDBStorage, retried when workers started together on a fresh database race to create Optuna's tables
    (PostgreSQL fails the loser with a unique violation or "already exists", SQLite with "already exists" or a
    lock; a retry finds the tables made)."""
    logging.getLogger("sqlalchemy").addHandler(_QUIET)  # once: a handler already there is not added again
    sqlite = url.startswith("sqlite:")
    # SQLite: the driver's own transactions begin at the first write, so Optuna's read-then-update of a waiting
    # trial (ask's pop) let two processes both take it; every transaction of these connections begins IMMEDIATE
    # instead (below), which serialises them whole. The timeout is how long one waits for another's.
    kwargs = {"connect_args": {"isolation_level": None, "timeout": SQLITE_WAIT_S}} if sqlite else {}
    for attempt in range(attempts):
        try:
            storage = optuna.storages.RDBStorage(
                url, heartbeat_interval=heartbeat, grace_period=grace, engine_kwargs=kwargs
            )
            if sqlite:
                event.listen(storage.engine, "begin", _begin_immediate)
            return storage
        except (IntegrityError, ProgrammingError, OperationalError) as exc:
            # SQLite reports the same race as an OperationalError ("table ... already exists", "database is locked")
            racing = not isinstance(exc, OperationalError) or any(
                text in str(exc) for text in ("already exists", "database is locked")
            )
            if attempt == attempts - 1 or not racing:
                raise
            time.sleep(0.2 + random.random())


class StorageError(MageError):
    """The study's storage failed mid-run (database stopped, disk full, file read-only)."""


@contextlib.contextmanager
def storage_errors(spec):
    """Turn a storage failure inside the block into one line that says what is kept and how to go on."""
    try:
        yield
    except MageError:
        raise
    except (optuna.exceptions.StorageInternalError, SQLAlchemyError, OSError) as exc:
        cause = exc.__cause__ or exc.__context__ or exc
        text = " ".join(str(cause).split())
        text = text.split("[SQL:", 1)[0].split("(Background on this error", 1)[0].strip()
        where = redact(spec.storage) if spec.storage else f"{spec.run_dir / 'study.db'}"
        raise StorageError(
            f"the study's storage {where} failed: {type(cause).__name__}: {redact(text)[:300]}. Finished trials are "
            f"kept (study and {spec.run_dir / 'trials.jsonl'}): fix the storage and re-run the same command to resume"
        ) from None
    except Exception as exc:
        if not _replaying_journal(exc):
            raise
        # A line damaged after the open (a partial last line, which Optuna skips at open, joined by the next write)
        path = (spec.storage or "").removeprefix("journal://").removeprefix("journal:")
        raise StorageError(
            f"the study's journal became unreadable: {type(exc).__name__}: {exc}. Finished trials are kept in "
            f"{spec.run_dir / 'trials.jsonl'}; remove the damaged line (or start another journal) to go on",
            file=path,
            line=_bad_journal_line(Path(path)),
        ) from None


def _replaying_journal(exc: BaseException) -> bool:
    """Whether `exc` was raised while Optuna read or replayed a journal file's lines."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name in ("read_logs", "apply_logs") and "journal" in code.co_filename:
            return True
        tb = tb.tb_next
    return False
