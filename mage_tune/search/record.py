"""The run directory: everything `report` and `explain` need, written as the search goes.

run.json           the study this directory belongs to (study, storage, family, shape, arch, mode, objective),
                   written once: a search of another study is refused here
environment.jsonl  machine, GPU, versions (one entry per process that worked on the run)
search.json        the command's parameters
trials.jsonl       one line per finished trial: config, outcome, value, census features, measurement
baselines.jsonl    baselines measured in the same run, with their session's ceilings and control kernel (the
                   family's own config, `as shipped`, among them: kind "shipped")
shipped.json       the family's as_shipped config: its label and config, its modelled value in a static search, or
                   why it was left out (not valid at the shape, or it does not build)
best/              the best kernel: kernel.cu (kernel.py, a Triton family's), kernel.ptx, kernel.sass, census.json,
                   best.json
report.md          tables rebuilt by `mage-tune report`

Reading is defensive: a line that is not a sound record (cut by a kill, edited by hand, not UTF-8) is reported on
stderr with its file and line and skipped; the lines around it are read as usual. Nothing is ever rewritten: the
.jsonl files are only appended to, run.json is written once, and the other files are replaced whole (atomically).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path

from mage_tune.errors import InputError, MageError
from mage_tune.records import reader, schema

SCORED = schema.SCORED
COUNTED = ("measured", "modelled", "pruned", "compile_error", "failed")  # the outcomes that count toward --trials
RECORDED = (*COUNTED, "duplicate")  # the outcomes a trials.jsonl line is written for: a duplicate never counts
SHIPPED = "shipped.json"
_UMASK = os.umask(0o022)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK  # what open() would give: mkstemp's 0600 would hide a shared run from its readers


class RecordError(MageError):
    """The run directory cannot be written (disk full, read-only, removed): finished trials already written stay."""


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _write_failed(path: Path, exc: OSError, kept: str = "") -> RecordError:
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        why += " (disk full or over a size limit)"
    return RecordError(f"cannot write: {why}" + (f"; {kept}" if kept else ""), file=str(path))


def _append(path: Path, data: dict) -> None:
    line = (json.dumps(data, default=str) + "\n").encode()
    try:
        # never through a symbolic link: a run directory someone shared must not make a search append elsewhere
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, FILE_MODE)
        with open(fd, "rb+") as f:  # one write per line: concurrent workers never interleave inside a line
            f.seek(0, os.SEEK_END)
            if f.tell():
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":  # a line cut by a kill: end it, so this one is not glued to it
                    line = b"\n" + line
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise _write_failed(path, exc, "the lines written before this one are kept") from None


def write_atomic(path: Path, data: str | bytes, exclusive: bool = False) -> bool:
    """Put `path` in place whole: a temporary file in the same folder, fsync, rename. A reader sees the old file or
    the new one, never half of one; a full disk leaves the old one. `exclusive`: only if `path` does not exist yet
    (False is returned when another process put it there first)."""
    raw = data.encode() if isinstance(data, str) else data
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        if not exclusive:
            os.replace(tmp, path)
            tmp = None
            return True
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
    except OSError as exc:
        raise _write_failed(path, exc) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def append_trial(run_dir: Path, data: dict) -> None:
    _append(run_dir / "trials.jsonl", data)


def append_baseline(run_dir: Path, result, session) -> None:
    _append(run_dir / "baselines.jsonl", {"result": result.to_json(), "session": dataclasses.asdict(session)})


def add_environment(run_dir: Path, env: dict) -> None:
    _append(run_dir / "environment.jsonl", env)


def write_shipped(run_dir: Path, data: dict) -> None:
    write_atomic(run_dir / SHIPPED, json.dumps(data, indent=1, default=str))


def read_shipped(run_dir: Path) -> dict | None:
    """shipped.json, or None where the search wrote none (its family names no as_shipped config); a damaged one is
    reported on stderr and read as none."""
    path = run_dir / SHIPPED
    try:
        data = read_identity(path)
    except MageError as exc:
        skipped(path, 1, f"not readable ({exc.message})", "read without it")
        return None
    if data is not None and not (isinstance(data.get("label", ""), str) and isinstance(data.get("error", ""), str)):
        skipped(path, 1, "not a record of the shipped config", "read without it")
        return None
    return data


# --- the run directory's study ----------------------------------------------------------------------------------

IDENTITY = "run.json"


def make_run_dir(run_dir: Path) -> None:
    """Create the run directory (and its parents), or say in one line why it cannot be."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(
            "cannot make the run directory: a file of that name (or above it) is in the way", file=str(run_dir)
        ) from None
    except OSError as exc:
        raise InputError(f"cannot make the run directory: {exc.strerror or exc}", file=str(run_dir)) from None
    if not os.access(run_dir, os.W_OK | os.X_OK):
        raise InputError("cannot write in the run directory (read-only)", file=str(run_dir))


