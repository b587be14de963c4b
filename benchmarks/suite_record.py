"""Benchmark suites: a suite file (benchmarks/suites/NAME.toml) says what to search, a suite record (JSON, schema
mage-tune.suite/1) what the searches found, one row per shape, read from their run directories (or bench records)
through mage_tune's own readers. Shared by run_suite.py, suite_from_runs.py and results_table.py.

A suite file:

    family = "layernorm"                           # as `mage-tune search` takes it: a built-in name or a family file
    shapes = [{m = 16384, d = 2560}, ...]          # every dimension of the family
    trials = 100                                   # per shape
    warm_start = "other-shapes"                    # leave-shape-out: the shape's own records left out (auto, off)
    sampler = "tpe"
    seed = 0                                       # optional, as are workers, gpus ("all", "0,1") and polish
    baselines = ["triton", "torch", "copy"]        # the baseline kinds reported, in this order
    report = ["ratio", "copy_gap", "within_3pct"]  # the columns after the times (REPORTS)
    [names]                                        # optional: a baseline's column name
    torch = "cuBLAS FP32 (torch)"

A suite record: schema, suite, family, made_by (run_suite / suite_from_runs), date (the latest trial's), gpu, driver,
toolchain, commit (`git rev-parse HEAD` of the tree that wrote it; a campaign's own commit is in records/README.md),
settings (the suite file), shapes (one row per shape, the suite's order: run, best_us, best_config, trials,
within_3pct, baselines_us, baseline_labels, ratio (ours over each baseline), best_baseline, ratio_best_baseline,
copy_gap, and the search's own settings), missing (shapes of the suite with no row).
"""

from __future__ import annotations

import statistics
import subprocess
import tomllib
from pathlib import Path

from mage_tune.errors import MageError
from mage_tune.measure.saved import best_result, read_record, result_time
from mage_tune.search import record, report
from mage_tune.tuning.db import versions

SCHEMA = "mage-tune.suite/1"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SUITES = HERE / "suites"
WITHIN = 1.03  # "trials to within 3 %": the first trial whose time is within 3 % of the run's best
BASELINES = ("triton", "torch", "copy")
REPORTS = {
    "ratio": "ours / best baseline",
    "copy_gap": "(ours − copy)/(Triton − copy)",
    "within_3pct": "trials to within 3 %",
}
WARM_STARTS = ("other-shapes", "auto", "off")
_REQUIRED = {"family": str, "shapes": list, "trials": int, "warm_start": str, "sampler": str, "baselines": list}
_OPTIONAL = {"seed": int, "workers": int, "gpus": str, "polish": int, "report": list, "names": dict}
_SCORED = ("measured", "modelled")


class SuiteError(Exception):
    """A suite file or a run that cannot be used: said in one line."""


def find(spec: str | Path) -> Path:
    """A suite file by path, or by name in benchmarks/suites/ (`layernorm-h200`)."""
    path = Path(spec)
    if path.is_file():
        return path
    named = SUITES / f"{spec}.toml"
    if named.is_file():
        return named
    raise SuiteError(f"{spec}: no such suite file (nor {named.relative_to(ROOT)})")


