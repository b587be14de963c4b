"""What the tuning database imports: a search's run directory, a bench record, or an export. Each becomes one run
(its context) and its trials, read with the same defensive readers `report` uses (a bad line is named and skipped).
It lives with search, which stands above the tuning database: it reads search's records and writes tuning's."""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mage_tune.arch import get_arch
from mage_tune.errors import InputError, MageError
from mage_tune.inputs import read_input
from mage_tune.kernels import recorded
from mage_tune.kernels.base import accuracy_baseline
from mage_tune.measure.baselines import is_context
from mage_tune.measure.saved import positive_number, read_json, result_time, shape_problem
from mage_tune.records.objectives import MEASURED_OBJECTIVE, STATIC_OBJECTIVE  # a bench record's: measured
from mage_tune.search import record
from mage_tune.tuning.db import RunInfo, import_lines, run_name, versions


def _gpu_and_toolchain(envs: list[dict]) -> tuple[str, dict]:
    for env in envs:
        if env.get("gpu"):
            return str(env["gpu"]), versions(env.get("toolchain") or {})
    return "", versions((envs[0].get("toolchain") if envs else None) or {})


def _arch_of(data: dict, family, path: Path) -> str:
    """The arch a bench record's variants were compiled for: as it says (`arch`), else its device's, suffixed as a
    built-in family builds there (older records of the Hopper families: sm_90 -> sm_90a)."""
    given = data.get("arch")
    if given is not None:
        try:
            return get_arch(str(given)).name
        except InputError as error:
            raise InputError(f"arch: {error}", file=str(path)) from None
    cc = str(data["environment"].get("compute_capability", ""))
    device = "sm_" + cc.replace(".", "") if cc else ""
    try:
        return family.target_arch(get_arch(device)).name if device and family is not None else device
    except InputError:  # a device this mage-tune does not know: its name as recorded
        return device


def _baselines(results: list[dict]) -> dict[str, float]:
    """Label -> the median over the run's sessions of its cold time (results already checked by their reader). The
    family's own shipped config is left out: the model measures a run against other kernels (learned.py); so is a
    context-only baseline, which is not held to the family's accuracy."""
    times: dict[str, list[float]] = {}
    for r in results:
        if r.get("kind") == "shipped" or is_context(r):
            continue
        value = result_time(r) if r["ok"] else None
        if value is not None:
            times.setdefault(r["label"], []).append(value)
    return {label: statistics.median(v) for label, v in times.items()}


def run_directory(path: Path) -> tuple[RunInfo, list[dict]]:
    """A run directory's context and trials: a damaged trials.jsonl line (a search killed mid-write) is read around,
    named in a warning, as every reader of run directories does."""
    identity = record.read_identity(path / "run.json") or record.read_identity(path / "search.json")
    if not identity or not identity.get("family") or "shape" not in identity:
        raise InputError(
            "not a search run directory (no run.json or search.json naming family and shape)", file=str(path)
        )
    if shape_problem(identity["shape"]):
        raise InputError(shape_problem(identity["shape"]), file=str(path / "run.json"))
    envs = record.read_jsonl(path / "environment.jsonl")
    gpu, toolchain = _gpu_and_toolchain(envs)
    search = record.read_identity(path / "search.json") or {}
    objective = identity.get("objective") or (
        STATIC_OBJECTIVE if identity.get("static") or identity.get("mode") == "static" else MEASURED_OBJECTIVE
    )
    study = str(identity.get("study") or path.name)
    baselines = _baselines([b["result"] for b in record.baselines(path)])
    origin = identity.get("origin") or search.get("origin") or identity["family"]
    run_id = record.run_id(path)
    run = RunInfo(
        name=run_name(study, run_id),
        family=str(identity["family"]),
        origin=str(origin),
        shape=identity["shape"],
        arch=str(identity.get("arch", "")),
        objective=str(objective),
        gpu=gpu,
        toolchain=toolchain,
        baselines=baselines,
        where=str(path),
        run_id=run_id,
        family_digest=str(identity.get("family_digest") or ""),
        defaults=recorded.defaults({**identity, "origin": origin}),
    )
    limits = _limits_today(run, [b["result"] for b in record.baselines(path)])
    rows = []
    for t in record.trials(path):
        if not isinstance(t.get("config"), dict):
            continue
        outcome, value = t["outcome"], t.get("value")
        if outcome == "measured" and not limits.allows(t.get("measurement") or {}):
            outcome, value = "failed", None
        census, source = t.get("census") or {}, t.get("source", "")
        row = {"number": t["number"], "config": t["config"], "outcome": outcome, "value": value, "census": census}
        rows.append({**row, "source": source})
    return run, rows