def refuse_links(run_dir: Path) -> None:
    """An InputError where the run directory, or its best/, holds a symbolic link: mage-tune writes there (trials,
    report.md, plots, the best kernel's files), and a link in a run directory someone shared would send those
    writes to a file of the user's elsewhere."""
    for folder in (run_dir, run_dir / "best"):
        try:
            entries = list(folder.iterdir()) if folder.is_dir() else []
        except OSError as exc:
            raise InputError(f"cannot read the run directory: {exc.strerror or exc}", file=str(folder)) from None
        for entry in sorted(entries):
            if entry.is_symlink():
                raise InputError(
                    "a symbolic link in a run directory, where mage-tune writes: remove it (or use another run "
                    "directory) so that nothing is written through it",
                    file=str(entry),
                )


def _describe(identity: dict) -> str:
    shape = " ".join(f"{k}={v}" for k, v in (identity.get("shape") or {}).items())
    return (
        f"study {identity.get('study')!r} ({identity.get('family')} {shape}, {identity.get('arch')}, "
        f"{identity.get('mode')}, objective {identity.get('objective')}"
        + (f", storage {identity['storage']}" if identity.get("storage") else "")
        + ")"
    )


def _legacy_identity(run_dir: Path) -> dict | None:
    """What a run directory made before run.json existed says of its study (search.json)."""
    try:
        meta = reader.read_json(run_dir / "search.json", limit=2**20)
    except MageError:
        return None
    if not isinstance(meta, dict):
        return None
    return {
        "study": meta.get("study"),
        "family": meta.get("family"),
        "shape": meta.get("shape"),
        "arch": meta.get("arch"),
        "mode": "static" if meta.get("static") else "measured",
    }


def _refuse_foreign(run_dir: Path) -> None:
    """A folder that is no run directory (no run.json, no trials.jsonl) must be empty: a search writes report.md,
    best/ and more there, and never over a user's files (hidden entries such as .DS_Store aside)."""
    try:
        held = sorted(e.name for e in run_dir.iterdir() if not e.name.startswith("."))
    except OSError as exc:
        raise InputError(f"cannot read the run directory: {exc.strerror or exc}", file=str(run_dir)) from None
    if held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise InputError(
            f"not a run directory and not empty (it holds {shown}); a search writes report.md, best/ and more "
            "there: give an empty or new --run-dir",
            file=str(run_dir),
        )


def claim(run_dir: Path, identity: dict, about: dict | None = None) -> str:
    """Make `run_dir` the record of the study `identity` names, or refuse if it holds another study's trials or, not
    being a run directory, anything at all (nothing of the user's is overwritten); returns
    the run's id (a UUID given once, when run.json is first written).

    The identity is written once (created exclusively: of two processes starting on an empty directory, one writes
    it and the other compares against it), with the run's id and `about` (what readers need and a resumed search
    does not have to match: the family's digest and defaults)."""
    path = run_dir / IDENTITY
    refuse_links(run_dir)
    if not path.exists():
        if (run_dir / "trials.jsonl").exists():
            legacy = _legacy_identity(run_dir)
            if legacy is not None:
                _compare(path.parent / "search.json", legacy, identity)
        else:
            try:
                _refuse_foreign(run_dir)
            except InputError:
                if not path.exists():
                    raise
                # another process made it this run's directory meanwhile: its run.json is compared below
        run = uuid.uuid4().hex
        written = {**identity, "run_id": run, **(about or {})}
        if write_atomic(path, json.dumps(written, indent=1), exclusive=True):
            return run  # else another process wrote it first: compare with that one
    try:
        recorded = reader.read_json(path, limit=2**20)
    except MageError as exc:
        raise InputError(
            f"unreadable record of this run directory's study ({exc.message}); restore it or use another --run-dir "
            "(run_dir=)",
            file=str(path),
        ) from None
    if not isinstance(recorded, dict):
        raise InputError("not a record of a study; restore it or use another --run-dir (run_dir=)", file=str(path))
    _compare(path, recorded, identity)
    return run_id(run_dir)


