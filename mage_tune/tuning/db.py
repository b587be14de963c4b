"""The tuning database: every trial of every run, with what made its number (family, shape, arch, GPU, toolchain,
objective, baselines of its run), kept in one Optuna storage so a team can share it.

Layout in the storage: one Optuna study per run (a search's run directory, or an imported bench record or export),
named `run:<study> <digest>`; the run's context is the study's user attrs, each trial carries its config, outcome,
census features and where it came from (`source`) as user attrs, and its time as the value. Configs are not Optuna
params on purpose: a family's space grows between versions, and old configs must stay readable.

The default store is SQLite under the cache directory ($MAGE_TUNE_CACHE or ~/.cache/mage-tune)/tuning.db; any
storage URL Optuna takes (postgresql://…) or journal:PATH is shared the same way ($MAGE_TUNE_DB or --db).
Writing to it never stops a search: the run directory stays the authoritative record, and a failed write is said
once on stderr.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import unquote

import optuna

from mage_tune.compile import cache_dir, cache_root
from mage_tune.errors import InputError
from mage_tune.kernels.registry import builtin_named, load_family, looks_like_path, split_family_spec
from mage_tune.records import reader, schema
from mage_tune.storage import holds_optuna, open_storage, redact, refuse_foreign_sqlite, sqlite_url

DB_ENV = "MAGE_TUNE_DB"
RUN_PREFIX = "run:"
LOCK_PREFIX = "import-lock:"  # a study of this name marks a run being imported: one importer at a time
LOCK_STALE_S = 600  # a lock older than this belongs to a killed importer
LOCK_WAIT_S = 120
EXPORT_SCHEMA = "mage-tune.tuning-db/2"  # /1 lines (no run id, digest or defaults) still import


def _default_path() -> Path:
    """$MAGE_TUNE_CACHE/tuning.db, beside the compile cache and not in it (clearing the compile cache keeps the
    measurements); a database made where earlier versions put it, in the compile cache, is used where it is until
    the new place has one."""
    here, earlier = cache_root() / "tuning.db", cache_dir() / "tuning.db"
    return earlier if earlier.exists() and not here.exists() else here


def default_url() -> str:
    return os.environ.get(DB_ENV) or sqlite_url(_default_path())


def local_file(url: str) -> Path | None:
    """The file a SQLite or journal URL names (None for a server)."""
    if url.startswith("sqlite:///"):
        return Path(unquote(url.removeprefix("sqlite:///")))
    if url.startswith("journal:") or url.endswith((".journal", ".log")):
        return Path(url.removeprefix("journal://").removeprefix("journal:"))
    return None


def versions(toolchain: dict) -> dict[str, str]:
    """The toolchain's versions without the paths they were found at: what decides whether a record still holds."""
    return {name: str(v).split(" (", 1)[0] for name, v in sorted((toolchain or {}).items()) if v}


@dataclass(frozen=True)
class RunInfo:
    """One run's context: what every trial of it shares."""

    name: str
    family: str
    origin: str
    shape: dict
    arch: str  # the arch's name: rows keep names, never Arch objects
    objective: str
    gpu: str = ""
    toolchain: dict = field(default_factory=dict)
    baselines: dict = field(default_factory=dict)  # label -> cold median µs, measured in the same run
    where: str = ""  # the run directory or file it came from
    run_id: str = ""  # given once to a run (run.json's UUID, or a digest of an older record's content)
    family_digest: str = ""  # sha256 of the family's file when the run was made
    defaults: dict = field(default_factory=dict)  # the family's knob defaults then: configs print as what differs

    def is_of(self, family: str) -> bool:
        """Whether `family` names this run's family: its name or origin as recorded, or the same family file by
        another path from here (`../examples/f.py` in a subfolder of where `examples/f.py` was searched)."""
        if family in (self.family, self.origin):
            return True
        if not (looks_like_path(family) and looks_like_path(self.origin)):
            return False
        (given, attr), (recorded, recorded_attr) = split_family_spec(family), split_family_spec(self.origin)
        if attr != recorded_attr:
            return False
        here = Path(given).resolve()
        if Path(recorded).is_absolute():
            return here == Path(recorded).resolve()
        return here == Path(recorded).resolve() or here.as_posix().endswith("/" + Path(recorded).as_posix())

    def ordered_shape(self) -> dict:
        """The shape in its built-in family's order of dimensions (m, n, k), however the record keeps its keys."""
        name = builtin_named(self.family)  # this package's own code only: a record names no other
        dims = load_family(name).dims if name else ()
        return {**{d: self.shape[d] for d in dims if d in self.shape}, **self.shape}

    def shape_key(self) -> str:
        return "-".join(f"{k}{v}" for k, v in self.ordered_shape().items())

    def shape_order(self) -> tuple:
        """What sorts shapes as a person reads them: by each dimension's size, not by its text."""
        return tuple(self.ordered_shape().items())