def bench_record(path: Path) -> tuple[RunInfo, list[dict]]:
    data = _read_json(path)
    if not data or not str(data.get("schema", "")).startswith("mage-tune.bench/"):
        raise InputError("not a bench record (schema mage-tune.bench/…) nor a run directory or export", file=str(path))
    # read_json checked it with bench's own reader: a bad shape is an error, damaged results are named and skipped
    env = data["environment"]
    run_id = str(data.get("record_id") or "") or "sha256:" + hashlib.sha256(read_input(path)).hexdigest()[:32]
    origin = str(data.get("family_origin") or data["family"])
    run = RunInfo(
        name=run_name(f"bench {data['family']}", run_id),
        family=data["family"],
        origin=origin,
        shape=data["shape"],
        arch=_arch_of(data, recorded.builtin(origin), path),
        objective=MEASURED_OBJECTIVE,
        gpu=str(env.get("gpu", "")),
        toolchain=versions(env.get("toolchain") or {}),
        baselines=_baselines([r for r in data["results"] if r["kind"] != "variant"]),
        where=str(path),
        run_id=run_id,
        family_digest=str(data.get("family_digest") or ""),
        defaults=recorded.defaults({**data, "origin": origin}),
    )
    limits = _limits_today(run, [r for r in data["results"] if r["kind"] != "variant"])
    rows = []
    for number, r in enumerate(x for x in data["results"] if x["kind"] == "variant"):
        value = result_time(r) if r["ok"] and limits.allows(r) else None
        outcome = "measured" if value is not None else "failed"
        row = {"number": number, "config": r["config"], "outcome": outcome, "value": value, "source": "bench"}
        rows.append({**row, "cubin_sha256": r.get("cubin_sha256")})  # what a re-timing rebuilds and compares
    return run, rows


@dataclass(frozen=True)
class Limits:
    """What a variant of a run must have stayed within to pass a built-in family's check as it stands now: its
    tolerance at the run's shape, and where the family names an accuracy bar there, that baseline's error in each
    session of the run (the same inputs as the session's variants). Unknown (None, empty) for any other family: a
    record never loads a family file."""

    tolerance: float | None = None
    bars: Mapping[int, float] = field(default_factory=dict)  # session -> the bar baseline's relative error

    def allows(self, result: dict) -> bool:
        """A result's recorded relative error is within the tolerance and its session's bar (none where that session
        had none; the lowest session's where the result names no session), or unknown."""
        rel = result.get("rel_err")
        if not isinstance(rel, int | float):
            return True
        session = result.get("session")
        lowest = self.bars[min(self.bars)] if self.bars else None
        bar = self.bars.get(session) if type(session) is int else lowest
        return all(limit is None or rel <= limit for limit in (self.tolerance, bar))


def _limits_today(run: RunInfo, baselines: list[dict]) -> Limits:
    """The run's Limits, so that a variant that passed a looser check when it was measured is a failed trial for the
    warm start."""
    family, _ = recorded.family_for({"family": run.family, "origin": run.origin})
    if family is None:
        return Limits()
    try:
        tolerance, found = family.tolerance_for(run.shape), accuracy_baseline(family, run.shape)
        label = found.label if found else None
    except MageError:
        return Limits()
    bars: dict[int, float] = {}
    for r in baselines:  # the first of the kind, as the harness takes; a damaged error holds nothing
        session = r.get("session", 0)
        if r.get("label") == label and r.get("ok") is True and type(session) is int and positive_number(r["rel_err"]):
            bars.setdefault(session, r["rel_err"])
    return Limits(tolerance, bars)


def _read_json(path: Path) -> dict | None:
    """A JSON object read with the project's bounded reader (None where the file is no object)."""
    data = read_json(path)
    return data if isinstance(data, dict) else None


def load_path(path: Path) -> list[tuple[RunInfo, list[dict]]]:
    """A run directory, a bench record (.json) or an export (.jsonl, .jsonl.gz), read and checked whole."""
    if path.is_dir():
        return [run_directory(path)]
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        return import_lines(path)
    return [bench_record(path)]
