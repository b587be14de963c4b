"""The tuning data shipped with the package: measured H200 and H100 trials of the built-in families, cut from the
committed records (records/*.tar.xz) by analysis/shipped_data.py, which says what is kept and why.

A second, read-only source beside the user's tuning database: the warm start reads it beside the database's trials,
the choice of a config per shape after them (per GPU and shape); `db list` shows it apart. It is data like any record
(docs/trust-model.md): read through the one bounded reader, every line checked against the export schema, and served
only to the family whose name its runs carry as their origin (a built-in one). A damaged or missing file is said once
and reads as empty: it never stops a search.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

from mage_tune.errors import MageError
from mage_tune.tuning.db import Entry, RunInfo, import_lines

PATH = Path(__file__).resolve().parents[1] / "data" / "tuning.jsonl.gz"
LABEL = "the shipped tuning data"


@cache
def _runs(path: Path) -> tuple[tuple[RunInfo, tuple[Entry, ...]], ...]:
    if not path.is_file():
        return ()
    try:
        loaded = import_lines(path)
    except MageError as exc:
        sys.stderr.write(f"mage-tune: warning: {LABEL} cannot be read ({exc}); left out\n")
        return ()
    out = []
    for run, rows in loaded:
        trials = tuple(
            Entry(run, r["number"], r["config"], r["outcome"], r["value"], r["census"], r["source"]) for r in rows
        )
        out.append((run, trials))
    return tuple(out)


def runs(path: Path | None = None) -> list[tuple[RunInfo, int]]:
    """Every shipped run with how many trials it holds (as TuningDB.runs)."""
    return [(run, len(trials)) for run, trials in _runs(path or PATH)]


def entries(family: str | None = None, arch: str | None = None, path: Path | None = None) -> list[Entry]:
    """The shipped trials of the family named `family` (its name or origin), on `arch` where given."""
    out = []
    for run, trials in _runs(path or PATH):
        if (family and not run.is_of(family)) or (arch and run.arch != arch):
            continue
        out.extend(trials)
    return out