@dataclass(frozen=True)
class Entry:
    """One trial with its run's context."""

    run: RunInfo
    number: int
    config: dict
    outcome: str
    value: float | None
    census: dict = field(default_factory=dict)
    source: str = ""

    @property
    def measured(self) -> bool:
        return self.outcome == "measured" and self.value is not None and math.isfinite(self.value)


# What makes two records one run: the same trials under any other of these would be measured elsewhere.
CONTEXT_FIELDS = ("family", "origin", "shape", "arch", "objective", "gpu", "toolchain", "run_id")


def run_name(study: str, run_id: str) -> str:
    """The run's study name in the database: unique per run id, so a run is held once however often, from
    wherever, and by how many processes at once it is imported (the storage's unique study name decides)."""
    return f"{RUN_PREFIX}{study} {run_id}"


def run_from(data: dict) -> RunInfo:
    """A RunInfo from a checked `run` object (keys it does not know are left out)."""
    known = {k: data[k] for k in RunInfo.__dataclass_fields__ if k in data}
    known.setdefault("origin", known["family"])
    known.setdefault("arch", "")
    known.setdefault("objective", "")
    return RunInfo(**known)


_warned: set[str] = set()


def _warn_once(key: str, text: str) -> None:
    if key not in _warned:
        _warned.add(key)
        sys.stderr.write(f"mage-tune: warning: {text}\n")


