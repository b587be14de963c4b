"""Importing a user's Python file (a family file, a Triton kernel file) under a module name of its own, so two
users' `family.py` never collide; registered in sys.modules, so processes forked from this one find it. Errors
name the file and line, with no traceback."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

from mage_tune.errors import InputError

_IMPORTED: dict[str, str] = {}  # resolved path of each user file imported -> how errors name it


def import_file(path: Path, shown: str | None = None):
    """The module of `path`; `shown` is how errors name the file (default: its resolved path)."""
    path = Path(path).resolve()
    where = shown or str(path)
    module_name = "mage_tune_user_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    if module_name in sys.modules:
        return sys.modules[module_name]
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read it: {exc}", file=where) from None
    try:
        compile(text, str(path), "exec")
    except SyntaxError as exc:
        raise InputError(f"Python syntax error: {exc.msg}", file=where, line=exc.lineno) from None
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    _IMPORTED[str(path)] = where
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:  # would end mage-tune with the file's exit code, a success where it is 0 or None
        sys.modules.pop(module_name, None)
        code = "" if exc.code is None else repr(exc.code)
        raise InputError(
            f"the file called sys.exit({code}) while being imported", file=where, line=line_in(exc, path)
        ) from None
    except Exception as exc:  # the user's module raised while importing: say what and where
        sys.modules.pop(module_name, None)
        raise InputError(
            f"importing it failed: {type(exc).__name__}: {exc}", file=where, line=line_in(exc, path)
        ) from None
    return module


def raised_in_user_file(exc: BaseException) -> tuple[str, int] | None:
    """(file as shown, line) of the last frame of a user's file (one import_file loaded) that `exc` passed through:
    where a family's own code raised (a constraint, a template's variables), which is the user's input to fix, not a
    fault of mage-tune's; None where no user file is on the traceback."""
    found, tb = None, exc.__traceback__
    while tb is not None:
        shown = _IMPORTED.get(tb.tb_frame.f_code.co_filename) or _IMPORTED.get(
            str(Path(tb.tb_frame.f_code.co_filename).resolve())
        )
        if shown is not None:
            found = (shown, tb.tb_lineno)
        tb = tb.tb_next
    return found


def line_in(exc: BaseException, path: Path) -> int | None:
    """The last line of `path` the exception passed through."""
    path = Path(path).resolve()
    line, tb = None, exc.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
