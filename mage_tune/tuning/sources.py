"""What the tuning database imports: a search's run directory, or a bench record. Each becomes one run (its context)
and its trials, read with the same defensive readers `report` uses (a bad line is named and skipped)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from mage_tune.errors import InputError
from mage_tune.search import record
from mage_tune.tuning.db import RunInfo, row_problem, run_name, shape_problem, versions

MEASURED_OBJECTIVE = "measured-cold-median-us/1"  # a bench record's cold median is what a measured search minimises


def _gpu_and_toolchain(envs: list[dict]) -> tuple[str, dict]:
    for env in envs:
        if env.get("gpu"):
            return str(env["gpu"]), versions(env.get("toolchain") or {})
    return "", versions((envs[0].get("toolchain") if envs else None) or {})


def _arch_of(env: dict) -> str:
    cc = str(env.get("compute_capability", ""))
    return "sm_" + cc.replace(".", "") if cc else ""


def _cold(result: dict) -> float | None:
    timings = result.get("timings")
    for t in timings if isinstance(timings, list) else []:
        if not isinstance(t, dict):
            continue
        value = t.get("median_us")
        if t.get("regime") == "cold" and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value) if value > 0 and value == value else None
    return None


def _baselines(results: list[dict]) -> dict[str, float]:
    times: dict[str, list[float]] = {}
    for r in results:
        value = _cold(r) if r.get("ok") else None
        if value is not None:
            times.setdefault(str(r.get("label")), []).append(value)
    return {label: statistics.median(v) for label, v in times.items()}


def run_directory(path: Path) -> tuple[RunInfo, list[dict]]:
    identity = _read_json(path / "run.json") or _read_json(path / "search.json")
    if not identity or not identity.get("family") or "shape" not in identity:
        raise InputError(
            "not a search run directory (no run.json or search.json naming family and shape)", file=str(path)
        )
    if shape_problem(identity["shape"]):
        raise InputError(shape_problem(identity["shape"]), file=str(path / "run.json"))
    envs = record.read_jsonl(path / "environment.jsonl")
    gpu, toolchain = _gpu_and_toolchain(envs)
    search = _read_json(path / "search.json") or {}
    objective = identity.get("objective") or (
        "static-model-us/1" if identity.get("static") or identity.get("mode") == "static" else MEASURED_OBJECTIVE
    )
    study = str(identity.get("study") or path.name)
    baselines = _baselines([b["result"] for b in record.read_jsonl(path / "baselines.jsonl", record.check_baseline)])
    run = RunInfo(
        name=run_name(study, str(path.resolve())),
        family=str(identity["family"]),
        origin=str(search.get("origin") or identity["family"]),
        shape=identity["shape"],
        arch=str(identity.get("arch", "")),
        objective=objective,
        gpu=gpu,
        toolchain=toolchain,
        baselines=baselines,
        where=str(path),
    )
    rows = [
        {
            "number": t["number"],
            "config": t.get("config") or {},
            "outcome": t["outcome"],
            "value": t.get("value"),
            "census": t.get("census") or {},
            "source": t.get("source", ""),
        }
        for t in record.trials(path)
        if isinstance(t.get("config"), dict)
    ]
    return run, rows


def bench_record(path: Path) -> tuple[RunInfo, list[dict]]:
    data = _read_json(path)
    if not data or not str(data.get("schema", "")).startswith("mage-tune.bench/"):
        raise InputError("not a bench record (schema mage-tune.bench/…) nor a run directory or export", file=str(path))
    if shape_problem(data.get("shape")):
        raise InputError(shape_problem(data.get("shape")), file=str(path))
    if not isinstance(data.get("results"), list):
        raise InputError("a bench record without its list of results", file=str(path))
    env = data.get("environment") if isinstance(data.get("environment"), dict) else {}
    results = [r for r in data["results"] if isinstance(r, dict)]
    run = RunInfo(
        name=run_name(f"bench {data.get('family')}", str(path.resolve())),
        family=str(data.get("family", "")),
        origin=str(data.get("family", "")),
        shape=data.get("shape") or {},
        arch=_arch_of(env),
        objective=MEASURED_OBJECTIVE,
        gpu=str(env.get("gpu", "")),
        toolchain=versions(env.get("toolchain") or {}),
        baselines=_baselines([r for r in results if r.get("kind") != "variant"]),
        where=str(path),
    )
    rows = []
    for number, r in enumerate(x for x in results if x.get("kind") == "variant"):
        value = _cold(r) if r.get("ok") is True else None
        row = {
            "number": number,
            "config": r.get("config"),
            "outcome": "measured" if value is not None else "failed",
            "value": value,
            "source": "bench",
        }
        why = row_problem(row)
        if why:
            sys.stderr.write(f"mage-tune: warning: {path}: result {number} ({r.get('label', '?')}): {why}; skipped\n")
            continue
        rows.append(row)
    return run, rows


def _read_json(path: Path) -> dict | None:
    from mage_tune.inputs import read_input

    if not path.exists():
        return None
    try:
        data = json.loads(read_input(path).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"not a JSON record: {exc}", file=str(path)) from None
    return data if isinstance(data, dict) else None
