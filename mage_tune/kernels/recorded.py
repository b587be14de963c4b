"""What a record says of its family, and the only way a family's code is loaded on a record's behalf.

Records (run directories, bench records, tuning-database rows, exports) are data that anyone may have written, so
they never choose which code runs. A record carries what reading it needs: the family's name, how it was found
(its origin), a digest of the file that defines it and its knobs' defaults (to print a config as the knobs that
differ). Where a command needs a family's code for a record (the Triton comparison of `explain`, the tolerance a
`db import` re-checks, a waves line), it takes the family the user named on the command line or a built-in family
(code of this package); a file named by a record is never imported. A digest that differs from the record's is
said, not trusted silently.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import sys
from pathlib import Path

from mage_tune.errors import InputError, MageError
from mage_tune.kernels.base import Config, Family
from mage_tune.kernels.registry import builtin_named, load_family, looks_like_path
from mage_tune.textwidth import wrap


def family_digest(family: Family) -> str:
    """What says whether a record was made by the same code: for a family file, the sha256 of that file (as
    `sha256sum` gives it); for a built-in or an installed plug-in, of the file that defines its class (and, for a
    Triton family, of its kernel's file)."""
    origin = (family.origin or "").rsplit(":", 1)[0] if not (family.origin or "").endswith(".py") else family.origin
    files = [origin] if origin and looks_like_path(origin) and Path(origin).is_file() else []
    if not files:
        files.append(inspect.getsourcefile(type(family)))
        source_file = getattr(family, "source_file", None)
        if callable(source_file):
            with contextlib.suppress(MageError):
                files.append(source_file())
    digest = hashlib.sha256()
    for name in dict.fromkeys(f for f in files if f):
        try:
            digest.update(Path(name).read_bytes())
        except OSError:
            digest.update(name.encode())
    return digest.hexdigest()


def family_record(family: Family) -> dict:
    """The family's part of a record: name, origin, digest and defaults."""
    return {
        "family": family.name,
        "origin": family.origin or family.name,
        "family_digest": family_digest(family),
        "defaults": family.with_defaults({}),
    }


def builtin(name: str) -> Family | None:
    """The built-in family of that name, or of that path where it is the package's own module (older records of the
    Hopper families name them so): this package's own code; None for any other name."""
    found = builtin_named(name)
    return load_family(found) if found else None


def defaults(recorded: dict) -> Config:
    """A record's knob defaults: as it carries them, else a built-in family's, else none known ({})."""
    given = recorded.get("defaults")
    if isinstance(given, dict):
        return given
    origin = recorded.get("origin") or recorded.get("family_origin") or recorded.get("family")
    family = builtin(str(origin or ""))
    return family.with_defaults({}) if family is not None else {}


NOTE_WIDTH = 100  # a note goes to stderr, often a log: wrapped at the width of the tables, terminal or not
_said: set[tuple[str, str]] = set()


def family_for(recorded: dict, named: str | None = None) -> tuple[Family | None, str]:
    """The family whose code may serve a record: the one the user `named` (a spec they typed), else a built-in one
    the record names; (None, why) for a record of a family file nobody named. A digest that differs from the
    record's is said once on stderr."""
    origin = str(recorded.get("origin") or recorded.get("family_origin") or recorded.get("family") or "")
    if named:
        family = load_family(named)
        kept = str(recorded.get("family") or "")
        if kept and "/" not in kept and not kept.endswith(".py") and kept != family.name:
            raise InputError(f"--family {named} is family {family.name!r}; the record is of {kept!r}")
    else:
        family = builtin(origin)  # a family file's record names the file: never a built-in of the same name
        if family is None:
            return None, (
                f"the record's family {origin or '?'} is not a built-in one and records never load code: name its "
                "file with --family to use it"
            )
    shape = recorded.get("shape")  # where the record holds one: a run's identity may keep it elsewhere
    missing = [d for d in family.dims if d not in shape] if isinstance(shape, dict) else []
    if missing:
        return None, f"the record's shape has no {', '.join(missing)}, which {family.name} needs"
    recorded_digest = recorded.get("family_digest")
    if recorded_digest and recorded_digest != family_digest(family) and (origin, recorded_digest) not in _said:
        _said.add((origin, recorded_digest))
        note = (
            f"mage-tune: note: {family.origin or family.name} is not the code that made this record (its file's "
            f"sha256 differs from the record's {recorded_digest[:12]}); read with the code as it is now"
        )
        sys.stderr.write(wrap(note, NOTE_WIDTH) + "\n")
    return family, ""


def config_problem(origin: str, config: dict) -> str:
    """What is wrong with a recorded config of a built-in family ("" when nothing, or when `origin` names no
    built-in: a record never loads a family file): a knob the family does not have, or a value outside its domain.
    A knob the record lacks is no problem (an older record, made before the knob, ran at its default)."""
    family = builtin(origin)
    if family is None:
        return ""
    knobs = {k.name: k for k in family.knobs}
    for key, value in config.items():
        if key not in knobs:
            return f"{family.name} has no knob {key!r}"
        if not knobs[key].allows(value):
            return f"{family.name}'s knob {key} has no value {value!r}"
    return ""
