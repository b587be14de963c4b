"""What a search is asked to do (SearchSpec) and what makes a run directory's trials one study's (its identity)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from mage_tune.arch import Arch
from mage_tune.compile import SourceOptions
from mage_tune.records.objectives import MEASURED_OBJECTIVE, STATIC_OBJECTIVE
from mage_tune.storage import redact, sqlite_url


@dataclass(frozen=True)
class SearchSpec:
    family: str
    shape: dict
    arch: Arch
    trials: int
    sampler: str
    storage: str | None
    study: str
    run_dir: Path
    workers: int
    static: bool
    seed: int | None
    origin: str = ""  # how the registry finds the family again (a built-in name, a file, an entry point)
    keep_going: bool = False  # every valid config of a listed space tried: draw on (duplicates) instead of stopping
    warm_start: str = "auto"  # auto: from the tuning database; off; other-shapes: this shape's own records left out
    db: str | None = None  # tuning database URL (None: the default; "off": not written nor read)
    polish: int | None = None  # the last trials, given to neighbours of the best (search/polish.py); None: default
    source_options: SourceOptions | None = None  # the command line's -I, -D and compiler options: every trial's


def run_identity(spec: SearchSpec) -> dict:
    """What makes a run directory's trials one study's: trial numbers, values and the best kernel mean nothing mixed."""
    return {
        "study": spec.study,
        "storage": _storage_identity(spec),
        "family": spec.family,
        "shape": dict(spec.shape),
        "arch": spec.arch.name,
        "mode": "static" if spec.static else "measured",
        "objective": STATIC_OBJECTIVE if spec.static else MEASURED_OBJECTIVE,
        # kernels compiled otherwise are other kernels: a resumed run with other options is refused
        "source_options": spec.source_options.to_json() if spec.source_options else None,
    }


def _storage_identity(spec: SearchSpec) -> str | None:
    """Which database holds the study, as backend and database name: the same database reached through another host
    name, port or password is the same storage. None: the default SQLite file in the run directory."""
    url = spec.storage
    if not url or url in (sqlite_url(spec.run_dir / "study.db"), f"sqlite:///{(spec.run_dir / 'study.db').resolve()}"):
        return None
    if url.startswith("journal:") or url.endswith((".journal", ".log")):
        return "journal:" + str(Path(url.removeprefix("journal://").removeprefix("journal:")).resolve())
    try:
        parsed = make_url(url)
        return f"{parsed.get_backend_name()}:{parsed.database}"
    except Exception:  # not a URL SQLAlchemy reads: open_storage says so, in its own words
        return redact(url)


def spec_json(spec: SearchSpec) -> str:
    data = {**spec.__dict__, "arch": spec.arch.name, "run_dir": str(spec.run_dir)}
    data["source_options"] = spec.source_options.to_json() if spec.source_options else None
    return json.dumps(data, indent=1)
