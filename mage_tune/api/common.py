"""What mage_tune.search and mage_tune.bench share: the family and shape a call names (built with its compile
options), the progress shown, and the error the command line says as a usage error."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from mage_tune.cli.options import check_includes, compiler_options_of, with_source_options
from mage_tune.compile import SourceOptions
from mage_tune.errors import ConfigError, InputError
from mage_tune.kernels.base import Family, Shape
from mage_tune.kernels.registry import load_family
from mage_tune.progress import Progress

Echo = Callable[[str], None]
FamilyArg = str | Path | Family


class OptionConflict(InputError):
    """Two arguments that do not go together (`mage-tune` says it as a usage error, with the command's usage)."""


def quiet(text: str) -> None:
    """The echo where none is given: the API says nothing but through the echo it is handed."""


def strings(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """One string or several -> a tuple of them (a lone string is one item, never its characters)."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(str(v) for v in value)


def family_and_shape(
    family: FamilyArg,
    shape: Mapping[str, int] | None,
    include_dirs: str | Sequence[str] = (),
    defines: str | Sequence[str] = (),
    compiler_options: str | Sequence[str] = (),
) -> tuple[Family, Shape]:
    """The family (a name, a family file, `path.py:NAME`, an entry point, or a Family) building with the include
    folders, macros and compiler options given (as -I, -D and --compiler-option: checked the same, a Triton family
    refuses them), and the shape in its dimensions (its defaults where one is left out)."""
    includes, options = check_includes(strings(include_dirs)), compiler_options_of(strings(compiler_options))
    macros = strings(defines)
    source = (
        SourceOptions(includes=includes, defines=macros, options=options) if includes or macros or options else None
    )
    fam = with_source_options(family if isinstance(family, Family) else load_family(str(family)), source)
    if shape is not None and not isinstance(shape, Mapping):
        raise ConfigError(f"shape must be a mapping of dimension to size, like {{'m': 4096, 'd': 768}}; got {shape!r}")
    return fam, fam.shape_from(dict(shape or {}))


def source_kwargs(source: SourceOptions | None) -> dict:
    """The command line's -I, -D and --compiler-option (a SourceOptions, or None) as the API's keyword arguments."""
    if source is None:
        return {}
    return {"include_dirs": source.includes, "defines": source.defines, "compiler_options": source.options}


def setting_items(settings: Mapping[str, object] | str | Sequence[str]) -> list[str]:
    """`{"threads": 128, "vec": [4, 8]}` or `["threads=128", "vec=4,8"]` -> `["threads=128", "vec=4,8"]`."""
    if isinstance(settings, Mapping):
        return [f"{k}={','.join(map(str, v)) if isinstance(v, list | tuple) else v}" for k, v in settings.items()]
    return list(strings(settings))


def plain(data: dict) -> dict:
    """`data` as the JSON a command prints reads back (tuples as lists, other values as str): what --json gives."""
    return json.loads(json.dumps(data, default=str))


class _Silent:
    """Progress that shows nothing (progress=False)."""

    def set(self, done: int, note: str | None = None) -> None:
        pass

    def update(self, n: int = 1, note: str | None = None) -> None:
        pass

    def set_total(self, total: int) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc) -> None:
        pass


def progress_bar(shown: bool, total: int, label: str, unit: str) -> Progress | _Silent:
    """mage_tune.progress's bar on stderr where `shown` (redrawn on a terminal, a plain line per tenth of the work
    in a log), else nothing."""
    return Progress(total, label, unit=unit) if shown else _Silent()
