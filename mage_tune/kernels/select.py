"""Which configs of a family a command asks for: `--set` knobs (a partial set completes to the first valid config),
`--set knob=v1,v2` sweeps, a JSON list of configs, the whole space or a seeded sample of it; built in parallel, and
hand-written sources launched like a config."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

from mage_tune.arch import Arch
from mage_tune.compile import build_from_cu
from mage_tune.errors import ConfigError, InputError, MageError
from mage_tune.inputs import read_input
from mage_tune.kernels.base import Config, Family, Launch, Shape, Variant
from mage_tune.kernels.pool import build_many
from mage_tune.kernels.sample import sample_configs
from mage_tune.records.reader import read_json


def is_sweep(settings) -> bool:
    return any("," in item.partition("=")[2] for item in settings)


def sweep(fam: Family, shape: Shape, arch: Arch, settings, skipped: Callable[[str], None]) -> list[Config]:
    """Every combination of the listed values that the constraints allow; the others are reported and skipped."""
    keys, choices = [], []
    for item in settings:
        key, _, values = item.partition("=")
        keys.append(key.strip())
        choices.append([v.strip() for v in values.split(",")])
    configs, seen = [], set()
    for combo in itertools.product(*choices):
        try:
            config = fam.parse_settings([f"{k}={v}" for k, v in zip(keys, combo, strict=True)], shape, arch)
        except ConfigError as exc:
            skipped(str(exc))
            continue
        key = tuple(sorted(config.items()))
        if key not in seen:
            seen.add(key)
            configs.append(config)
    return configs


def listed(fam: Family, shape: Shape, arch: Arch, path: Path) -> list[Config]:
    """Configs from a JSON list; one that is incomplete, unknown or invalid here is an error naming its index."""
    found = read_json(path)
    if not isinstance(found, list) or not all(isinstance(c, dict) for c in found):
        raise InputError("expected a JSON list of configs (objects of knob -> value)", file=str(path))
    configs = []
    for index, config in enumerate(found):
        try:
            configs.append(fam.parse_settings([f"{k}={v}" for k, v in config.items()], shape, arch))
        except ConfigError as exc:
            raise ConfigError(f"{path}: config {index}: {exc}") from exc
    return configs


def whole_space(fam: Family, shape: Shape, arch: Arch, sample: int | None) -> list[Config]:
    if sample:
        return sample_configs(fam, shape, arch, sample, seed=0)
    return list(fam.configs(shape, arch))


def build_all(
    fam: Family, shape: Shape, arch: Arch, configs: list[Config], failed: Callable[[MageError], None]
) -> list[Variant]:
    """Compile in parallel; a config that fails to compile is reported through `failed` and left out."""
    variants = []
    for _config, built in build_many(fam, shape, arch, configs):
        if isinstance(built, MageError):
            failed(built)
        else:
            variants.append(built)
    return variants


def from_source(fam: Family, shape: Shape, arch: Arch, config: Config, path: str) -> Variant:
    """A hand-written kernel with a CUDA family's signature, launched on the config's grid and block. It declares
    its own (static) shared memory, so no dynamic shared memory is passed."""
    if not hasattr(fam, "kernel_name"):
        raise ConfigError(f"--source needs a CUDA template family; {fam.name} builds its own kernels")
    try:
        text = read_input(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", file=str(path)) from None
    art = build_from_cu(text, arch, str(path))
    launch = fam.launch(config, shape, arch)
    return Variant(
        fam.name,
        {**config, "source": Path(path).name},
        shape,
        arch,
        text,
        fam.kernel_name,
        fam.param_names,
        Launch(launch.grid, launch.block, 0),
        art,
    )