class TuningDB:
    def __init__(self, url: str | None = None, create: bool = True):
        """`create` False (the commands that only read): a database that does not exist is not made, nor its folder;
        the default one reads as empty, any other is an error naming it."""
        self.url = url or default_url()
        self.storage = None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        path = local_file(self.url)
        if path is not None and not path.exists():
            if not create:
                if url is None and DB_ENV not in os.environ:
                    return  # a fresh machine: nothing measured yet
                raise InputError(
                    "no tuning database here (a search or `mage-tune db import` makes one)", file=str(path)
                )
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
        elif path is not None and not create and self.url.startswith("sqlite:///") and not holds_optuna(path):
            # opening it would write Optuna's tables into it: a command that only reads never does
            refuse_foreign_sqlite(path)  # another application's database says so
            raise InputError("not a tuning database (no Optuna tables; a search or `mage-tune db import` makes one)",
                             file=str(path))  # fmt: skip
        self.storage = open_storage(self.url, Path.cwd())

    # --- writing --------------------------------------------------------------------------------------------------
    def study_for(self, run: RunInfo):
        """The run's study, made with its context the first time."""
        study = optuna.create_study(study_name=run.name, storage=self.storage, load_if_exists=True)
        if "family" not in study.user_attrs:
            _set_context(study, run)
        return study

    def run_names(self) -> set[str]:
        """Names of the studies held: names only, which costs one query, where summaries read every trial."""
        if self.storage is None:
            return set()
        return set(optuna.get_all_study_names(self.storage))

    def add(self, study, number: int, config: dict, outcome: str, value, census: dict | None, source: str) -> None:
        ok = value is not None and isinstance(value, int | float) and math.isfinite(value)
        state = optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL
        entry = {"number": number, "config": config, "outcome": outcome, "census": census or {}, "source": source}
        # One attr per trial: each attr is a row, and a write per row is what makes imports slow.
        study.add_trial(
            optuna.trial.create_trial(state=state, value=float(value) if ok else None, user_attrs={"entry": entry})
        )

    def set_baselines(self, study, baselines: dict) -> None:
        study.set_user_attr("baselines", baselines)

    # --- reading --------------------------------------------------------------------------------------------------
    def runs(self) -> list[tuple[RunInfo, int]]:
        """Every sound run with how many trials it holds; a run whose context is damaged is skipped, said once."""
        if self.storage is None:
            return []
        out = []
        for s in optuna.get_all_study_summaries(self.storage, include_best_trial=False):
            if not s.study_name.startswith(RUN_PREFIX) or not s.user_attrs:
                continue  # not a run, or one whose context is being written right now
            data = {**s.user_attrs, "name": s.study_name}
            why = schema.problem("run", data)
            if why:
                _warn_once(s.study_name, f"tuning database {self._shown()}: run {s.study_name!r}: {why}; run skipped")
                continue
            out.append((run_from(data), s.n_trials))
        return out

    def entries(
        self, family: str | None = None, arch: str | None = None, objective: str | None = None
    ) -> Iterator[Entry]:
        """The trials of the sound runs, each (run, trial number) once; a damaged trial row is skipped, said once."""
        for run, _ in self.runs():
            if (family and not run.is_of(family)) or (arch and run.arch != arch):
                continue
            if objective and run.objective != objective:
                continue
            study = optuna.load_study(study_name=run.name, storage=self.storage)
            seen: set[int] = set()
            for t in study.get_trials(deepcopy=False):
                a = t.user_attrs.get("entry")
                why = schema.problem("entry", a)
                if why:
                    _warn_once(
                        f"{run.name} {t.number}",
                        f"tuning database {self._shown()}: run {run.name!r} trial {t.number}: {why}; trial skipped",
                    )
                    continue
                if a["number"] in seen:
                    continue  # written twice (a search's writer and an import racing): counted once
                seen.add(a["number"])
                yield Entry(
                    run,
                    a["number"],
                    a["config"],
                    a.get("outcome", ""),
                    t.value,
                    a.get("census") or {},
                    a.get("source", ""),
                )

    def drop(self, name: str) -> None:
        optuna.delete_study(study_name=name, storage=self.storage)

    def _shown(self) -> str:
        return redact(self.url)

    # --- export and import ----------------------------------------------------------------------------------------
    def export(self, out, family: str | None = None) -> int:
        """One JSON line per trial, each with its run's context; returns the count."""
        n = 0
        for e in self.entries(family=family):
            out.write(json.dumps({"schema": EXPORT_SCHEMA, **asdict(e)}, default=str) + "\n")
            n += 1
        return n

    def add_runs(self, loaded: list[tuple[RunInfo, list[dict]]]) -> tuple[int, int]:
        """Each run with its trials: (runs added, runs already present). A run already present gets the trials it
        lacks (by trial number), so importing a run directory again completes what a failed write left out. Each run
        is written by one importer at a time (a lock study), and made by creating its uniquely named study, so
        concurrent imports of one run add each trial once."""
        self._refuse_other_contexts([run for run, _ in loaded])
        added = present = 0
        for run, rows in loaded:
            with self._import_lock(run.name):
                try:
                    study = optuna.create_study(study_name=run.name, storage=self.storage)
                except optuna.exceptions.DuplicatedStudyError:
                    study = optuna.load_study(study_name=run.name, storage=self.storage)
                    present += 1
                else:
                    _set_context(study, run)
                    added += 1
                known = {
                    a.get("number")
                    for t in study.get_trials(deepcopy=False)
                    if isinstance(a := t.user_attrs.get("entry"), dict)
                }
                for r in rows:
                    if r["number"] not in known:
                        known.add(r["number"])
                        self.add(
                            study,
                            r["number"],
                            r["config"],
                            r["outcome"],
                            r["value"],
                            r.get("census"),
                            r.get("source", ""),
                        )
        return added, present

    def _refuse_other_contexts(self, runs: list[RunInfo]) -> None:
        """An InputError, before anything is written, where a run is held already with another context (GPU, shape,
        toolchain, ...): its trials would be ranked under the held run's context, which warm starts and choices
        trust. Where it came from (`where`) and its baselines may differ: the same run imported again."""
        held = self.run_names()
        for run in runs:
            if run.name not in held:
                continue
            attrs = optuna.load_study(study_name=run.name, storage=self.storage).user_attrs
            if "family" not in attrs or schema.problem("run", {**attrs, "name": run.name}):
                continue  # being written right now, or damaged: `runs` skips it and says so
            kept = run_from({**attrs, "name": run.name})
            differ = [k for k in CONTEXT_FIELDS if getattr(kept, k) != getattr(run, k)]
            if differ:
                raise InputError(
                    f"run {run.name!r} is in {self._shown()} with another {', '.join(differ)}: not imported "
                    "(nothing of this import was written)",
                    file=run.where or None,
                )

    @contextlib.contextmanager
    def _import_lock(self, name: str):
        """Hold the run `name` for writing: a study named LOCK_PREFIX + name, which the storage lets only one
        process create. Waits for another importer (up to LOCK_WAIT_S); a lock older than LOCK_STALE_S is a killed
        importer's and is taken over."""
        lock = LOCK_PREFIX + name
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                study = optuna.create_study(study_name=lock, storage=self.storage)
                study.set_user_attr("since", time.time())
                break
            except optuna.exceptions.DuplicatedStudyError:
                if self._stale(lock) or time.monotonic() > deadline:
                    with contextlib.suppress(KeyError):
                        optuna.delete_study(study_name=lock, storage=self.storage)
                    continue
                time.sleep(0.2)
        try:
            yield
        finally:
            with contextlib.suppress(KeyError):
                optuna.delete_study(study_name=lock, storage=self.storage)

    def _stale(self, lock: str) -> bool:
        try:
            since = optuna.load_study(study_name=lock, storage=self.storage).user_attrs.get("since")
        except KeyError:
            return False  # released meanwhile: try again
        if not isinstance(since, int | float):
            return False  # being made right now
        return time.time() - since > LOCK_STALE_S


