"""Finding a family: a built-in name, a Python file (`path/to/family.py` or `path/to/family.py:NAME`), or an
installed package's entry point in the group `mage_tune.families`.

A family file is imported under a module name of its own (so two users' `family.py` never collide) and registered
in sys.modules, so compile processes forked from this one find it. What it defines is found as NAME, else `FAMILY`,
else the one Family instance it holds. A family remembers how it was found (`origin`), which is how a spawned GPU
worker imports it again, and what run records keep.
"""

from __future__ import annotations

import copyreg
import difflib
import importlib
import importlib.util
import inspect
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

from mage_tune.compile import SourceOptions, check_define, check_option
from mage_tune.errors import ConfigError, InputError
from mage_tune.kernels.base import Family, Knob
from mage_tune.user_files import import_file, line_in

ENTRY_POINT_GROUP = "mage_tune.families"
BUILTINS = {
    "layernorm": "mage_tune.kernels.layernorm:FAMILY",
    "embedding-layernorm": "mage_tune.kernels.embedding_layernorm:FAMILY",
    "add-layernorm": "mage_tune.kernels.add_layernorm:FAMILY",
    "add-layernorm-sum": "mage_tune.kernels.add_layernorm:WITH_SUM",
    "add-vector-layernorm": "mage_tune.kernels.add_layernorm:VECTOR",
    "add-row-layernorm": "mage_tune.kernels.add_layernorm:ROW",
    "add-row-layernorm-sum": "mage_tune.kernels.add_layernorm:ROW_WITH_SUM",
    "matmul": "mage_tune.kernels.matmul:FAMILY",
    "matmul-3xtf32": "mage_tune.kernels.matmul_3xtf32:FAMILY",
    "matmul-3xtf32-sm90": "mage_tune.kernels.matmul_3xtf32_sm90:FAMILY",
    "matmul-bf16": "mage_tune.kernels.matmul_bf16:FAMILY",
    "matmul-bf16-f32out": "mage_tune.kernels.matmul_bf16:FP32_OUT",
    "matmul-f16": "mage_tune.kernels.matmul_bf16:F16",
}


def builtin_names() -> tuple[str, ...]:
    return tuple(BUILTINS)


def _entry_points() -> dict:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def known_names() -> list[str]:
    return [*BUILTINS, *sorted(n for n in _entry_points() if n not in BUILTINS)]


