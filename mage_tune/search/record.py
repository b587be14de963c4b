"""The run directory: everything `report` and `explain` need, written as the search goes.

environment.jsonl  machine, GPU, versions (one entry per process that worked on the run)
search.json        the command's parameters
trials.jsonl       one line per finished trial: config, outcome, value, census features, measurement
baselines.jsonl    baselines measured in the same run, with their session's ceilings and control kernel
best/              the best kernel: kernel.cu, kernel.ptx, kernel.sass, census.json, best.json
report.md          tables rebuilt by `mage-tune report`
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _append(path: Path, data: dict) -> None:
    line = json.dumps(data, default=str) + "\n"
    with open(path, "a") as f:  # one write per line: concurrent workers never interleave inside a line
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def append_trial(run_dir: Path, data: dict) -> None:
    _append(run_dir / "trials.jsonl", data)


def append_baseline(run_dir: Path, result, session) -> None:
    _append(run_dir / "baselines.jsonl", {"result": result.to_json(), "session": dataclasses.asdict(session)})


def add_environment(run_dir: Path, env: dict) -> None:
    _append(run_dir / "environment.jsonl", env)


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by a kill -9 mid-write: the trial is in the study, not lost
    return out


def trials(run_dir: Path) -> list[dict]:
    return read_jsonl(run_dir / "trials.jsonl")


def best_trial(run_dir: Path) -> dict | None:
    scored = [t for t in trials(run_dir) if t.get("outcome") in ("measured", "modelled") and t.get("value") is not None]
    return min(scored, key=lambda t: t["value"]) if scored else None


def write_best(run_dir: Path, variant, census, best: dict) -> None:
    folder = run_dir / "best"
    folder.mkdir(exist_ok=True)
    art = variant.artifact
    (folder / "kernel.cu").write_text(variant.source)
    (folder / "kernel.ptx").write_text(art.ptx or "")
    (folder / "kernel.sass").write_text(art.sass or "")
    (folder / "census.json").write_text(json.dumps(census.to_json(), indent=1))
    (folder / "best.json").write_text(
        json.dumps(
            {
                "config": best["config"],
                "value": best["value"],
                "objective": best.get("objective"),
                "trial": best["number"],
                "cubin_sha256": art.cubin_sha256,
            },
            indent=1,
        )
    )