def _set_context(study, run: RunInfo) -> None:
    # Every attr but the name in one call each; `family` last, since readers take a study without it as unfinished
    context = {k: v for k, v in asdict(run).items() if k not in ("name", "family")}
    for key, value in context.items():
        study.set_user_attr(key, value)
    study.set_user_attr("family", run.family)


def import_lines(path: Path) -> list[tuple[RunInfo, list[dict]]]:
    """An export's runs and trials (plain or .gz, streamed); every line is checked against the export schema and a
    line outside it is refused with its file, line and the reason, before anything is written."""
    by_run: dict[str, tuple[RunInfo, list[dict], int]] = {}  # the run, its trials, the line it is first on
    for line in reader.lines(path):
        why = line.problem or schema.problem("export line", line.data)
        if why:
            raise InputError(f"not a tuning-database export line: {why}", file=str(path), line=line.number)
        data = line.data
        run = run_from(data["run"])
        row = {
            "number": data["number"],
            "config": data["config"],
            "outcome": data.get("outcome", ""),
            "value": data.get("value"),
            "census": data.get("census") or {},
            "source": data.get("source", ""),
        }
        first = by_run.setdefault(run.name, (run, [], line.number))
        if first[0] != run:  # one run, two contexts: an edited line, which would ride on the other's context
            raise InputError(
                f"run {run.name!r} is given another context here than on line {first[2]}", file=str(path),
                line=line.number,
            )  # fmt: skip
        first[1].append(row)
    return [(run, rows) for run, rows, _ in by_run.values()]


