"""One-knob neighbours of configs in a family's space: each other value of a knob, repaired to the nearest valid
config that keeps it. The search's polish and the warm start's new-value seeds both walk them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from mage_tune.arch import Arch
from mage_tune.kernels.base import Config, Family, Shape


@dataclass(frozen=True)
class Neighbour:
    config: Config
    knob: str
    value: object  # the knob's value that makes it a neighbour
    source: str  # "PREFIX knob=value on BASE": that value, on which base config


def config_key(config: Config) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def neighbours(
    family: Family,
    bases: list[tuple[object, Config]],
    shape: Shape,
    arch: Arch,
    tried: set[str],
    prefix: str = "polish",
    values: dict[str, list] | None = None,
) -> Iterator[Neighbour]:
    """Every other value of every knob (or only `values[knob]`, where given) on each (label, config) of `bases`, as
    its nearest valid config (that knob kept), in base, knob and domain order, each named "PREFIX knob=value on
    LABEL"; none twice, none whose key is in `tried`. Lazily: a caller that needs a few stops early."""
    seen = set(tried)
    for label, base in bases:
        for knob in family.knobs:
            for value in knob.domain if values is None else values.get(knob.name, ()):
                if value == base[knob.name]:
                    continue
                config = family.nearest_valid({**base, knob.name: value}, shape, arch, keep=(knob.name,))
                if config is None or config_key(config) in seen:
                    continue
                seen.add(config_key(config))
                yield Neighbour(config, knob.name, value, f"{prefix} {knob.name}={value} on {label}")