def did_you_mean(spec: str, names) -> str:
    """ "; did you mean A or B?" for the names closest to a misspelt one ("" where none is close)."""
    close = difflib.get_close_matches(spec, sorted(names), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def looks_like_path(spec: str) -> bool:
    path = spec.rpartition(":")[0] if spec.count(":") and not spec.endswith(".py") else spec
    return path.endswith(".py") or "/" in path or Path(path).is_file()


@cache
def load_family(spec: str) -> Family:
    """The family named by `spec`; a ConfigError (unknown name) or InputError (a file that cannot be one)."""
    if spec in BUILTINS:
        return _from_module(BUILTINS[spec], spec)
    if looks_like_path(spec):
        name = builtin_at(spec)
        return load_family(name) if name else _from_file(spec)
    points = _entry_points()
    if spec in points:
        try:
            found = points[spec].load()
        except (Exception, SystemExit) as exc:  # a broken installed plug-in: say which, no traceback
            raise ConfigError(
                f"family {spec!r} (entry point {points[spec].value}) failed to load: {type(exc).__name__}: {exc}"
            ) from None
        where = f"entry point {points[spec].value}"
        return _adopt(_instance(found, where), spec, where)
    names = known_names()
    hint = did_you_mean(spec, names) or "."
    raise ConfigError(
        f"unknown kernel family {spec!r}{hint} Known: {', '.join(names)}; or give a family file, path/to/family.py"
    )


def _from_module(target: str, origin: str) -> Family:
    module, _, attr = target.partition(":")
    return _adopt(getattr(importlib.import_module(module), attr), origin, target)


def _builtin_by_file(file_name: str, attr: str) -> str | None:
    """The built-in defined as `attr` (FAMILY where none is named) in this package's kernels/`file_name`."""
    for name, target in BUILTINS.items():
        module, _, found = target.partition(":")
        if file_name == f"{module.rsplit('.', 1)[-1]}.py" and (attr or "FAMILY") == found:
            return name
    return None


def split_family_spec(spec: str) -> tuple[str, str]:
    """path/family.py[:NAME] as (path, NAME or "")."""
    return (
        (spec.rpartition(":")[0], spec.rpartition(":")[2]) if ":" in spec and not spec.endswith(".py") else (spec, "")
    )


def builtin_at(spec: str) -> str | None:
    """The built-in name of `path/to/module.py[:NAME]` where that file is this package's own module of a built-in
    (what a user typed): one family, one origin, whichever way it was asked for. Another file of the same name (a
    copy being edited) stays a family file of its own."""
    path_text, attr = split_family_spec(spec)
    try:
        path = Path(path_text)
        if path.suffix != ".py" or not path.is_file():
            return None
        resolved = path.resolve()
    except (OSError, ValueError, RuntimeError):  # too long, unreadable, a NUL byte, a symlink loop: not ours
        return None
    return _builtin_by_file(resolved.name, attr) if resolved.parent == Path(__file__).resolve().parent else None


def builtin_named(origin: str) -> str | None:
    """The built-in a record's family origin names: a built-in's name, or a path ending in mage_tune/kernels/ and a
    built-in's module file (`mage_tune/kernels/matmul_bf16.py[:NAME]`, as searches of the Hopper families by path
    recorded it, relative to wherever they ran). Read as text, never from the disk: the answer is an entry of
    BUILTINS, so a record can name only this package's own code."""
    if origin in BUILTINS:
        return origin
    path_text, attr = split_family_spec(origin)
    parts = path_text.replace("\\", "/").split("/")
    if len(parts) < 3 or parts[-3:-1] != ["mage_tune", "kernels"]:
        return None
    return _builtin_by_file(parts[-1], attr)


def _from_file(spec: str) -> Family:
    path_text, name = spec, None
    if ":" in spec and not spec.endswith(".py"):
        path_text, _, name = spec.rpartition(":")
    path = Path(path_text)
    if not path.is_file():
        raise InputError(_missing_file_message(path), file=path_text)
    if path.suffix != ".py":  # only a Python file is imported as code: a kernel or a record named here is not
        raise InputError(_not_a_family_file(path), file=path_text)
    module = import_file(path)
    if name is not None:
        if not hasattr(module, name):
            found = ", ".join(_families_in(module)) or "none"
            raise InputError(f"no {name!r} here; families defined here: {found}", file=str(path))
        found = getattr(module, name)
    elif hasattr(module, "FAMILY"):
        found = module.FAMILY
    else:
        candidates = _families_in(module)
        if len(candidates) != 1:
            why = "none" if not candidates else ", ".join(candidates)
            raise InputError(
                f"name the family to use as {path}:NAME, or define FAMILY; Family instances here: {why}",
                file=str(path),
            )
        found = getattr(module, candidates[0])
    origin = _portable(path) + (f":{name}" if name else "")
    return _adopt(_instance(found, str(path), path), origin, str(path))


KERNEL_SUFFIXES = (".cu", ".cuh", ".ptx", ".cubin", ".sass")


def _not_a_family_file(path: Path) -> str:
    what = "a family file is Python (path/to/family.py[:NAME])"
    if path.suffix in KERNEL_SUFFIXES:
        return f"{what}; a kernel ({path.suffix}) is census's to read: mage-tune census {path}"
    return what


def _portable(path: Path) -> str:
    """How records name a family file: relative to the current folder when it lies under it (a checkout's
    examples/ stays findable in any other checkout), else its absolute path."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(resolved)


def _families_in(module) -> list[str]:
    return sorted(k for k, v in vars(module).items() if isinstance(v, Family) and not k.startswith("_"))


def _missing_file_message(path: Path) -> str:
    folder = path.parent if str(path.parent) else Path(".")
    near = []
    if folder.is_dir():
        near = difflib.get_close_matches(path.name, [p.name for p in folder.iterdir()], n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(str(folder / n) for n in near)}?" if near else ""
    return f"no such family file{hint}"


def _instance(found, where: str, path: Path | None = None):
    """`found` itself, or an instance where it is a class: a constructor that raises is the family's error, said in
    one line naming its file (and line), never a traceback."""
    if not isinstance(found, type):
        return found
    try:
        return found()
    except (Exception, SystemExit) as exc:
        line = line_in(exc, path) if path is not None else None
        raise InputError(
            f"constructing {found.__name__}() failed: {type(exc).__name__}: {exc}", file=where, line=line
        ) from None


def _knob_problems(knobs) -> list[str]:
    """What makes a space ill-defined: a knob name given twice (a config, a dict, keeps one value for both, and the
    space's count is wrong) or a knob with no value (no config at all)."""
    if not isinstance(knobs, tuple | list) or not all(isinstance(k, Knob) for k in knobs):
        return ["knobs must be a tuple of Knob(name, domain, help)"]
    names = [k.name for k in knobs]
    twice = sorted({n for n in names if names.count(n) > 1})
    empty = [k.name for k in knobs if not len(k.domain)]
    return [f"knob {n!r} is declared twice" for n in twice] + [f"knob {n!r} has an empty domain" for n in empty]


def _compile_problems(found) -> list[str]:
    """A CUDA family's compile_options, defines and include_dirs, checked as the command line's are, so a bad one
    is said once, naming the family, rather than by every variant's build."""
    problems = []
    for attr, check in (("compile_options", check_option), ("defines", check_define)):
        values = getattr(found, attr, ())
        if isinstance(values, str) or not isinstance(values, tuple | list):
            problems.append(f"{attr} must be a tuple of strings, not {values!r}")
            continue
        for value in values:
            try:
                check(value)
            except InputError as exc:
                problems.append(f"{attr}: {exc.message}")
    folders = getattr(found, "include_dirs", ())
    if isinstance(folders, str) or not isinstance(folders, tuple | list):
        return [*problems, f"include_dirs must be a tuple of folders, not {folders!r}"]
    here = Path(inspect.getfile(type(found))).resolve().parent
    problems += [f"include_dirs: no folder {here / d}" for d in folders if not (here / d).is_dir()]
    return problems


def _adopt(found, origin: str, where: str) -> Family:
    """Check that what was found meets the contract and remember how it was found."""
    if not isinstance(found, Family):
        raise InputError(
            f"{type(found).__name__} is not a mage_tune Family (subclass CudaFamily or TritonFamily)", file=where
        )
    missing = found.missing_members()
    if missing:
        raise InputError(
            f"family {getattr(found, 'name', '?')!r} ({type(found).__name__}) lacks contract members: "
            f"{', '.join(missing)}",
            file=where,
        )
    problems = _knob_problems(found.knobs) + _compile_problems(found)
    if problems:
        raise InputError(f"family {found.name!r} ({type(found).__name__}): {'; '.join(problems)}", file=where)
    found.origin = origin
    copyreg.pickle(type(found), _pickled_as_origin)
    return found


def _pickled_as_origin(family: Family):
    """A family found here is pickled (to a compile process or a GPU worker) as how to find it again, so one from a
    user's file is imported there the same way, in isolation, with the command line's -I, -D and compiler options
    it builds with; one made by hand is pickled as it is."""
    if not family.origin:
        return family.__reduce_ex__(2)
    extra = getattr(family, "extra_source_options", None)
    if extra is not None:
        return (load_with_options, (family.origin, extra))
    return (load_family, (family.origin,))


def load_with_options(spec: str, options: SourceOptions | None) -> Family:
    """The family `spec` names, building with `options` as well (a CUDA family's with_source_options; None: as
    found)."""
    family = load_family(spec)
    return family if options is None else family.with_source_options(options)
