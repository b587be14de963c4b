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
import hashlib
import json
import math
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mage_tune.errors import InputError
from mage_tune.measure.saved import shape_problem

DB_ENV = "MAGE_TUNE_DB"
RUN_PREFIX = "run:"
EXPORT_SCHEMA = "mage-tune.tuning-db/1"


def default_url() -> str:
    from mage_tune.compile import cache_dir
    from mage_tune.search.storage import sqlite_url

    return os.environ.get(DB_ENV) or sqlite_url(cache_dir() / "tuning.db")


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
    arch: str
    objective: str
    gpu: str = ""
    toolchain: dict = field(default_factory=dict)
    baselines: dict = field(default_factory=dict)  # label -> cold median µs, measured in the same run
    where: str = ""  # the run directory or file it came from

    def shape_key(self) -> str:
        return "-".join(f"{k}{v}" for k, v in self.shape.items())


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


def row_problem(row: dict) -> str:
    """What is wrong with one trial row of an import ("" when nothing is)."""
    if not isinstance(row.get("config"), dict):
        return "its config is not a mapping of knobs to values"
    if isinstance(row.get("number"), bool) or not isinstance(row.get("number"), int):
        return "it has no trial number"
    value = row.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        return f"its value {value!r} is not a number"
    return ""


def run_name(study: str, where: str) -> str:
    digest = hashlib.sha256(where.encode()).hexdigest()[:10]
    return f"{RUN_PREFIX}{study} {digest}"


class TuningDB:
    def __init__(self, url: str | None = None):
        import optuna

        from mage_tune.search.storage import open_storage

        self.url = url or default_url()
        if self.url.startswith("sqlite:///"):
            from urllib.parse import unquote

            with contextlib.suppress(OSError):
                Path(unquote(self.url.removeprefix("sqlite:///"))).parent.mkdir(parents=True, exist_ok=True)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.storage = open_storage(self.url, Path.cwd())

    # --- writing --------------------------------------------------------------------------------------------------
    def study_for(self, run: RunInfo):
        """The run's study, made with its context the first time."""
        import optuna

        study = optuna.create_study(study_name=run.name, storage=self.storage, load_if_exists=True)
        if "family" not in study.user_attrs:
            for key, value in asdict(run).items():
                if key != "name":
                    study.set_user_attr(key, value)
        return study

    def run_names(self) -> set[str]:
        """Names of the studies held: names only, which costs one query, where summaries read every trial."""
        import optuna

        return set(optuna.get_all_study_names(self.storage))

    def add(self, study, number: int, config: dict, outcome: str, value, census: dict | None, source: str) -> None:
        import optuna

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
        """Every run with how many trials it holds."""
        import optuna

        out = []
        for s in optuna.get_all_study_summaries(self.storage, include_best_trial=False):
            if s.study_name.startswith(RUN_PREFIX):
                out.append((_run_info(s.study_name, s.user_attrs), s.n_trials))
        return out

    def entries(
        self, family: str | None = None, arch: str | None = None, objective: str | None = None
    ) -> Iterator[Entry]:
        import optuna

        for run, _ in self.runs():
            if (family and family not in (run.family, run.origin)) or (arch and run.arch != arch):
                continue
            if objective and run.objective != objective:
                continue
            study = optuna.load_study(study_name=run.name, storage=self.storage)
            for t in study.get_trials(deepcopy=False):
                a = t.user_attrs.get("entry")
                if not isinstance(a, dict) or not isinstance(a.get("config"), dict):
                    continue
                yield Entry(
                    run,
                    int(a.get("number", t.number)),
                    a["config"],
                    str(a.get("outcome", "")),
                    t.value,
                    a.get("census") or {},
                    str(a.get("source", "")),
                )

    def drop(self, name: str) -> None:
        import optuna

        optuna.delete_study(study_name=name, storage=self.storage)

    # --- export and import ----------------------------------------------------------------------------------------
    def export(self, out, family: str | None = None) -> int:
        """One JSON line per trial, each with its run's context; returns the count."""
        n = 0
        for e in self.entries(family=family):
            out.write(json.dumps({"schema": EXPORT_SCHEMA, **asdict(e)}, default=str) + "\n")
            n += 1
        return n

    def import_lines(self, path: Path) -> tuple[int, int]:
        """An export's lines: (runs added, runs already present)."""
        from mage_tune.inputs import read_input

        try:
            text = read_input(path).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text (byte {exc.start})", file=str(path)) from None
        by_run: dict[str, tuple[RunInfo, list[dict]]] = {}
        for line_no, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict) or data.get("schema") != EXPORT_SCHEMA:
                    raise ValueError(f"not a {EXPORT_SCHEMA} line")
                run = RunInfo(**data["run"])
                why = shape_problem(run.shape) or row_problem(data)
                if why:
                    raise ValueError(why)
                data.setdefault("outcome", "")
                data.setdefault("value", None)
                by_run.setdefault(run.name, (run, []))[1].append(data)
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(f"not a tuning-database export line: {exc}", file=str(path), line=line_no) from None
        return self._add_runs(list(by_run.values()))

    def import_path(self, path: Path) -> tuple[int, int]:
        """A run directory, a bench record (.json) or an export (.jsonl): (runs added, runs already present)."""
        from mage_tune.tuning import sources

        if path.is_dir():
            loaded = [sources.run_directory(path)]
        elif path.suffix == ".jsonl":
            return self.import_lines(path)
        else:
            loaded = [sources.bench_record(path)]
        return self._add_runs(loaded)

    def _add_runs(self, loaded: list[tuple[RunInfo, list[dict]]]) -> tuple[int, int]:
        """Each run with its trials: (runs added, runs already present). A run already present gets the trials it
        lacks (by trial number), so importing a run directory again completes what a failed write left out."""
        import optuna

        added = present = 0
        held = self.run_names()
        for run, rows in loaded:
            known: set[int] = set()
            if run.name in held:
                present += 1
                study = optuna.load_study(study_name=run.name, storage=self.storage)
                known = {t.user_attrs.get("entry", {}).get("number") for t in study.get_trials(deepcopy=False)}
            else:
                study = self.study_for(run)
                held.add(run.name)
                added += 1
            for r in rows:
                if r["number"] not in known:
                    self.add(
                        study, r["number"], r["config"], r["outcome"], r["value"], r.get("census"), r.get("source", "")
                    )
        return added, present


def _run_info(name: str, attrs: dict) -> RunInfo:
    known = {k: attrs[k] for k in RunInfo.__dataclass_fields__ if k in attrs and k != "name"}
    known.setdefault("family", "")
    known.setdefault("origin", known["family"])
    known.setdefault("shape", {})
    known.setdefault("arch", "")
    known.setdefault("objective", "")
    return RunInfo(name=name, **known)


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
            from mage_tune.search.storage import redact

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


def measured_by_shape(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    """Measured entries grouped by shape, fastest first."""
    groups: dict[str, list[Entry]] = {}
    for e in entries:
        if e.measured:
            groups.setdefault(json.dumps(e.run.shape, sort_keys=True), []).append(e)
    for rows in groups.values():
        rows.sort(key=lambda e: e.value)
    return groups
