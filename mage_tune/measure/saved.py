"""Reading saved files: JSON that names the file (and line) when it is not JSON, and the questions every reader of a
`mage-tune bench --out` record asks — a result's time, the fastest result of a kind, the floor — in one place for
`explain`, `bench --configs` and the analysis/ scripts."""

from __future__ import annotations

import json
from pathlib import Path

from mage_tune.errors import InputError


def read_json(path: str | Path) -> object:
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", file=str(path), line=exc.lineno) from exc


def read_record(path: str | Path, schema: str) -> dict:
    """A record whose schema starts with `schema` (e.g. "mage-tune.bench/")."""
    record = read_json(path)
    found = record.get("schema") if isinstance(record, dict) else None
    if not str(found or "").startswith(schema):
        raise InputError(f"not a {schema.rstrip('/')} record (schema {found!r})", file=str(path))
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


def floor_us(record: dict, session: int = 0) -> float:
    """FLOPs over the FMA rate measured in the session (matmul), or bytes moved over its best copy bandwidth."""
    s = record["sessions"][session]
    if record["flops"]:
        return record["flops"] / (s["fp32_tflops"] * 1e12) * 1e6
    return record["bytes_moved"] / (s["copy_gbs"] * 1e9) * 1e6