def run_id(run_dir: Path) -> str:
    """The run's id: run.json's, or for a run directory made before ids existed a digest of what it holds from its
    start (its identity file and first trial), so a copy or a move of it is the same run."""
    identity = read_identity(run_dir / IDENTITY)
    if identity and isinstance(identity.get("run_id"), str) and identity["run_id"]:
        return identity["run_id"]
    digest = hashlib.sha256()
    for name in (IDENTITY, "search.json"):
        if (run_dir / name).exists():
            digest.update(json.dumps(read_identity(run_dir / name), sort_keys=True).encode())
            break
    first = next(iter(read_jsonl(run_dir / "trials.jsonl", "trial")), None)
    digest.update(json.dumps(first, sort_keys=True).encode())
    return "sha256:" + digest.hexdigest()[:32]


def _compare(path: Path, recorded: dict, identity: dict) -> None:
    differs = [k for k in identity if k in recorded and recorded[k] != identity[k]]
    if differs:
        raise InputError(
            f"this run directory holds {_describe(recorded)}; this search is {_describe(identity)} "
            f"(differs in {', '.join(differs)}): one run directory records one study, use another --run-dir (run_dir=)",
            file=str(path.parent),
        )


# --- reading --------------------------------------------------------------------------------------------------

_reported: set[tuple[str, int]] = set()


def skipped(path: Path, line: int, why: str, action: str = "line skipped") -> None:
    """Say once per process that a record line was skipped, with its file and line."""
    if (str(path), line) in _reported:
        return
    _reported.add((str(path), line))
    sys.stderr.write(f"mage-tune: warning: {path}:{line}: {why}; {action}\n")


def read_jsonl(path: Path, kind: str | None = None) -> list[dict]:
    """The sound lines of a .jsonl record (objects that the schema `kind` finds nothing wrong with), in order, read
    through the one bounded reader."""
    if not path.exists() and not path.is_symlink():
        return []
    out = []
    for line in reader.lines(path):
        why = line.problem or (schema.problem(kind, line.data) if kind else "")
        if why:
            skipped(path, line.number, why)
            continue
        out.append(line.data)
    return out


def read_identity(path: Path) -> dict | None:
    """A run directory's run.json or search.json as an object, read with bounds (None where it does not exist)."""
    if not path.exists():
        return None
    data = reader.read_json(path, limit=2**20)
    if not isinstance(data, dict):
        raise InputError("not a JSON object", file=str(path))
    return data


def trials(run_dir: Path) -> list[dict]:
    return read_jsonl(run_dir / "trials.jsonl", "trial")


def baselines(run_dir: Path) -> list[dict]:
    return read_jsonl(run_dir / "baselines.jsonl", "baseline")


def best_trial(run_dir: Path) -> dict | None:
    scored = [t for t in trials(run_dir) if t["outcome"] in ("measured", "modelled")]
    return min(scored, key=lambda t: t["value"]) if scored else None


def write_best(run_dir: Path, variant, census, best: dict, suffix: str = ".cu") -> None:
    folder = run_dir / "best"
    refuse_links(run_dir)
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise _write_failed(folder, exc) from None
    art = variant.artifact
    write_atomic(folder / f"kernel{suffix}", variant.source)
    write_atomic(folder / "kernel.ptx", art.ptx or "")
    write_atomic(folder / "kernel.sass", art.sass or "")
    write_atomic(folder / "census.json", json.dumps(census.to_json(), indent=1))
    write_atomic(
        folder / "best.json",
        json.dumps(
            {
                "config": best["config"],
                "value": best["value"],
                "objective": best.get("objective"),
                "trial": best["number"],
                "cubin_sha256": art.cubin_sha256,
            },
            indent=1,
        ),
    )
