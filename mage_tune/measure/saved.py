"""Reading saved files: JSON that names the file (and line) when it is not JSON, and the questions every reader of a
`mage-tune bench --out` record asks — a result's time, the fastest result of a kind, the floor — in one place for
`explain`, `bench --configs` and the analysis/ scripts."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from mage_tune.errors import InputError
from mage_tune.kernels.recorded import builtin
from mage_tune.records import reader, schema


def read_json(path: str | Path) -> object:
    """A JSON file, read with the one bounded reader; a bench record is also checked (`check_bench`), so every reader
    of one gets either a sound record or one error naming the file."""
    data = reader.read_json(path)
    if isinstance(data, dict) and str(data.get("schema", "")).startswith("mage-tune.bench/"):
        check_bench(data, str(path))
    return data


def positive_number(value) -> bool:
    """A finite number above 0 (not a bool): a time, a rate."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def is_grid(value) -> bool:
    """A recorded grid: three positive integers (not bools), as JSON keeps a launch's dims."""
    return isinstance(value, list) and len(value) == 3 and all(type(v) is int and v > 0 for v in value)


def _result_problem(r, sessions: int) -> str:
    if not isinstance(r, dict):
        return "not an object"
    for key, kind in (("label", str), ("kind", str), ("ok", bool), ("timings", list), ("config", dict)):
        if not isinstance(r.get(key), kind):
            return f"{key} missing or not a {kind.__name__}"
    if not isinstance(r.get("session"), int) or not 0 <= r["session"] < sessions:
        return f"session {r.get('session')!r} is not one of the record's {sessions}"
    for t in r["timings"]:
        if not isinstance(t, dict) or not isinstance(t.get("regime"), str) or not positive_number(t.get("median_us")):
            return "a timing without a regime and a positive median_us"
    if not all(v is None or isinstance(v, str | int | float | bool) for v in r["config"].values()):
        return "a config value that is not a number, string or boolean"
    if r.get("rel_err") is not None and not (
        isinstance(r["rel_err"], int | float) and not isinstance(r["rel_err"], bool)
    ):
        return f"rel_err {r['rel_err']!r} is not a number"
    return ""


def shape_problem(shape) -> str:
    """What is wrong with a recorded shape ("" when nothing is): a mapping of dimension names to positive integers."""
    if shape is None:
        return "'shape' missing (the dimensions of the problem and their sizes)"
    if not isinstance(shape, dict) or not shape:
        return f"the shape {shape!r} is not a mapping of dimensions to sizes"
    for key, value in shape.items():
        if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"the shape {shape!r} has {key!r} = {value!r}, not a positive integer"
    return ""


def check_bench(record: dict, label: str) -> None:
    """Raise InputError naming `label` for a bench record the readers cannot use (no sessions, a session's copy
    bandwidth or FMA rate not positive, ...); drop (and report on stderr) single results that are damaged."""

    def bad(why: str) -> InputError:
        return InputError(f"damaged bench record: {why}", file=label)

    if shape_problem(record.get("shape")):
        raise bad(shape_problem(record.get("shape")))
    for key, kind in (("family", str), ("environment", dict), ("census", dict), ("results", list)):
        if not isinstance(record.get(key), kind):
            raise bad(f"{key!r} missing or not a {kind.__name__}")
    family = builtin(str(record.get("family_origin") or record["family"]))  # this package's own, never a file
    missing = [d for d in family.dims if d not in record["shape"]] if family is not None else []
    if missing:
        raise bad(f"the shape has no {', '.join(missing)}, which {family.name} needs")
    environment_problem = schema.problem("environment", record["environment"])
    if environment_problem:
        raise bad(f"environment.{environment_problem}")
    sessions = record.get("sessions")
    if not isinstance(sessions, list) or not sessions:
        raise bad("no 'sessions' (the measured copy bandwidth and FMA rate every floor is computed from)")
    for i, s in enumerate(sessions):
        for key in ("copy_gbs", "fp32_tflops"):
            if not isinstance(s, dict) or not positive_number(s.get(key)):
                got = s.get(key) if isinstance(s, dict) else s
                raise bad(f"session {i} has {key} {got!r}, not a positive number")
    for key in ("flops", "bytes_moved"):
        value = record.get(key)
        if not (value == 0 or positive_number(value)) or isinstance(value, bool):
            raise bad(f"{key!r} is {value!r}, not a number of zero or more")
    passes = record.get("mma_passes")
    if passes is not None and (isinstance(passes, bool) or not isinstance(passes, int) or passes < 1):
        raise bad(f"'mma_passes' is {passes!r}, not a positive integer")
    kept = []
    for i, r in enumerate(record["results"]):
        why = _result_problem(r, len(sessions))
        if why:
            sys.stderr.write(f"mage-tune: warning: {label}: results[{i}]: {why}; result skipped\n")
        else:
            kept.append(r)
    record["results"] = kept


def read_record(path: str | Path, schema: str) -> dict:
    """A record whose schema starts with `schema` (e.g. "mage-tune.bench/")."""
    record = read_json(path)
    found = record.get("schema") if isinstance(record, dict) else None
    if not str(found or "").startswith(schema):
        raise InputError(f"not a {schema.rstrip('/')} record (schema {found!r})", file=str(path))
    if schema == "mage-tune.counters/" and not (
        isinstance(record.get("census"), dict) and isinstance(record.get("profiled"), dict)
    ):
        raise InputError("damaged counters record: 'census' or 'profiled' missing", file=str(path))
    return record


def result_time(result: dict, regime: str = "cold") -> float | None:
    """The median of a result's timing in `regime`, None where it was not timed there."""
    return next((t["median_us"] for t in result["timings"] if t["regime"] == regime), None)


def timed_results(record: dict, kind: str, regime: str = "cold", session: int | None = 0) -> list[dict]:
    """The passing results of `kind` (variant, triton, torch, copy) timed in `regime` in one session (None: in any),
    fastest first."""
    timed = [
        r
        for r in record["results"]
        if r["kind"] == kind and r["ok"] and session in (None, r["session"]) and result_time(r, regime) is not None
    ]
    return sorted(timed, key=lambda r: result_time(r, regime))


def best_result(record: dict, kind: str, regime: str = "cold", session: int = 0) -> dict | None:
    timed = timed_results(record, kind, regime, session)
    return timed[0] if timed else None


def varying_knobs(configs: list[dict]) -> list[str]:
    """The knobs whose value differs between `configs` (a knob one config lacks differs from any value), in the order
    they first appear across every config's keys."""
    knobs = dict.fromkeys(k for config in configs for k in config)
    return [k for k in knobs if len({json.dumps(c.get(k), sort_keys=True) for c in configs}) > 1]


def floor_us(record: dict, session: int = 0) -> float:
    """FLOPs over the FMA rate measured in the session (matmul), or bytes moved over its best copy bandwidth."""
    s = record["sessions"][session]
    if record["flops"]:
        return record["flops"] / (s["fp32_tflops"] * 1e12) * 1e6
    return record["bytes_moved"] / (s["copy_gbs"] * 1e9) * 1e6