def load(spec: str | Path) -> dict:
    """The suite file's settings, checked (not its family: family_of), with its name (the file's stem)."""
    from mage_tune.search.samplers import SAMPLERS

    path = find(spec)
    try:
        suite = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise SuiteError(f"{path}: not TOML ({error})") from None

    def bad(why: str) -> SuiteError:
        return SuiteError(f"{path}: {why}")

    for key, kind in {**_REQUIRED, **_OPTIONAL}.items():
        if key in _REQUIRED and key not in suite:
            raise bad(f"{key} missing")
        if key in suite and (not isinstance(suite[key], kind) or isinstance(suite[key], bool)):
            raise bad(f"{key} is {suite[key]!r}, not a {kind.__name__}")
    unknown = sorted(set(suite) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise bad(f"unknown key(s) {', '.join(unknown)}")
    shapes = suite["shapes"]
    if not shapes or not all(isinstance(s, dict) and s and all(_positive(v) for v in s.values()) for s in shapes):
        raise bad("shapes must be a non-empty list of tables of positive integers ({m = 4096, d = 768})")
    if len({shape_text(s) for s in shapes}) != len(shapes):
        raise bad("a shape is listed twice")
    if suite["trials"] < 1 or suite.get("workers", 1) < 1 or suite.get("polish", 0) < 0:
        raise bad("trials and workers must be 1 or more, polish 0 or more")
    if suite["warm_start"] not in WARM_STARTS:
        raise bad(f"warm_start {suite['warm_start']!r} is not one of {', '.join(WARM_STARTS)}")
    if suite["sampler"] not in SAMPLERS:
        raise bad(f"sampler {suite['sampler']!r} is not one of {', '.join(SAMPLERS)}")
    for key, known in (("baselines", BASELINES), ("report", REPORTS)):
        wrong = [v for v in suite.get(key, []) if v not in known]
        if wrong or len(set(suite.get(key, []))) != len(suite.get(key, [])):
            raise bad(f"{key} must name each of {', '.join(known)} at most once (not {wrong or 'twice'})")
    if any(k not in BASELINES or not isinstance(v, str) for k, v in suite.get("names", {}).items()):
        raise bad(f"names maps a baseline ({', '.join(BASELINES)}) to its column name")
    return {"name": path.stem, **suite}


def _positive(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def family_of(suite: dict):
    """The suite's family, loaded as `mage-tune search` loads it; every shape checked against its dimensions."""
    from mage_tune.kernels import load_family

    try:
        family = load_family(suite["family"])
        for shape in suite["shapes"]:
            if family.shape_from(shape) != shape:
                raise SuiteError(f"{suite['name']}: {shape_text(shape)} leaves out a dimension of {family.name}")
    except MageError as error:
        raise SuiteError(f"{suite['name']}: {error}") from None
    return family


def shape_text(shape: dict) -> str:
    """{"m": 4096, "d": 768} -> "m=4096,d=768" (--shape's form)."""
    return ",".join(f"{k}={v}" for k, v in shape.items())


def tag(family_name: str, shape: dict) -> str:
    """A shape's run directory name: layernorm-m16384d2560, as leave-shape-out searches have always been named."""
    return family_name + "-" + "".join(f"{k}{v}" for k, v in shape.items())


# --- rows: one shape's search (or bench record) --------------------------------------------------------------------


def baseline_times(results: list[dict]) -> dict[str, tuple[float, str]]:
    """Per baseline kind the fastest label's cold time and that label; a label timed in several sessions (one per
    GPU of a search) counts by its median over them."""
    per_label: dict[tuple[str, str], list[float]] = {}
    for r in results:
        t = result_time(r) if r.get("ok") else None
        if t is not None and r.get("kind") != "variant":
            per_label.setdefault((r.get("kind") or r["label"], r["label"]), []).append(t)
    best: dict[str, tuple[float, str]] = {}
    for (kind, label), times in sorted(per_label.items()):
        t = statistics.median(times)
        if kind not in best or t < best[kind][0]:
            best[kind] = (t, label)
    return best


def _environment(env: dict) -> dict:
    tools = versions(env.get("toolchain") or {})
    tools |= {k: str(env[k]) for k in ("torch", "triton") if env.get(k)}
    return {"gpu": env.get("gpu"), "driver": env.get("driver"), "toolchain": tools}


def _row(best_us: float, baselines: dict[str, tuple[float, str]], **fields) -> dict:
    ratio = {kind: best_us / t for kind, (t, _) in baselines.items()}
    rivals = {kind: t for kind, (t, _) in baselines.items() if kind != "copy"}
    rival = min(rivals, key=rivals.get) if rivals else None
    copy, triton = (baselines.get(k, (None,))[0] for k in ("copy", "triton"))
    gap = (best_us - copy) / (triton - copy) if copy and triton and triton > copy else None
    return {
        **fields,
        "best_us": best_us,
        "baselines_us": {kind: t for kind, (t, _) in baselines.items()},
        "baseline_labels": {kind: label for kind, (_, label) in baselines.items()},
        "ratio": ratio,
        "best_baseline": rival,
        "ratio_best_baseline": ratio[rival] if rival else None,
        "copy_gap": gap,
    }


def from_run_dir(path: Path) -> dict:
    """A search's row: its best trial, the first trial within 3 % of it (counted in the order the search ran them),
    the baselines timed in the same run."""
    identity = record.read_identity(path / "run.json") or record.read_identity(path / "search.json")
    if not identity or "shape" not in identity:
        raise SuiteError(f"{path}: not a search run directory (no run.json or search.json)")
    search = record.read_identity(path / "search.json") or {}
    best = report.scored(path)[:1]
    if not best:
        raise SuiteError(f"{path}: no scored trial")
    best_us = best[0]["value"]
    trials = sorted(record.trials(path), key=lambda t: t["number"])
    within = next(
        (i + 1 for i, t in enumerate(trials) if t["outcome"] in _SCORED and t["value"] <= best_us * WITHIN), None
    )
    envs = record.read_jsonl(path / "environment.jsonl")
    dates = sorted(str(t["time"])[:10] for t in trials if t.get("time"))
    return _row(
        best_us,
        baseline_times([b["result"] for b in record.baselines(path)]),
        shape=identity["shape"],
        run=str(path),
        kind="search",
        family=identity.get("family"),
        origin=identity.get("origin") or search.get("origin") or identity.get("family"),
        date=dates[-1] if dates else None,
        **_environment(envs[0] if envs else {}),
        objective=identity.get("objective") or best[0].get("objective"),
        search={k: search.get(k) for k in ("trials", "warm_start", "sampler", "seed", "polish", "workers")},
        best_config=best[0]["config"],
        trials=len(trials),
        within_3pct=within,
    )


def from_bench(path: Path) -> dict:
    """A bench record's row: its fastest passing variant and each baseline kind's fastest, all of session 0 (one
    process); a bench has no trial order, so no trials to within 3 %."""
    try:
        data = read_record(path, "mage-tune.bench/")
    except MageError as error:
        raise SuiteError(f"{path}: {error.message}") from None
    best = best_result(data, "variant")
    if best is None:
        raise SuiteError(f"{path}: no passing variant timed cold")
    baselines = {}
    for kind in BASELINES:
        found = best_result(data, kind)
        if found is not None:
            baselines[kind] = (result_time(found), found["label"])
    return _row(
        result_time(best),
        baselines,
        shape=data["shape"],
        run=str(path),
        kind="bench",
        family=data["family"],
        origin=data.get("family_origin") or data["family"],
        date=None,
        **_environment(data["environment"]),
        objective="measured-cold-median-us",
        search=None,
        best_config=best["config"],
        trials=None,
        within_3pct=None,
    )


def row_of(path: Path) -> dict:
    return from_bench(path) if path.is_file() else from_run_dir(path)


# --- the record ---------------------------------------------------------------------------------------------------


def git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def _joined(values) -> str | None:
    distinct = sorted({str(v) for v in values if v})
    return " / ".join(distinct) or None


def make(suite: dict, rows: list[dict], made_by: str) -> dict:
    """The suite record of `rows` (one per shape of the suite; others are refused by the caller), in the suite's
    order; shapes without a row are listed as missing."""
    order = {shape_text(s): i for i, s in enumerate(suite["shapes"])}
    rows = sorted(rows, key=lambda r: order[shape_text(r["shape"])])
    found = {shape_text(r["shape"]) for r in rows}
    tools = sorted({k for r in rows for k in r["toolchain"]})
    return {
        "schema": SCHEMA,
        "suite": suite["name"],
        "family": suite["family"],
        "made_by": made_by,
        "date": max((r["date"] for r in rows if r["date"]), default=None),
        "gpu": _joined(r["gpu"] for r in rows),
        "driver": _joined(r["driver"] for r in rows),
        "toolchain": {k: _joined(r["toolchain"].get(k) for r in rows) for k in tools},
        "commit": git_commit(),
        "settings": {k: v for k, v in suite.items() if k != "name"},
        "shapes": rows,
        "missing": [shape_text(s) for s in suite["shapes"] if shape_text(s) not in found],
    }


def matches(suite: dict, row: dict) -> bool:
    """The row is of the suite's family (named as the suite names it, or by the family's own name)."""
    return suite["family"] in (row["family"], row["origin"])


def in_suite(suite: dict, row: dict) -> bool:
    return shape_text(row["shape"]) in {shape_text(s) for s in suite["shapes"]}


def read(path: Path) -> dict:
    """A suite record, checked for its schema."""
    import json

    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise SuiteError(f"{path}: not readable as JSON ({error})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("shapes"), list):
        raise SuiteError(f"{path}: not a suite record (schema {SCHEMA})")
    return data