class Recorder:
    """A search's writer into the database: one study per run, each finished trial added as it lands. A failure
    (database locked, server gone) is said once and the search goes on: its run directory keeps every trial, and
    `mage-tune db import RUN_DIR` adds what the database missed. After GIVE_UP failures in a row it stops trying."""

    GIVE_UP = 3

    def __init__(self, url: str | None, run: RunInfo):
        self.run, self.study, self.db = run, None, None
        self.failures, self.failed = 0, False
        self.url = url or default_url()
        self._guard(lambda: self._open(self.url))

    def _open(self, url):
        self.db = TuningDB(url)
        self.study = self.db.study_for(self.run)

    def _guard(self, action) -> None:
        if self.failed:
            return
        try:
            if self.study is None and self.db is not None:
                self.study = self.db.study_for(self.run)
            action()
            self.failures = 0
        except Exception as exc:  # the database is a convenience: the run directory is the record
            self.failures += 1
            self.failed = self.db is None or self.failures >= self.GIVE_UP
            if self.failures > 1 and not self.failed:
                return
            first = (str(exc).strip().splitlines() or [""])[0]
            print(
                f"mage-tune: warning: the tuning database {redact(self.url)} is not written "
                f"({type(exc).__name__}: {redact(first)[:200]}){'; given up' if self.failed else ''}; the run "
                f"directory keeps every trial (`mage-tune db import {self.run.where}` adds them later)",
                file=sys.stderr,
            )

    def trial(self, number: int, config: dict, outcome: str, value, census: dict | None, source: str) -> None:
        self._guard(lambda: self.db.add(self.study, number, config, outcome, value, census, source))

    def baselines(self, baselines: dict) -> None:
        self._guard(lambda: self.db.set_baselines(self.study, baselines))


def shape_distance(a: dict, b: dict) -> float:
    """Euclidean distance between two shapes on log2 of each dimension (the dimensions both name)."""
    keys = [k for k in a if k in b]
    if not keys:
        return math.inf
    return math.sqrt(sum((math.log2(max(1, a[k])) - math.log2(max(1, b[k]))) ** 2 for k in keys))


# How far another GPU's measurement of a shape counts from this GPU's, as one more dimension of the shape distance:
# as far as a shape with one dimension twice or half as long. The best config of a shape is mostly the best on
# another Hopper part, not always: at 4500 x 3000 x 8800 the H200's best ran 1.19 x cuBLAS BF16 on an H100, the
# H100's own best 1.015 x (records/h100-2026-12-05-long-k-picks.tar.xz).
OTHER_GPU_DISTANCE = 1.0


def gpu_distance(measured_on: str, gpu: str) -> float:
    """OTHER_GPU_DISTANCE where a measurement is of another GPU than `gpu` ("" for none: a static search's, where no
    GPU is nearer), else 0."""
    return OTHER_GPU_DISTANCE if gpu and measured_on != gpu else 0.0


def run_distance(run: RunInfo, shape: dict, gpu: str) -> float:
    """shape_distance of the run's shape from `shape`, with gpu_distance as one more dimension."""
    return math.hypot(shape_distance(run.shape, shape), gpu_distance(run.gpu, gpu))


def _measured_by(entries: Iterable[Entry], key: Callable[[Entry], object]) -> dict:
    groups: dict = {}
    for e in entries:
        if e.measured:
            groups.setdefault(key(e), []).append(e)
    for rows in groups.values():
        rows.sort(key=lambda e: e.value)
    return groups


def measured_by_shape(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    """Measured entries grouped by shape, fastest first."""
    return _measured_by(entries, lambda e: json.dumps(e.run.shape, sort_keys=True))


def measured_by_gpu_and_shape(entries: Iterable[Entry]) -> dict[tuple[str, str], list[Entry]]:
    """Measured entries grouped by GPU and shape (as JSON), fastest first: one GPU's times never rank another's."""
    return _measured_by(entries, lambda e: (e.run.gpu, json.dumps(e.run.shape, sort_keys=True)))
